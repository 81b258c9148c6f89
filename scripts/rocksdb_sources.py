"""Which of RocksDB's library sources the portable native library links: the list
scripts/rocksdb_sources.txt that scripts/build_static_deps.sh builds (and no other).

A static link pulls an object out of an archive only when it defines a symbol still undefined;
this replays that, with `nm`, from the native library's objects over every object of a full
RocksDB build. Regenerate the list when a native change needs a RocksDB part the list lacks (the
wheel's link then fails with `-z defs`, naming the symbol):

    TTLSTATE_ROCKSDB_SOURCES=all scripts/build_static_deps.sh .venv-build/bin/python
        (keeps its objects: it prints the prefix; they are under <prefix>/build/rocksdb)
    scripts/build_wheel.sh ...   (or just its native compile step, for build/portable/obj/*.o)
    python3 scripts/rocksdb_sources.py <prefix>/build/rocksdb build/portable/obj/*.o \\
        > scripts/rocksdb_sources.txt
"""

from __future__ import annotations

import os
import subprocess
import sys

OBJ_ROOT = os.path.join("CMakeFiles", "rocksdb.dir")
UNDEFINED = {"U"}
NOT_A_DEFINITION = {"U", "w", "v"}  # undefined, or weak undefined


def symbols(path: str) -> tuple[set[str], set[str]]:
    """(defined, undefined) global symbols of one object file."""
    out = subprocess.run(["nm", "-g", path], capture_output=True, text=True, check=True).stdout
    defined, undefined = set(), set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] in UNDEFINED:
            undefined.add(parts[1])
        elif len(parts) >= 3 and parts[1] not in NOT_A_DEFINITION:
            defined.add(parts[2])
    return defined, undefined


def closure(build_dir: str, native_objects: list[str]) -> list[str]:
    """The RocksDB sources (relative to its source tree; build_version.cc is generated) whose
    objects a static link of `native_objects` pulls in."""
    root = os.path.join(build_dir, OBJ_ROOT)
    members = {}
    for dirpath, _, files in os.walk(root):
        for f in files:
            if f.endswith(".o"):
                path = os.path.join(dirpath, f)
                members[os.path.relpath(path, root)[:-2]] = symbols(path)
    definers: dict[str, str] = {}
    for source, (defined, _) in sorted(members.items()):
        for name in defined:
            definers.setdefault(name, source)
    have: set[str] = set()
    wanted: set[str] = set()
    for obj in native_objects:
        defined, undefined = symbols(obj)
        have |= defined
        wanted |= undefined
    pulled: set[str] = set()
    pending = wanted - have
    while pending:
        name = pending.pop()
        source = definers.get(name)
        if source is None or source in pulled or name in have:
            continue
        pulled.add(source)
        defined, undefined = members[source]
        have |= defined
        pending |= undefined - have
    return sorted(pulled)


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    print("# RocksDB library sources the native library links: written by scripts/rocksdb_sources.py")
    for source in closure(argv[0], argv[1:]):
        print(source)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
