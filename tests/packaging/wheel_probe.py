"""Run by the interpreter of a fresh venv that has only the built wheel installed (see
test_wheel.py): imports `ttlstate._native` from that wheel, opens a native DB with the TTL
compaction filter, writes, compacts, reopens and reads back, and reports as JSON what it saw,
including which shared files of the RocksDB family the process has mapped (from /proc/self/maps):
none, as the wheel's library links them statically.
Usage: python wheel_probe.py EMPTY_DIR. It imports no `tempfile`/`shutil`: those import `bz2`,
whose extension maps the system's libbz2 for Python's own use, unrelated to the wheel.
"""

from __future__ import annotations

import json
import os
import re
import struct
import sys

TTL = 1000
T = 1_000_000
FAMILY = re.compile(r"/(librocksdb|libgflags|libsnappy|liblz4|libzstd|libbz2)[-.][^/]*$")


def ts(t: int) -> bytes:
    return struct.pack(">q", t)


def mapped_family() -> list[str]:
    with open("/proc/self/maps") as maps:
        paths = {line.split(None, 5)[5].strip() for line in maps if len(line.split(None, 5)) == 6}
    return sorted(p for p in paths if FAMILY.search(p))


def main() -> None:
    from ttlstate import _native
    from ttlstate.engine.base import FilterSettings
    from ttlstate.engine.native_engine import NativeEngine

    old = {b"old%03d" % i: ts(T) + b"expired-%d" % i for i in range(200)}
    new = {b"new%03d" % i: ts(T + 5 * TTL) + (b"live-%d" % i) * 20 for i in range(50)}
    path = os.path.join(sys.argv[1], "db")
    settings = FilterSettings(ttl_ms=TTL, query_time_after_num_entries=1)
    engine = NativeEngine(path, settings)
    engine.write(list(old.items()) + list(new.items()))
    engine.set_time(T)
    engine.compact()
    before = dict(engine.iterate())
    engine.set_time(T + TTL)  # the old entries reach their expiration time
    engine.compact()
    after = dict(engine.iterate())
    metrics = engine.metrics()
    sst_bytes = engine.disk_bytes()
    engine.close()
    reopened = NativeEngine(path, settings)
    after_reopen = dict(reopened.iterate())
    reopened.close()
    # The engine keeps no info LOG (native/src/db.cpp: NullLogger), so the compression comes from
    # the newest OPTIONS file: the one the DB was opened with, which RocksDB refuses to open with a
    # compression the library was not linked with.
    options = max((f for f in os.listdir(path) if f.startswith("OPTIONS-")), key=lambda f: int(f[8:]))
    with open(os.path.join(path, options)) as opts:
        supported = sorted(set(re.findall(r"^\s*compression=(k\w+)$", opts.read(), re.M)))
    print(json.dumps({
        "native_file": _native.LIBRARY_PATH,
        "prefix": sys.prefix,
        "has_filter": engine.has_compaction_filter,
        "before_equal": before == {**old, **new},
        "after_equal": after == new,
        "reopen_equal": after_reopen == new,
        "filter_removed": metrics["filter_removed"],
        "sst_bytes": sst_bytes,
        "compressions": supported,
        "mapped": mapped_family(),
    }))


if __name__ == "__main__":
    main()
