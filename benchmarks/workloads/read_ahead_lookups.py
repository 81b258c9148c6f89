"""What the state server spends per key on the shim's read-ahead (OP_GET_ENTRIES) of cold state.

One store the size of one partition of the cold preset (`spark_side_by_side --preset
cold-uniform`: 2.5M keys over 4 partitions), grown over several committed versions of
`LONG`-keyed entries, then many requests of `--chunk` keys drawn uniformly from it, as the
read-ahead sends the keys a chunk of input rows needs that neither the executor's cache nor the
key filter answers. Reports the state server worker's CPU time and the client's wall time per
key. With `--baseline REF` the same is run by an older checkout's server (its own store), in
alternating order, `--rounds` times each, and `ratio_to_baseline` compares the medians.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import struct
import time
from typing import Any

import psutil

from benchmarks.harness.bench_store import bench_store
from benchmarks.harness.output import save


def _key(i: int) -> bytes:
    """A `LONG` key as Spark's UnsafeRow holds it: the null bits' word, then the value."""
    return b"\0" * 8 + struct.pack(">q", i)


def _cpu_s(pid: int) -> float:
    times = psutil.Process(pid).cpu_times()
    return times.user + times.system


def run(env: dict[str, str] | None, versions: int, keys_per_version: int, chunk: int,
        requests: int, seed: int) -> dict[str, Any]:
    with bench_store(env) as (c, h, worker):
        rnd = random.Random(seed)
        ids = list(range(versions * keys_per_version))
        rnd.shuffle(ids)
        now = 1_000
        for v in range(versions):
            c.load(h, v, now)
            part = ids[v * keys_per_version:(v + 1) * keys_per_version]
            for i in range(0, len(part), 1000):
                c.writes(h, [(_key(j), b"\0" * 8) for j in part[i:i + 1000]])
            c.commit(h)
            now += 1_000
        c.load(h, versions, now)
        asks = [[_key(rnd.randrange(len(ids))) for _ in range(chunk)] for _ in range(requests)]
        found = 0
        cpu, started = _cpu_s(worker), time.perf_counter()
        for keys in asks:
            found += sum(value is not None for value, _ts in c.get_entries(h, keys))
        wall, cpu = time.perf_counter() - started, _cpu_s(worker) - cpu
        n = chunk * requests
        return {"keys": len(ids), "chunk": chunk, "requests": requests, "found": round(found / n, 4),
                "server_cpu_us_per_key": round(1e6 * cpu / n, 2), "wall_us_per_key": round(1e6 * wall / n, 2)}


def main(argv: list[str] | None = None) -> list[dict[str, object]]:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--versions", type=int, default=8)
    ap.add_argument("--keys-per-version", type=int, default=80_000)
    ap.add_argument("--chunk", type=int, default=200, help="keys per request")
    ap.add_argument("--requests", type=int, default=1500)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--baseline", metavar="REF", help="also run an older checkout's server")
    ap.add_argument("--quick", action="store_true", help="a tenth of the keys and requests, one round")
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    if args.quick:
        args.keys_per_version, args.requests = args.keys_per_version // 10, args.requests // 10
        args.rounds = 1
    variants: list[tuple[str, dict[str, str] | None]] = [("ttlstate", None)]
    if args.baseline:
        from benchmarks.harness.baseline import prepare
        base = prepare(args.baseline)
        variants.append((f"ttlstate@{base.sha[:7]}", base.env))
    rounds: dict[str, list[dict[str, Any]]] = {name: [] for name, _ in variants}
    for r in range(args.rounds):
        for name, env in variants if r % 2 == 0 else variants[::-1]:
            got = run(env, args.versions, args.keys_per_version, args.chunk, args.requests, seed=r)
            print(name, r, got, flush=True)
            rounds[name].append(got)
    results: list[dict[str, object]] = []
    for name, got in rounds.items():
        results.append({"variant": name, **{k: got[0][k] for k in ("keys", "chunk", "requests", "found")},
                        "server_cpu_us_per_key": statistics.median(g["server_cpu_us_per_key"] for g in got),
                        "wall_us_per_key": statistics.median(g["wall_us_per_key"] for g in got),
                        "server_cpu_us_per_key_per_round": [g["server_cpu_us_per_key"] for g in got]})
    if len(results) == 2:
        results[0]["ratio_to_baseline"] = round(
            float(results[0]["server_cpu_us_per_key"]) / float(results[1]["server_cpu_us_per_key"]), 3)  # type: ignore[arg-type]
    for row in results:
        print(row)
    return save(results, args.json)


if __name__ == "__main__":
    os.environ.setdefault("TTLSTATE_LOG_LEVEL", "WARNING")
    main()
