"""Embedded store operations per second (no bridge), per engine, TTL off and on.

The floor under everything the Spark path can do: put+commit, get (hit), keyExists (miss),
full iteration, and restore from checkpoint into an empty local directory.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

from benchmarks.harness.output import save
from ttlstate.checkpoint.location import LocalCheckpointLocation
from ttlstate.config.store_config import store_config_from_confs
from ttlstate.engine.select import native_available
from ttlstate.store.provider import StoreProvider
from ttlstate.ttl.clock import ManualClock

PFX = "spark.sql.streaming.stateStore.ttlstate."


def _rate(n: int, seconds: float) -> float:
    return round(n / seconds, 1) if seconds > 0 else float("inf")


def run_case(engine: str, ttl: str, n: int) -> dict[str, object]:
    root = tempfile.mkdtemp(prefix="ttlstate-bench-")
    cfg = store_config_from_confs({PFX + "engine": engine, PFX + "ttl": ttl})
    clock = ManualClock(1_000_000)
    ck = LocalCheckpointLocation(os.path.join(root, "ck"))
    p = StoreProvider("bench", os.path.join(root, "local"), ck, cfg, clock)
    keys = [f"key-{i:09d}".encode() for i in range(n)]
    value = b"v" * 48
    out: dict[str, object] = {"engine": engine, "ttl": ttl, "rows": n}

    t = time.perf_counter()
    s = p.get_store(0)
    for k in keys:
        s.put(k, value)
    s.commit()
    out["put_commit_per_s"] = _rate(n, time.perf_counter() - t)

    s = p.get_store(1)
    t = time.perf_counter()
    for k in keys:
        s.get(k)
    out["get_hit_per_s"] = _rate(n, time.perf_counter() - t)
    t = time.perf_counter()
    for k in keys:
        s.key_exists(k + b"x")
    out["key_exists_miss_per_s"] = _rate(n, time.perf_counter() - t)
    t = time.perf_counter()
    count = sum(1 for _ in s.iterator())
    out["iterate_per_s"] = _rate(count, time.perf_counter() - t)
    s.abort()
    t = time.perf_counter()
    p.write_snapshot()
    out["snapshot_per_s"] = _rate(n, time.perf_counter() - t)
    p.close()

    p2 = StoreProvider("bench", os.path.join(root, "local2"), ck, cfg, clock)
    t = time.perf_counter()
    p2.get_store(1).release()
    out["restore_per_s"] = _rate(n, time.perf_counter() - t)
    p2.close()
    return out


def main(argv: list[str] | None = None) -> list[dict[str, object]]:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--quick", action="store_true", help="20k rows")
    ap.add_argument("--json", help="write results here")
    args = ap.parse_args(argv)
    n = 20_000 if args.quick else args.rows
    engines = ["rocksdict"] + (["native"] if native_available() else [])
    results = [run_case(e, ttl, n) for e in engines for ttl in ("off", "1h")]
    for r in results:
        print(r)
    return save(results, args.json)


if __name__ == "__main__":
    main()
