"""Per-record end-to-end latency in Spark 4.3's Real-time Mode: ttlstate against Spark's
RocksDB provider, same machine, same run.

A deduplication (every record a new key, so each is emitted) and a running count over 1000
keys (each record emits its key's new count) read Spark's LowLatencyMemoryStream, fed from
this process at a fixed rate, and write to Spark's ContinuousMemorySink. A record carries its
creation time (CLOCK_MONOTONIC, `time.monotonic_ns()`); the last projection stamps its
arrival at the sink with the JVM's `System.nanoTime()` (the same clock on Linux). Latency is
arrival - creation, per emitted record, so it includes the py4j hand-over to the source, the
source's polling (10 ms when idle), the streaming shuffle, the state store and the sink.

Each query first runs one micro-batch on its provider (Spark only lets a Real-time query use
another provider than RocksDB when the checkpoint pins it), then runs in Real-time Mode with
`realTime.clockInterval` on for ttlstate; the first `--warmup` seconds are not measured.
Batches are `--batch` long, so a measurement includes batch boundaries (their pauses show in
p99 and max).

    PYTHONPATH=python python -m benchmarks realtime_latency [--quick] [--out FILE]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import sys
import tempfile
import time

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from tests.spark.realtime_io import (
    ALLOW_V1_KEY,
    FORMAT_VERSION_KEY,
    MIN_BATCH_KEY,
    LowLatencyInput,
    MemorySink,
    start,
)

import ttlstate
from benchmarks.harness.output import save
from ttlstate.config import keys as K

RESULTS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "results")
ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
PROVIDERS = {"rocksdb": ROCKSDB, "ttlstate": K.PROVIDER_CLASS}
AGG_KEYS = 1000


def _parsed(df: DataFrame) -> DataFrame:
    parts = F.split("value", ",")
    return df.select(parts[0].alias("k"), parts[1].cast("long").alias("created"))


def _arrival(df: DataFrame) -> DataFrame:
    arrived = F.expr("cast(reflect('java.lang.System', 'nanoTime') as long)")
    return df.select("created", arrived.alias("arrived"))


QUERIES = {
    "dedupe": lambda d: _arrival(d.dropDuplicates(["k"])),
    "aggregate": lambda d: _arrival(d.groupBy("k").agg(F.count("*").alias("n"),
                                                       F.max("created").alias("created"))),
}


def summarize(latencies_ns: list[int]) -> dict[str, float]:
    """p50, p99 and max in milliseconds (nearest rank), and the count."""
    if not latencies_ns:
        return {"n": 0}
    xs = sorted(latencies_ns)

    def rank(p: float) -> float:
        return xs[min(len(xs) - 1, max(0, int(round(p * len(xs))) - 1))] / 1e6

    return {"n": len(xs), "p50_ms": round(rank(0.50), 2), "p99_ms": round(rank(0.99), 2),
            "max_ms": round(xs[-1] / 1e6, 2)}


def _feed(source: LowLatencyInput, query: str, rate: int, seconds: float, first: int) -> int:
    """`rate` records/s for `seconds`, in ticks of 10 ms; returns the records sent."""
    sent = 0
    began = time.monotonic()
    while (elapsed := time.monotonic() - began) < seconds:
        due = int(elapsed * rate) + 1 - sent
        if due > 0:
            rows = []
            for _ in range(due):
                i = first + sent + len(rows)
                key = f"k{i}" if query == "dedupe" else f"k{i % AGG_KEYS}"
                rows.append(f"{key},{time.monotonic_ns()}")
            source.add(rows)
            sent += len(rows)
        time.sleep(0.01)
    return sent


def measure(spark: SparkSession, provider: str, query: str, rate: int, seconds: float, warmup: float,
            batch: str, fmt: int = 1) -> dict[str, object]:
    root = tempfile.mkdtemp(prefix="ttlstate-rtm-bench-")
    confs: dict[str, str | None] = {FORMAT_VERSION_KEY: str(fmt),
                                    ALLOW_V1_KEY: "true" if fmt == 1 else None}
    source = LowLatencyInput(spark)
    try:
        source.add([f"seed,{time.monotonic_ns()}"])
        seed = start(spark, QUERIES[query](_parsed(source.df())), MemorySink(spark), root, "q",
                     real_time=None, provider=PROVIDERS[provider], confs=confs)
        seed.processAllAvailable()
        seed.stop()
        sink = MemorySink(spark)
        q = start(spark, QUERIES[query](_parsed(source.df())), sink, root, "q", real_time=batch,
                  provider=None, confs=confs)
        try:
            started = time.monotonic_ns()
            sent = _feed(source, query, rate, warmup + seconds, first=1)
            time.sleep(2.0)  # the last records reach the sink
            assert q.exception() is None, q.exception()
        finally:
            q.stop()
        measured = [int(arr) - int(cre) for cre, arr in sink.rows()
                    if int(cre) >= started + int(warmup * 1e9)]
        return {"provider": provider, "query": query, "rate_per_s": rate, "sent": sent,
                "emitted": len(sink.rows()), **summarize(measured)}
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main(argv: list[str] | None = None) -> list[dict[str, object]]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true",
                    help="one low rate, 4 s each, no result file unless --out (a smoke run)")
    ap.add_argument("--rates", default="100,500,2000", help="records per second, comma-separated")
    ap.add_argument("--seconds", type=float, default=15.0, help="measured seconds per run")
    ap.add_argument("--warmup", type=float, default=3.0, help="seconds not measured at the start")
    ap.add_argument("--batch", default="5 seconds", help="the Real-time trigger's batch duration")
    ap.add_argument("--format", type=int, choices=(1, 2), default=1,
                    help="checkpoint format of both providers (ttlstate refuses 2 until it implements it)")
    ap.add_argument("--out", default=None,
                    help="JSON result file (default: benchmarks/results/<date>-realtime-latency.json)")
    args = ap.parse_args(argv)
    rates = [50] if args.quick else [int(r) for r in args.rates.split(",")]
    seconds, warmup = (4.0, 2.0) if args.quick else (args.seconds, args.warmup)
    out = args.out or (None if args.quick else os.path.join(
        RESULTS, f"{datetime.date.today().isoformat()}-realtime-latency.json"))

    os.environ["PYSPARK_PYTHON"] = sys.executable
    builder = (SparkSession.builder.master("local[4]").appName("ttlstate-realtime-latency")
               .config("spark.sql.shuffle.partitions", "2").config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false").config(MIN_BATCH_KEY, "1000"))
    spark = ttlstate.configure(builder, ttl="1h", real_time_clock_interval="1s").getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    spark.conf.unset(K.PROVIDER_CLASS_KEY)
    rows: list[dict[str, object]] = []
    try:
        for rate in rates:
            for query in QUERIES:
                pair = {p: measure(spark, p, query, rate, seconds, warmup, args.batch, args.format)
                        for p in PROVIDERS}
                for r in pair.values():
                    print(json.dumps(r), flush=True)
                    rows.append(r)
                ours, theirs = pair["ttlstate"], pair["rocksdb"]
                if ours.get("n") and theirs.get("n"):
                    ratio = {f"{m}_ratio": round(float(ours[m]) / max(float(theirs[m]), 0.01), 2)  # type: ignore[arg-type]
                             for m in ("p50_ms", "p99_ms", "max_ms")}
                    rows.append({"query": query, "rate_per_s": rate, "ttlstate_vs_rocksdb": ratio})
                    print(json.dumps(rows[-1]), flush=True)
    finally:
        spark.stop()
    command = "PYTHONPATH=python python -m benchmarks realtime_latency " + " ".join(argv or sys.argv[1:])
    result = [{"command": command.strip(), "batch": args.batch, "checkpoint_format": args.format,
               "seconds": seconds, "warmup": warmup, "master": "local[4]",
               "shuffle_partitions": 2, "source_partitions": 1,
               "date": datetime.datetime.now().isoformat(timespec="seconds")}, *rows]
    return save(result, out)


if __name__ == "__main__":
    main()
