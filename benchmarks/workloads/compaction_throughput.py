"""Compaction throughput with the TTL filter off and on (queryTimeAfterNumEntries 1, 100, 1000),
at 0%, 3% and 50% expired entries. Every case compacts a copy of the same fully compacted DB,
opened with the case's filter settings, with the bottommost level forced, so each entry passes
the filter exactly once and no background compaction runs meanwhile; the median of a few runs
is reported. entries/s and MB/s are of the input.
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import struct
import tempfile
import time

from benchmarks.harness.output import save
from ttlstate import _native

TTL = 60_000
NOW = 10_000_000


def build_template(path: str, n: int, expired_fraction: float) -> int:
    """One fully compacted DB (no filter); every case starts from a copy of these same files."""
    db = _native.DB(path)
    rnd = random.Random(42)
    payload = b"v" * 40
    nbytes = 0
    batch = []
    for i in range(n):  # distinct keys: every entry survives or is removed, none is overwritten
        ts = NOW - 2 * TTL if rnd.random() < expired_fraction else NOW
        key = b"key-%010d" % i
        value = struct.pack(">q", ts) + payload
        nbytes += len(key) + len(value)
        batch.append((key, value))
        if len(batch) == 50_000:
            db.write(batch)
            batch = []
    db.write(batch)
    db.flush()
    db.compact()
    db.close()
    return nbytes


def run_case(template: str, n: int, nbytes: int, expired: float, query_after: int | None,
             repeats: int) -> dict[str, object]:
    """Median of `repeats` full compactions (bottommost level forced: every entry passes the
    filter exactly once) of a copy of the template, opened with the filter off or on."""
    times = []
    for _ in range(repeats):
        path = tempfile.mkdtemp(prefix="ttlstate-compact-")
        try:
            shutil.copytree(template, path, dirs_exist_ok=True)
            if query_after is None:
                db = _native.DB(path)
            else:
                db = _native.DB(path, ttl=TTL, query_time_after_num_entries=query_after)
                db.set_time(NOW)
            started = time.perf_counter()
            db.compact()
            times.append(time.perf_counter() - started)
            metrics = db.filter_metrics()
            survivors = db.count_keys()
            db.close()
        finally:
            shutil.rmtree(path, ignore_errors=True)
    seconds = statistics.median(times)
    return {"entries": n, "expired_fraction": expired,
            "filter": "off" if query_after is None else f"on N={query_after}",
            "seconds": round(seconds, 3), "entries_per_s": round(n / seconds),
            "mb_per_s": round(nbytes / seconds / 1e6, 1), "removed": metrics["filter_removed"],
            "time_queries": metrics["filter_time_queries"], "survivors": survivors}


def main(argv: list[str] | None = None) -> list[dict[str, object]]:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--entries", type=int, default=2_000_000)
    ap.add_argument("--repeats", type=int, default=3, help="compactions per case (median)")
    ap.add_argument("--quick", action="store_true", help="200k entries, one compaction per case")
    ap.add_argument("--json", help="write results here")
    args = ap.parse_args(argv)
    n = 200_000 if args.quick else args.entries
    repeats = 1 if args.quick else args.repeats
    results = []
    for expired in (0.0, 0.03, 0.5):
        template = tempfile.mkdtemp(prefix="ttlstate-compact-template-")
        try:
            nbytes = build_template(template, n, expired)
            for query_after in (None, 1, 100, 1000):
                r = run_case(template, n, nbytes, expired, query_after, repeats)
                print(r, flush=True)
                results.append(r)
        finally:
            shutil.rmtree(template, ignore_errors=True)
    return save(results, args.json)


if __name__ == "__main__":
    main()
