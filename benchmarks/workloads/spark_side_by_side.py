"""Spark's HDFS and RocksDB providers vs ttlstate (TTL off, TTL on), same data, one run.

`ttlstate-ttl-on-no-keyfilter` is ttlstate with TTL on and the shim's key filter off
(`keyFilter.maxKeys=0`), `ttlstate-ttl-on-no-cache` with the executor's cross-batch cache off
(`cache.maxBytes=0`), `ttlstate-ttl-on-small-cache` with a 4 MiB cache (a tenth of the default
workload's working set), `ttlstate-ttl-on-no-read-ahead` without the read-ahead of state
(`readAhead.chunkRows=0`): the before/after of those optimisations, measured in the same run.
`--distribution zipf` draws keys from a Zipf distribution (s = 1.1) instead of uniformly.
`--input parquet` writes the batches as Parquet files instead of JSON, `--key-type long` the
keys as integers (`LONG`) instead of strings. `--preset cold-uniform`
is large, cold state where no executor cache can help: 8 batches of 500k rows drawn uniformly
from 4M keys (about 2.5M distinct), Parquet input, Spark's HDFS and RocksDB providers and
ttlstate with TTL on (`--quick`: a fiftieth of it).
With `--baseline REF`, `ttlstate-ttl-on@<sha>` is the same configuration run by an older
checkout (see `benchmarks/harness/baseline.py`), and `ratio_to_baseline` compares the two.

Workloads: `groupBy(key).count()` in update mode and `dropDuplicates(key)`, on a file source
of `batches` JSON files (default 1M rows over 200k keys in 5 batches), 4 shuffle partitions,
`local[2]`. Each variant runs in its own child process (its own JVM and state server): first
an unmeasured warm-up pass of both workloads on a small input, then both workloads. Reports
rows/s per variant and workload, the ratio to Spark's RocksDB provider in the same run, for
ttlstate the bridge round trips per state operation (from its custom metrics), and the peak
RSS of the variant's JVM (and state server) over its whole child process. `--rounds N` runs
every variant N times in alternating order and reports medians. `--checkpoint-fs hdfs` keeps
the checkpoints on a MiniDFSCluster started for the run (`benchmarks/harness/checkpoint_fs.py`); every
row also gives the state operator's commit time per batch and the bytes each batch wrote to
the checkpoint's state folder. `--driver-memory` sets every variant's JVM heap (default 1g, on
which Spark's HDFS provider runs out of memory on the cold preset).
"""

from __future__ import annotations

import argparse
import bisect
import itertools
import json
import os
import random
import shutil
import statistics
import tempfile
from typing import Any

from benchmarks.harness import checkpoint_fs
from benchmarks.harness.baseline import prepare
from benchmarks.harness.checkpoint_fs import checkpoint_root, join
from benchmarks.harness.output import save
from benchmarks.harness.subproc import run_child
from benchmarks.harness.variants import (
    CACHE_KEY,
    HDFS,
    KEY_FILTER_KEY,
    READ_AHEAD_KEY,
    ROCKSDB,
    TTL_KEY,
    TTLSTATE,
    Variant,
    pick,
    ratio,
    with_baseline,
)

VARIANTS: dict[str, Variant] = {
    "hdfs": Variant("hdfs", HDFS),
    "rocksdb": Variant("rocksdb", ROCKSDB),
    "ttlstate-ttl-off": Variant("ttlstate-ttl-off", TTLSTATE, {TTL_KEY: "off"}),
    "ttlstate-ttl-on": Variant("ttlstate-ttl-on", TTLSTATE, {TTL_KEY: "1h"}),
    "ttlstate-ttl-on-no-keyfilter": Variant("ttlstate-ttl-on-no-keyfilter", TTLSTATE,
                                            {TTL_KEY: "1h", KEY_FILTER_KEY: "0"}),
    "ttlstate-ttl-on-no-cache": Variant("ttlstate-ttl-on-no-cache", TTLSTATE,
                                        {TTL_KEY: "1h", CACHE_KEY: "0"}),
    "ttlstate-ttl-on-small-cache": Variant("ttlstate-ttl-on-small-cache", TTLSTATE,
                                           {TTL_KEY: "1h", CACHE_KEY: "4m"}),
    "ttlstate-ttl-on-no-read-ahead": Variant("ttlstate-ttl-on-no-read-ahead", TTLSTATE,
                                             {TTL_KEY: "1h", READ_AHEAD_KEY: "0"}),
}
WORKLOADS = ("aggregation", "dropDuplicates")
# Named workload sizes: rows, keys, batches, input format and default providers.
PRESETS: dict[str, dict[str, Any]] = {
    "cold-uniform": {"rows": 4_000_000, "keys": 4_000_000, "batches": 8, "input": "parquet",
                     "distribution": "uniform", "providers": "hdfs,rocksdb,ttlstate-ttl-on"},
}
QUICK_FACTOR = 50  # --quick with a preset: rows and keys divided by this


def write_input(directory: str, rows: int, keys: int, batches: int, seed: int = 7,
                distribution: str = "uniform", fmt: str = "json", key_type: str = "string") -> None:
    """`batches` files of `rows / batches` rows (`key`, `v`), in the order they are read; a key
    is `k<i>` (string) or `i` (long)."""
    rnd = random.Random(seed)
    os.makedirs(directory, exist_ok=True)
    per = rows // batches
    if distribution == "zipf":  # key i has weight 1 / (i + 1)^1.1: a few hot keys, a long tail
        weights = list(itertools.accumulate(1.0 / (i + 1) ** 1.1 for i in range(keys)))
        draw = lambda: bisect.bisect(weights, rnd.random() * weights[-1])  # noqa: E731
    else:
        draw = lambda: rnd.randrange(keys)  # noqa: E731
    longs = key_type == "long"
    key = draw if longs else (lambda: f"k{draw()}")  # noqa: E731
    key_schema = "int64" if longs else "string"
    for b in range(batches):
        path = os.path.join(directory, f"part-{b:03d}.{fmt}")
        if fmt == "parquet":
            import pyarrow as pa
            import pyarrow.parquet as pq

            table = pa.table({"key": [key() for _ in range(per)], "v": list(range(per))},
                             schema=pa.schema([("key", key_schema), ("v", pa.int64())]))
            pq.write_table(table, path)
        else:
            with open(path, "w") as f:
                f.writelines(json.dumps({"key": key(), "v": i}, separators=(",", ":")) + "\n"
                             for i in range(per))


def run_variant(v: Variant, input_dir: str, warm_dir: str, work: str, timeout: float,
                round_no: int = 0, ck_root: str | None = None,
                fmt: str = "json", key_type: str = "string",
                driver_memory: str = "1g") -> list[dict[str, Any]]:
    """Both workloads of one variant in a fresh child process; one row per workload. The
    checkpoints go under ck_root (default: `work`)."""
    name = f"{v.name.replace('@', '-at-')}-r{round_no}"
    here = os.path.join(work, name)
    os.makedirs(here)
    params = {"provider_class": v.provider_class, "confs": dict(v.confs), "ttlstate": v.is_ttlstate,
              "workloads": list(WORKLOADS), "input_dir": input_dir, "input_format": fmt,
              "key_type": key_type, "warm_dir": warm_dir,
              "ck_root": here if ck_root is None else join(ck_root, name),
              "spark_confs": {"spark.sql.shuffle.partitions": "4", "spark.driver.memory": driver_memory}}
    out, rss = run_child("benchmarks.workloads.side_by_side_child", params, v.env(), here + ".log", timeout)
    jars = [j for j in out["spark_jars"].split(",") if "ttlstate" in j]
    v.check_code([out["ttlstate_file"], *jars], sorted(rss.server_files))
    rows = []
    for r in out["rows"]:
        row = {"provider": v.name, **r, "round": round_no, "input_format": fmt, "key_type": key_type,
               "driver_memory": driver_memory}
        if v.is_ttlstate:
            row["ttlstate_file"] = out["ttlstate_file"]
            row["server_peak_rss_mb"] = rss.as_dict()["server_peak_rss_mb"]
            row["server_peak_pss_mb"] = rss.as_dict()["server_peak_pss_mb"]
        row["jvm_peak_rss_mb"] = rss.as_dict()["jvm_peak_rss_mb"]
        row["jvm_peak_pss_mb"] = rss.as_dict()["jvm_peak_pss_mb"]
        row["loadavg_1m_mean"] = rss.as_dict()["loadavg_1m_mean"]
        print(row, flush=True)
        rows.append(row)
    return rows


def combine_rounds(rows: list[dict[str, Any]]) -> list[dict[str, object]]:
    """One row per (provider, workload): the first round's row with the median seconds and
    rows/s over rounds, and every round's rows/s when there were several."""
    groups: dict[tuple[object, object], list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r["provider"], r["workload"]), []).append(r)
    out: list[dict[str, object]] = []
    for same in groups.values():
        row = {k: v for k, v in same[0].items() if k != "round"}
        row["seconds"] = round(statistics.median(float(x["seconds"]) for x in same), 3)
        if "commit_ms_per_batch" in row:  # per batch, median over rounds
            for key in ("commit_ms_per_batch", "checkpoint_bytes_per_batch"):
                row[key] = [statistics.median(v) for v in zip(*(x[key] for x in same), strict=True)]
        row["rows_per_s"] = round(statistics.median(float(x["rows_per_s"]) for x in same), 1)
        if len(same) > 1:
            row["rows_per_s_per_round"] = [x["rows_per_s"] for x in same]
        out.append(row)
    return out


def add_ratios(results: list[dict[str, object]]) -> None:
    """rows/s of each run divided by Spark's RocksDB provider's on the same workload, and, for
    a variant with a baseline twin (`<name>@<sha>`), by the twin's (above 1: faster)."""
    rate = {(r["provider"], r["workload"]): r["rows_per_s"] for r in results}
    for r in results:
        base = rate.get(("rocksdb", r["workload"]))
        if base:
            r["ratio_to_rocksdb"] = ratio(r["rows_per_s"], base)
        twin = next((p for (p, w) in rate if w == r["workload"] and "@" in p
                     and p.split("@")[0] == r["provider"]), None)
        if twin is not None:
            r["ratio_to_baseline"] = ratio(r["rows_per_s"], rate[(twin, r["workload"])])
            r["baseline"] = twin


def apply_preset(args: argparse.Namespace) -> argparse.Namespace:
    """The preset's sizes, format and providers (an explicit --providers wins), then --quick."""
    preset = PRESETS.get(args.preset or "")
    if preset is not None:
        args.rows, args.keys, args.batches = preset["rows"], preset["keys"], preset["batches"]
        args.input, args.distribution = preset["input"], preset["distribution"]
        args.providers = args.providers or preset["providers"]
        if args.quick:
            args.rows, args.keys = args.rows // QUICK_FACTOR, args.keys // QUICK_FACTOR
    elif args.quick:
        args.rows, args.keys = 50_000, 10_000
    args.providers = args.providers or ",".join(VARIANTS)
    return args


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--keys", type=int, default=200_000)
    ap.add_argument("--batches", type=int, default=5)
    ap.add_argument("--distribution", choices=("uniform", "zipf"), default="uniform")
    checkpoint_fs.add_option(ap)
    ap.add_argument("--input", choices=("json", "parquet"), default="json", help="input file format")
    ap.add_argument("--key-type", choices=("string", "long"), default="string",
                    help="the key column's type: `k<i>` strings or the integers themselves")
    ap.add_argument("--preset", choices=sorted(PRESETS),
                    help="a named workload; overrides --rows, --keys, --batches, --input, --distribution "
                         "and the default --providers")
    ap.add_argument("--quick", action="store_true",
                    help=f"50k rows, 10k keys (with --preset: its sizes / {QUICK_FACTOR})")
    ap.add_argument("--providers")
    ap.add_argument("--baseline", metavar="REF", help="also run ttlstate from this older commit")
    ap.add_argument("--baseline-variants", default="ttlstate-ttl-on",
                    help="which ttlstate variants get a baseline twin")
    ap.add_argument("--rounds", type=int, default=1,
                    help="run every variant this many times, in alternating order; medians")
    ap.add_argument("--timeout", type=float, default=3600, help="seconds per variant")
    ap.add_argument("--driver-memory", default="1g",
                    help="every variant's JVM heap (spark.driver.memory): Spark's HDFS provider keeps "
                         "all state on it and needs several times 1g on the cold preset")
    ap.add_argument("--json", help="write results here")
    return apply_preset(ap.parse_args(argv))


def main(argv: list[str] | None = None) -> list[dict[str, object]]:
    args = parse_args(argv)
    baseline = prepare(args.baseline) if args.baseline else None
    variants = with_baseline(pick(VARIANTS, args.providers), baseline, args.baseline_variants)
    work = tempfile.mkdtemp(prefix="ttlstate-sbs-")
    runs: list[dict[str, Any]] = []
    try:
        input_dir, warm_dir = os.path.join(work, "input"), os.path.join(work, "warmup")
        write_input(input_dir, args.rows, args.keys, args.batches, distribution=args.distribution,
                    fmt=args.input, key_type=args.key_type)
        write_input(warm_dir, 5_000, 1_000, 1, fmt=args.input, key_type=args.key_type)
        with checkpoint_root(args.checkpoint_fs, work) as ck_root:
            for round_no in range(args.rounds):
                for v in variants if round_no % 2 == 0 else list(reversed(variants)):
                    runs += run_variant(v, input_dir, warm_dir, work, args.timeout, round_no, ck_root,
                                        args.input, args.key_type, args.driver_memory)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    results = combine_rounds(runs)
    add_ratios(results)
    return save(results, args.json)


if __name__ == "__main__":
    main()
