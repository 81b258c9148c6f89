"""Churn with real expiry: ttlstate's TTL against what a user would pick instead, one run.

Every trigger reads one Parquet file; key cohort `c` is active in batches c, c+1 and c+2
(each of its keys once per batch, in shuffled order), so a batch of `--rows` rows touches
three cohorts of rows/3 keys, one of them new, and after its third batch a key is never seen
again. Every variant counts rows per key, in update mode, with a state that forgets a key
`--ttl` of processing time after its last update, each by its own mechanism (see
`benchmarks/workloads/churn_child.py`): ttlstate's TTL (`ttlstate`), Spark's `transformWithState` in
Scala with `TTLConfig` and a processing-time timer per key that fires `--ttl` after its last
update (`tws-scala`), the same Scala query served by ttlstate's store (`tws-scala-ttlstate`:
`transformWithState=ttlstate`, Spark's `TTLConfig` and timers on ttlstate's column families),
the same with each key's rows appended to a TTL'd `ListState` instead (`tws-scala-list`, and
served: `tws-scala-list-ttlstate`),
`transformWithStateInPandas` with a TTL'd `ValueState` (`tws-pandas`), `applyInPandasWithState`
with processing-time timeouts (`apply-in-pandas`), and Spark's RocksDB provider with no TTL at
all (`rocksdb-no-ttl`: its state only grows). The other Spark variants use the RocksDB provider.

Each variant runs in its own JVM, `--rounds` times in alternating order. Reported: rows/s (all
input rows over the summed duration of the batches that read them, medians over rounds: an
`availableNow` query of `transformWithState` in processing time may go on running batches
without data after the last file, for its TTL, so the query's wall time is no common measure;
`seconds` has it), rows/s and state rows (`numRowsTotal` of the state operators, as each
reports it: a store served by ttlstate counts every column family, Spark's internal ones for
timers and the TTL index too, where Spark's provider counts its user families only; and the timers
that fired) per batch, peak RSS of the JVM and the state server, ratios to `tws-scala` and
`rocksdb-no-ttl`, and the bound the TTL implies: the keys touched in the last TTL of processing
time. A variant still running after `--deadline` seconds is stopped (`finished` false); one that
had not read every input row by then is reported as not finished, with the batches it did. A
processing-time `transformWithState` query never ends by itself: it is stopped once it read its
last row and completed a batch without data that started the TTL after its last batch with data
(`stopped_after_timers`): its last keys' timers fired in it.

With `--baseline REF`, each ttlstate variant named in `--baseline-variants` also runs as
`<name>@<sha>` on an older checkout in the same invocation (`benchmarks/harness/baseline.py`),
and its row gets `ratio_to_baseline`: only same-run ratios mean anything on this machine.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
import re
import shutil
import statistics
import tempfile
from typing import Any

from benchmarks.harness.baseline import prepare
from benchmarks.harness.machine import describe
from benchmarks.harness.subproc import ChildFailed, run_child
from benchmarks.harness.variants import (
    COMPACT_EVERY_KEY,
    READ_AHEAD_KEY,
    ROCKSDB,
    TRANSFORM_WITH_STATE_KEY,
    TTL_KEY,
    TTLSTATE,
    Variant,
    pick,
    ratio,
    with_baseline,
)
from benchmarks.workloads.churn_child import SCALA_QUERIES

# name -> (provider variant, query kind of churn_child)
VARIANTS: dict[str, tuple[Variant, str]] = {
    "ttlstate": (Variant("ttlstate", TTLSTATE, {TTL_KEY: "{ttl}"}), "count"),
    # the same without the read-ahead of state (readAhead.chunkRows=0): what it does under churn
    "ttlstate-no-read-ahead": (Variant("ttlstate-no-read-ahead", TTLSTATE,
                                       {TTL_KEY: "{ttl}", READ_AHEAD_KEY: "0"}), "count"),
    # the same compacting its whole local DB every 5 commits: how close to the TTL's bound the
    # state stays when expired entries are removed sooner, and what that costs
    "ttlstate-compact-every-5": (Variant("ttlstate-compact-every-5", TTLSTATE,
                                         {TTL_KEY: "{ttl}", COMPACT_EVERY_KEY: "5"}), "count"),
    "tws-scala": (Variant("tws-scala", ROCKSDB), "tws-scala"),
    # the same Scala query, its state in ttlstate's store (column families; TTL and timers Spark's)
    "tws-scala-ttlstate": (Variant("tws-scala-ttlstate", TTLSTATE, {TRANSFORM_WITH_STATE_KEY: "ttlstate"}),
                           "tws-scala"),
    # a ListState's appends (each a merge in the store) on either provider
    "tws-scala-list": (Variant("tws-scala-list", ROCKSDB), "tws-scala-list"),
    "tws-scala-list-ttlstate": (Variant("tws-scala-list-ttlstate", TTLSTATE,
                                        {TRANSFORM_WITH_STATE_KEY: "ttlstate"}), "tws-scala-list"),
    "tws-pandas": (Variant("tws-pandas", ROCKSDB), "tws-pandas"),
    "apply-in-pandas": (Variant("apply-in-pandas", ROCKSDB), "apply-in-pandas"),
    "rocksdb-no-ttl": (Variant("rocksdb-no-ttl", ROCKSDB), "count"),
}
REFERENCES = ("tws-scala", "rocksdb-no-ttl")


def cohort_keys(cohort: int, size: int) -> list[str]:
    return [f"c{cohort}-{i}" for i in range(size)]


def write_inputs(directory: str, batches: int, rows: int, seed: int = 11) -> list[int]:
    """One Parquet file per batch; batch b holds every key of cohorts b-2..b once, shuffled.
    Returns the rows of each batch (the first two batches have one and two cohorts)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    size, rnd, counts = max(1, rows // 3), random.Random(seed), []
    os.makedirs(directory, exist_ok=True)
    for b in range(batches):
        keys = [k for c in range(max(0, b - 2), b + 1) for k in cohort_keys(c, size)]
        rnd.shuffle(keys)
        pq.write_table(pa.table({"key": keys}), os.path.join(directory, f"part-{b:03d}.parquet"))
        counts.append(len(keys))
    return counts


def ttl_bound(batch_ms: list[int], cohort: int, ttl_ms: int) -> int:
    """The keys a state with this TTL must hold after the last batch: the three active cohorts
    and every cohort whose last batch ended within the TTL before the end (estimated from the
    batch times; a batch's keys are written during the batch)."""
    ends, total = [], 0
    for ms in batch_ms:
        total += ms
        ends.append(total)
    recent = sum(1 for e in ends[:-1] if ends[-1] - e < ttl_ms)  # cohorts finished then
    return cohort * min(len(ends), 3 + recent)


def run_variant(variant: Variant, args: argparse.Namespace, input_dir: str, work: str, round_no: int,
                jar: str | None, total_rows: int) -> dict[str, Any]:
    name = variant.name
    query = VARIANTS[name.split("@")[0]][1]
    here = os.path.join(work, f"{name.replace('@', '-at-')}-r{round_no}")
    os.makedirs(here)
    confs = {k: v.replace("{ttl}", args.ttl) for k, v in variant.confs.items()}
    spark_confs = {"spark.sql.shuffle.partitions": str(args.partitions),
                   # A processing-time transformWithState query runs a batch without data every
                   # few hundred ms after its last file, until the deadline: the batches that read
                   # data must stay in the recent progress (1000 were pushed out in 600 s).
                   "spark.sql.streaming.numRecentProgressUpdates": "100000",
                   "spark.driver.memory": args.driver_memory}
    if query in SCALA_QUERIES and jar:
        spark_confs["spark.jars"] = jar
    params = {"provider_class": variant.provider_class, "confs": confs, "ttlstate": variant.is_ttlstate,
              "query": query, "input_dir": input_dir, "checkpoint": os.path.join(here, "ck"),
              "ttl_ms": args.ttl_ms, "deadline_s": args.deadline, "spark_confs": spark_confs,
              # a processing-time transformWithState query never ends: stopped once the timers of
              # its last keys had a batch after them
              "total_rows": total_rows}
    try:
        out, rss = run_child("benchmarks.workloads.churn_child", params, variant.env(), here + ".log",
                             args.deadline + 300)
    except ChildFailed as e:
        print(f"{name}: failed: {e}", flush=True)
        return {"variant": name, "round": round_no, "finished": False, "error": str(e)[-2000:], "batches": []}
    peak = rss.as_dict()
    run = {"variant": name, "round": round_no, **out, **{k: peak[k] for k in (
        "jvm_peak_rss_mb", "server_peak_rss_mb", "total_peak_rss_mb", "jvm_peak_pss_mb", "server_peak_pss_mb",
        "total_peak_pss_mb", "loadavg_1m_mean")}}
    jars = str(run.pop("spark_jars", "")).split(",")
    if variant.baseline is not None:  # ran the old package, its jar and its server, or fails here
        variant.check_code([run.get("ttlstate_file"), *(j for j in jars if "ttlstate-shim" in j)],
                           peak["server_files"])
    complete(run, total_rows)
    print({k: v for k, v in run.items() if k != "batches"}, flush=True)
    return run


def complete(run: dict[str, Any], total_rows: int) -> None:
    """Sets a run's rows, its rows/s over its batches' summed duration, and `all_rows_read`
    (`finished` is whether the query ended by itself before the deadline; `seconds` its wall time)."""
    rows = sum(b["input_rows"] for b in run["batches"])
    busy_s = sum(b["batch_ms"] or 0 for b in run["batches"]) / 1000
    run["rows"] = rows
    run["rows_per_s"] = round(rows / busy_s, 1) if busy_s else None
    run["all_rows_read"] = rows == total_rows


def summarize(runs: list[dict[str, Any]], names: list[str], cohort: int, ttl_ms: int,
              batches: int, deadline: float) -> list[dict[str, Any]]:
    """One row per variant: medians over its rounds, the state it ended with and the bound."""
    out: dict[str, dict[str, Any]] = {}
    for name in names:
        mine = [r for r in runs if r["variant"] == name]
        done = [r for r in mine if r.get("all_rows_read")]
        row: dict[str, Any] = {"variant": name, "rounds": len(mine), "finished_rounds": len(done)}
        if done:
            last = done[0]["batches"]
            row["rows_per_s"] = statistics.median(r["rows_per_s"] for r in done)
            row["rows_per_s_per_round"] = [r["rows_per_s"] for r in done]
            row["max_state_rows"] = max(b["state_rows"] for b in last)
            row["final_state_rows"] = last[-1]["state_rows"]
            row["ttl_bound_rows"] = ttl_bound([b["batch_ms"] for b in last], cohort, ttl_ms)
            # timers that fired in the first finished round: in its data batches, then after them
            row["timers_fired"] = (sum(b.get("custom", {}).get("numExpiredTimers", 0) for b in last)
                                   + done[0].get("timers_fired_without_data", 0))
            row["jvm_peak_rss_mb"] = statistics.median(r["jvm_peak_rss_mb"] for r in done)
            row["server_peak_rss_mb"] = statistics.median(r["server_peak_rss_mb"] for r in done)
            row["total_peak_pss_mb"] = statistics.median(r.get("total_peak_pss_mb") or 0 for r in done)
        else:
            did = max((len(r["batches"]) for r in mine), default=0)
            row["did_not_finish"] = f"did not finish {batches} batches in {deadline:.0f} s ({did} done)"
        out[name] = row
    for row in out.values():
        for ref in REFERENCES:
            if ref in out and row["variant"] != ref:
                row[f"ratio_to_{ref}"] = ratio(row.get("rows_per_s"), out[ref].get("rows_per_s"))
        twin = next((n for n in out if "@" in n and n.split("@")[0] == row["variant"]), None)
        if twin is not None:
            row["ratio_to_baseline"] = ratio(row.get("rows_per_s"), out[twin].get("rows_per_s"))
    return list(out.values())


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batches", type=int, default=20)
    ap.add_argument("--rows", type=int, default=200_000, help="rows per batch (three cohorts)")
    ap.add_argument("--ttl", default="3s", help="the TTL (a whole number and ms, s or m)")
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--providers", default=",".join(VARIANTS), help=f"from {', '.join(VARIANTS)}")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--deadline", type=float, default=600, help="seconds a variant's query may run")
    ap.add_argument("--driver-memory", default="1g", help="spark.driver.memory of every variant")
    ap.add_argument("--quick", action="store_true", help="6 batches of 6k rows, deadline 300 s")
    ap.add_argument("--json", help="write the result here (and the plot beside it, .png)")
    ap.add_argument("--baseline", metavar="REF", help="also run ttlstate's variants from this older commit")
    ap.add_argument("--baseline-variants", default="ttlstate,tws-scala-ttlstate",
                    help="which ttlstate variants get a baseline twin")
    args = ap.parse_args(argv)
    if args.quick:
        args.batches, args.rows, args.deadline = 6, 6_000, min(args.deadline, 300)
    args.ttl_ms = ttl_ms(args.ttl)
    return args


def ttl_ms(text: str) -> int:
    """`500ms`, `3s` or `1m` in milliseconds (a subset of ttlstate's duration syntax)."""
    m = re.fullmatch(r"(\d+)(ms|s|m)", text.strip())
    if not m:
        raise SystemExit(f"--ttl {text!r}: expected a whole number and ms, s or m, e.g. 3s")
    return int(m.group(1)) * {"ms": 1, "s": 1000, "m": 60_000}[m.group(2)]


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    baseline = prepare(args.baseline) if args.baseline else None
    variants = with_baseline(pick({k: v for k, (v, _) in VARIANTS.items()}, args.providers), baseline,
                             args.baseline_variants)
    names = [v.name for v in variants]
    jar = None
    if any(VARIANTS[n.split("@")[0]][1] in SCALA_QUERIES for n in names):
        from benchmarks.harness.scala_jobs import jar as build

        jar = build()
    work = tempfile.mkdtemp(prefix="ttlstate-churn-")
    runs: list[dict[str, Any]] = []
    started = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    try:
        input_dir = os.path.join(work, "input")
        counts = write_inputs(input_dir, args.batches, args.rows)
        for round_no in range(args.rounds):
            for v in variants if round_no % 2 == 0 else list(reversed(variants)):
                runs.append(run_variant(v, args, input_dir, work, round_no, jar, sum(counts)))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    cohort = max(1, args.rows // 3)
    result = {"params": {"batches": args.batches, "rows_per_batch": args.rows, "rows": sum(counts),
                         "cohort_keys": cohort, "ttl": args.ttl, "partitions": args.partitions,
                         "master": "local[2]", "driver_memory": args.driver_memory, "rounds": args.rounds,
                         "deadline_s": args.deadline, "quick": args.quick,
                         "baseline": baseline.describe() if baseline else None},
              "machine": describe(), "started": started, "runs": runs,
              "summary": summarize(runs, names, cohort, args.ttl_ms, args.batches, args.deadline)}
    for row in result["summary"]:
        print(row, flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
        from benchmarks.workloads.churn_plot import plot

        plot(result, os.path.splitext(args.json)[0] + ".png")
    return result


if __name__ == "__main__":
    main()
