"""Store operations per second through the state server (the bridge), from a Python client.

What one synchronous round trip costs (get, hit and miss), how fast pipelined writes flow, and
a chunked full scan. The JVM shim makes the same frames; its extra cost is JNI-free socket I/O.
"""

from __future__ import annotations

import argparse
import os
import time

from benchmarks.harness.bench_store import bench_store
from benchmarks.harness.output import save


def run(n: int) -> dict[str, object]:
    with bench_store() as (c, h, _worker):
        c.load(h, 0, 1000)
        keys = [b"key-%09d" % i for i in range(n)]
        started = time.perf_counter()
        for i in range(0, n, 1000):
            c.writes(h, [(k, b"v" * 48) for k in keys[i:i + 1000]])
        c.get(h, b"sync")  # waits for every pipelined write
        writes = n / (time.perf_counter() - started)
        c.commit(h)
        c.load(h, 1, 1000)
        started = time.perf_counter()
        for k in keys:
            c.get(h, k)
        hits = n / (time.perf_counter() - started)
        started = time.perf_counter()
        for k in keys:
            c.get(h, k + b"x")
        misses = n / (time.perf_counter() - started)
        started = time.perf_counter()
        scanned = len(c.scan(h))
        scan = scanned / (time.perf_counter() - started)
        return {"rows": n, "pipelined_writes_per_s": round(writes), "get_hit_per_s": round(hits),
                "get_miss_per_s": round(misses), "round_trip_us": round(1e6 / misses, 1),
                "scan_rows_per_s": round(scan)}


def main(argv: list[str] | None = None) -> list[dict[str, object]]:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--quick", action="store_true", help="20k rows")
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    results = [run(20_000 if args.quick else args.rows)]
    print(results[0])
    return save(results, args.json)


if __name__ == "__main__":
    os.environ.setdefault("TTLSTATE_LOG_LEVEL", "WARNING")
    main()
