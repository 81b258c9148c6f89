"""Compaction throughput with the TTL filter off and on (queryTimeAfterNumEntries 1, 100, 1000),
at 0%, 3% and 50% expired entries. A full manual compaction of a freshly written DB is timed;
entries/s and MB/s are of the input.
"""

from __future__ import annotations

import argparse
import random
import shutil
import struct
import tempfile
import time

from benchmarks.output import save
from ttlstate import _native

TTL = 60_000
NOW = 10_000_000


def build_db(path: str, n: int, expired_fraction: float, query_after: int | None) -> tuple[object, int]:
    if query_after is None:
        db = _native.DB(path)
    else:
        db = _native.DB(path, ttl=TTL, query_time_after_num_entries=query_after)
    rnd = random.Random(42)
    payload = b"v" * 40
    nbytes = 0
    batch = []
    for _ in range(n):
        ts = NOW - 2 * TTL if rnd.random() < expired_fraction else NOW
        key = b"key-%010d" % rnd.randrange(1 << 40)
        value = struct.pack(">q", ts) + payload
        nbytes += len(key) + len(value)
        batch.append((key, value))
        if len(batch) == 50_000:
            db.write(batch)
            batch = []
    db.write(batch)
    db.flush()
    db.set_time(NOW)
    return db, nbytes


def run_case(n: int, expired: float, query_after: int | None) -> dict[str, object]:
    path = tempfile.mkdtemp(prefix="ttlstate-compact-")
    try:
        db, nbytes = build_db(path, n, expired, query_after)
        started = time.perf_counter()
        db.compact()
        seconds = time.perf_counter() - started
        metrics = db.filter_metrics()
        survivors = db.count_keys()
        db.close()
    finally:
        shutil.rmtree(path, ignore_errors=True)
    return {"entries": n, "expired_fraction": expired,
            "filter": "off" if query_after is None else f"on N={query_after}",
            "seconds": round(seconds, 3), "entries_per_s": round(n / seconds),
            "mb_per_s": round(nbytes / seconds / 1e6, 1), "removed": metrics["filter_removed"],
            "time_queries": metrics["filter_time_queries"], "survivors": survivors}


def main(argv: list[str] | None = None) -> list[dict[str, object]]:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--entries", type=int, default=2_000_000)
    ap.add_argument("--quick", action="store_true", help="200k entries")
    ap.add_argument("--json", help="write results here")
    args = ap.parse_args(argv)
    n = 200_000 if args.quick else args.entries
    results = []
    for expired in (0.0, 0.03, 0.5):
        for query_after in (None, 1, 100, 1000):
            r = run_case(n, expired, query_after)
            print(r, flush=True)
            results.append(r)
    return save(results, args.json)


if __name__ == "__main__":
    main()
