"""`ttlstate demo`: the same churn stream through ttlstate (short TTL) and Spark's RocksDB provider.

Two stateful queries per provider (a per-session aggregation in update mode and a
dropDuplicates on session), fed the same files batch by batch (with `--kafka`, the same records
of a Kafka topic, each query writing its results to a topic of its own: `ttlstate.demo.kafka`).
Per batch it prints input rows, state rows, checkpoint bytes and TTL removals (each column
explained under the header), then writes a PNG of state rows and bytes over batches (it needs
matplotlib: the `demo` extra) and a one-paragraph summary.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from ttlstate.config import keys as K
from ttlstate.demo.kafka import DemoKafka, KafkaConnectorMissing
from ttlstate.demo.workload import EVENT_SCHEMA, ChurnWorkload

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

ROCKSDB_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
PROVIDERS = {"ttlstate": K.PROVIDER_CLASS, "rocksdb": ROCKSDB_PROVIDER}
QUERIES = ("aggregation", "dropDuplicates")


@dataclass
class BatchStats:
    batch: int
    input_rows: int
    state_rows: dict[str, int] = field(default_factory=dict)       # "<provider>/<query>" -> rows
    checkpoint_bytes: dict[str, int] = field(default_factory=dict)  # "<provider>" -> bytes
    ttl_removed: int = 0
    filter_removed: int = 0


@dataclass(frozen=True)
class Column:
    header: str
    meaning: str
    value: Callable[[BatchStats], int]


# The per-batch table: each column once, with the line that explains it.
COLUMNS: tuple[Column, ...] = (
    Column("batch", "micro-batch number", lambda s: s.batch),
    Column("input", "rows in this batch's input file (all four queries read the same file)",
           lambda s: s.input_rows),
    Column("ttl agg rows", "state rows (numRowsTotal) of the aggregation on ttlstate",
           lambda s: s.state_rows["ttlstate/aggregation"]),
    Column("rocksdb agg rows", "state rows of the same aggregation on Spark's RocksDB provider",
           lambda s: s.state_rows["rocksdb/aggregation"]),
    Column("ttl dedup rows", "state rows of dropDuplicates on ttlstate",
           lambda s: s.state_rows["ttlstate/dropDuplicates"]),
    Column("rocksdb dedup rows", "state rows of the same dropDuplicates on Spark's RocksDB provider",
           lambda s: s.state_rows["rocksdb/dropDuplicates"]),
    Column("ttl bytes", "checkpoint bytes on disk of both ttlstate queries together",
           lambda s: s.checkpoint_bytes["ttlstate"]),
    Column("rocksdb bytes", "checkpoint bytes on disk of both RocksDB-provider queries together",
           lambda s: s.checkpoint_bytes["rocksdb"]),
    Column("read/incr-removed", "expired entries this batch removed on read or by incremental "
           "cleanup, both ttlstate queries together", lambda s: s.ttl_removed),
    Column("filter-removed", "expired entries this batch's compactions removed (the TTL "
           "compaction filter), both ttlstate queries together", lambda s: s.filter_removed),
)


def table_header() -> str:
    return " ".join(f"{c.header:>{max(5, len(c.header))}}" for c in COLUMNS)


def table_row(st: BatchStats) -> str:
    return " ".join(f"{c.value(st):>{max(5, len(c.header))}}" for c in COLUMNS)


def column_legend() -> list[str]:
    width = max(len(c.header) for c in COLUMNS)
    return [f"  {c.header:<{width}}  {c.meaning}" for c in COLUMNS]


# Non-default settings of the ttlstate queries (configure() options), so both physical
# cleanups show in a state this small: incremental cleanup checks few entries per commit
# (with the defaults it alone would remove everything) and a full compaction runs every 4.
DEMO_OPTIONS = {"snapshot_interval": 5, "incremental_size": 50, "compact_every": 4}
# Spark's own settings of the demo: a small state in few partitions, maintenance often.
SPARK_CONFS = {"spark.sql.shuffle.partitions": "2", "spark.sql.streaming.minBatchesToRetain": "5",
               "spark.sql.streaming.stateStore.maintenanceInterval": "2s"}


def settings_lines(ttl: str) -> list[str]:
    """The ttlstate confs the demo sets, under their conf names (what a user would set)."""
    from ttlstate.spark.configure import settings

    confs = {**settings(ttl=ttl, **DEMO_OPTIONS), **SPARK_CONFS}
    return [f"  {key}={confs[key]}" for key in sorted(confs)
            if key not in (K.PROVIDER_CLASS_KEY, K.PYTHON.key, K.LOCAL_MODE_PYTHON.key)]


def plot_available() -> str | None:
    """None if the plot can be drawn, else how to get what it needs."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return ("ttlstate demo draws its plot with matplotlib, which is not installed here. Install "
                "it with `pip install 'ttlstate[demo]'` (or `pip install matplotlib`), or run "
                "`ttlstate demo --no-plot` for the table and summary alone.")
    return None


def _dir_bytes(path: str) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for f in files:
            try:
                total += os.path.getsize(os.path.join(root, f))
            except OSError:
                pass
    return total


QUERY_KEYS = [f"{provider}/{name}" for provider in PROVIDERS for name in QUERIES]


def _start_queries(spark: SparkSession, input_dir: str, work: str, kafka: DemoKafka | None
                   ) -> dict[str, object]:
    from pyspark.sql import functions as F

    queries = {}
    for provider, cls in PROVIDERS.items():
        spark.conf.set(K.PROVIDER_CLASS_KEY, cls)  # pinned per query at start
        for name in QUERIES:
            key = f"{provider}/{name}"
            if kafka is None:
                src = spark.readStream.schema(EVENT_SCHEMA).option("maxFilesPerTrigger", 1).json(input_dir)
            else:
                src = kafka.source(spark, EVENT_SCHEMA)
            if name == "aggregation":
                df = src.groupBy("session").agg(F.count("*").alias("events"), F.sum("value"))
                mode = "update"
            else:
                df = src.dropDuplicates(["session"])
                mode = "append"
            writer = df.writeStream.format("noop") if kafka is None else kafka.sink(df, key, "session")
            queries[key] = (
                writer.outputMode(mode)
                .option("checkpointLocation", os.path.join(work, "ck", provider, name))
                .queryName(f"demo_{provider}_{name}").start())
    spark.conf.set(K.PROVIDER_CLASS_KEY, K.PROVIDER_CLASS)
    return queries


def _collect(batch: int, rows: int, queries: dict[str, object], work: str) -> BatchStats:
    st = BatchStats(batch, rows)
    for key, q in queries.items():
        progress = q.lastProgress or {}  # type: ignore[attr-defined]
        ops = progress.get("stateOperators") or [{}]
        st.state_rows[key] = int(ops[0].get("numRowsTotal", 0))
        if key.startswith("ttlstate/"):
            cm = ops[0].get("customMetrics", {})
            st.ttl_removed += int(cm.get("ttlExpiredOnRead", 0)) + int(
                cm.get("ttlRemovedByIncrementalCleanup", 0))
            st.filter_removed += int(cm.get("ttlRemovedByCompactionFilter", 0))
    for provider in PROVIDERS:
        st.checkpoint_bytes[provider] = _dir_bytes(os.path.join(work, "ck", provider))
    return st


def run(batches: int, interval_s: float, ttl: str, workload: ChurnWorkload, out_dir: str,
        keep: bool = False, plot: bool = True, kafka: DemoKafka | None = None,
        jvm_confs: dict[str, str] | None = None) -> list[BatchStats]:
    """The demo; with `kafka`, through its topics. jvm_confs (spark.jars, spark.jars.packages)
    are set before the driver JVM starts. Raises KafkaConnectorMissing (before any batch) when
    `kafka` is given and the JVM cannot load Spark's Kafka connector."""
    # The state server's start line would land in the middle of the table (its stderr is this
    # console in local mode); the demo prints its settings itself.
    os.environ.setdefault("TTLSTATE_LOG_LEVEL", "WARNING")
    work = tempfile.mkdtemp(prefix="ttlstate-demo-")
    spark = _session(ttl, jvm_confs)
    try:
        if kafka is not None:
            kafka.prepare(spark, QUERY_KEYS)
        _print_intro(batches, interval_s, ttl, workload, work, kafka)
        stats = _run_batches(spark, batches, interval_s, workload, work, kafka)
    finally:
        spark.stop()
        if not keep:
            shutil.rmtree(work, ignore_errors=True)
    _report(stats, ttl, interval_s, workload, out_dir, plot)
    return stats


def _session(ttl: str, jvm_confs: dict[str, str] | None) -> Any:
    from pyspark.sql import SparkSession

    import ttlstate

    builder = (SparkSession.builder.master("local[2]").appName("ttlstate-demo")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false"))
    for key, value in {**SPARK_CONFS, **(jvm_confs or {})}.items():
        builder = builder.config(key, value)
    spark = ttlstate.configure(builder, ttl=ttl, **DEMO_OPTIONS).getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _print_intro(batches: int, interval_s: float, ttl: str, workload: ChurnWorkload, work: str,
                 kafka: DemoKafka | None) -> None:
    print(f"ttlstate demo: {batches} batches every {interval_s}s, TTL {ttl}, "
          f"{workload.new_sessions} new sessions per batch, each active {workload.active_batches} "
          f"batches; working dir {work}")
    print("settings of the demo (all others are defaults):")
    print("\n".join(settings_lines(ttl)))
    if kafka is not None:
        print(f"Kafka {kafka.bootstrap}: events into topic {kafka.events_topic}, each query's output into "
              f"{kafka.output_topic('<provider>/<query>')}")
    print("columns:")
    print("\n".join(column_legend()))
    print(table_header())


def _run_batches(spark: Any, batches: int, interval_s: float, workload: ChurnWorkload, work: str,
                 kafka: DemoKafka | None) -> list[BatchStats]:
    """Feeds each batch (files, or Kafka events), lets every query process it, prints its row."""
    input_dir = os.path.join(work, "input")
    stats: list[BatchStats] = []
    queries = None
    for b in range(batches):
        started = time.monotonic()
        if kafka is None:
            rows = workload.write_batch(input_dir, b)
        else:
            events = workload.events(b)
            kafka.produce(spark, events, EVENT_SCHEMA)
            rows = len(events)
        if queries is None:
            queries = _start_queries(spark, input_dir, work, kafka)
        for q in queries.values():
            q.processAllAvailable()  # type: ignore[attr-defined]
        st = _collect(b, rows, queries, work)
        stats.append(st)
        print(table_row(st), flush=True)
        time.sleep(max(0.0, interval_s - (time.monotonic() - started)))
    for q in (queries or {}).values():
        q.stop()  # type: ignore[attr-defined]
    if kafka is not None:
        print()
        print(kafka_summary(kafka, kafka.outputs(spark, QUERY_KEYS)))
    return stats


def _report(stats: list[BatchStats], ttl: str, interval_s: float, workload: ChurnWorkload,
            out_dir: str, plot: bool) -> None:
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "demo.json"), "w") as f:
        json.dump([asdict(s) for s in stats], f, indent=1)
    print()
    print(summary(stats, ttl, interval_s, workload))
    if plot:
        from ttlstate.demo.plot import plot_demo

        print(f"\nplot: {plot_demo(stats, os.path.join(out_dir, 'demo.png'), ttl)}")
    print(f"numbers: {os.path.join(out_dir, 'demo.json')}")


def kafka_summary(kafka: DemoKafka, outputs: dict[str, list[dict[str, object]]]) -> str:
    """Where each query's output went and how much of it there is."""
    lines = [f"Kafka output ({kafka.bootstrap}):"]
    lines += [f"  {key}: {len(records)} records in topic {kafka.output_topic(key)}"
              for key, records in outputs.items()]
    return "\n".join(lines)


def summary(stats: list[BatchStats], ttl: str, interval_s: float, workload: ChurnWorkload) -> str:
    last, mid = stats[-1], stats[len(stats) // 2]
    t_last = last.state_rows["ttlstate/aggregation"]
    t_mid = mid.state_rows["ttlstate/aggregation"]
    r_last = last.state_rows["rocksdb/aggregation"]
    r_mid = mid.state_rows["rocksdb/aggregation"]
    return (
        f"Summary: over {len(stats)} batches of a churn stream ({workload.new_sessions} new "
        f"sessions per batch, each active for {workload.active_batches} batches), the "
        f"aggregation's state on Spark's RocksDB provider grew from {r_mid} rows at batch "
        f"{mid.batch} to {r_last} at batch {last.batch} and keeps growing by about "
        f"{workload.new_sessions} rows per batch; on ttlstate with TTL {ttl} (batches every "
        f"{interval_s}s) it went from {t_mid} to {t_last} rows: it levels off, because sessions "
        f"untouched for the TTL expire and incremental cleanup and the compaction filter remove "
        f"them ({sum(s.ttl_removed for s in stats)} entries removed on read or by incremental "
        f"cleanup, "
        f"{sum(s.filter_removed for s in stats)} by the compaction filter). Checkpoint bytes at "
        f"the end: ttlstate {last.checkpoint_bytes['ttlstate']}, RocksDB provider "
        f"{last.checkpoint_bytes['rocksdb']}.")


DESCRIPTION = """\
The same churn stream (new sessions every batch, each active for a few batches) through two
stateful queries on ttlstate with a short TTL and the same two on Spark's RocksDB provider
(no TTL). Per batch it prints input rows, state rows, checkpoint bytes and TTL removals, then
writes a PNG of state rows and bytes over batches (needs matplotlib: pip install
'ttlstate[demo]', or run with --no-plot) and a one-paragraph summary."""


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--batches", type=int, default=24, help="micro-batches to run (at least 2)")
    ap.add_argument("--interval", type=float, default=1.0, help="seconds between batches")
    ap.add_argument("--ttl", default="3s", help="TTL of the ttlstate queries, e.g. 3s or '5 seconds'")
    ap.add_argument("--sessions", type=int, default=200, help="new sessions per batch")
    ap.add_argument("--active", type=int, default=2, help="batches a session stays active")
    ap.add_argument("--out", default="demo-output", help="directory for demo.png and demo.json")
    ap.add_argument("--keep", action="store_true", help="keep the working directory (checkpoints)")
    ap.add_argument("--no-plot", action="store_true", help="no PNG (no matplotlib needed)")
    ap.add_argument("--kafka", metavar="BOOTSTRAP_SERVERS",
                    help="run the stream through Kafka: events into a topic, each query's output into "
                         "one (needs Spark's Kafka connector: --packages or --jars) (default: files, "
                         "no Kafka)")
    ap.add_argument("--topic-prefix", help="with --kafka: the topics' prefix (default: "
                                           "ttlstate-demo-<epoch seconds>)")
    ap.add_argument("--packages", help="Maven coordinates for spark.jars.packages, e.g. "
                                       "org.apache.spark:spark-sql-kafka-0-10_2.13:<spark version> "
                                       "(_2.12 on Spark 3.5) (default: none)")
    ap.add_argument("--jars", help="comma-separated jars for spark.jars, e.g. the Kafka connector's "
                                   "(default: none)")


def main(argv: list[str] | None = None) -> int:
    """`ttlstate demo ARGS...`."""
    from ttlstate.cli.main import main as cli

    return cli(["demo", *(sys.argv[1:] if argv is None else argv)])


def run_command(args: argparse.Namespace, ap: argparse.ArgumentParser) -> int:
    """The demo, as `ttlstate demo` parsed its arguments."""
    if args.batches < 2:
        ap.error("--batches must be at least 2")
    missing = None if args.no_plot else plot_available()
    if missing:  # say so now, not after the whole run
        print(f"ttlstate demo: {missing}", file=sys.stderr)
        return 2
    if args.topic_prefix and not args.kafka:
        ap.error("--topic-prefix needs --kafka")
    kafka = (DemoKafka(args.kafka, args.topic_prefix or f"ttlstate-demo-{int(time.time())}")
             if args.kafka else None)
    jvm_confs = {k: v for k, v in (("spark.jars", args.jars), ("spark.jars.packages", args.packages)) if v}
    try:
        run(args.batches, args.interval, args.ttl,
            ChurnWorkload(new_sessions=args.sessions, active_batches=args.active), args.out, args.keep,
            plot=not args.no_plot, kafka=kafka, jvm_confs=jvm_confs)
    except KafkaConnectorMissing as e:
        print(f"ttlstate demo: {e}", file=sys.stderr)
        return 2
    return 0
