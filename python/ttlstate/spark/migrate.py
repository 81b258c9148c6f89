"""`ttlstate migrate SOURCE TARGET`: turn TTL on for an existing query without losing its state.

A stopped query's checkpoint is copied into a NEW checkpoint (the source is only read) whose
state, at the last committed batch, is held by ttlstate (or, with `--to rocksdb`, by Spark's
RocksDB provider: adopting ttlstate is reversible) and whose offset log pins that provider.
Restarting the query on the new checkpoint continues exactly where the old one stopped.

The copy is a Spark job with one task per store (`ttlstate.tools.Migration`, in the tools jar,
which executors never load otherwise): the
provider the source pins reads the last committed version, the target provider writes it as
the same version, and the row counts are compared per store. Every migrated entry counts as
written at the last committed batch's time: TTL runs from there.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
from typing import Any

from ttlstate.config import keys as K
from ttlstate.spark.lines import MIGRATE_BACK_SINCE, line_for, migrate_back_supported
from ttlstate.spark.tools_jar import tools_class

ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
HDFS = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"
TARGETS = {"ttlstate": K.PROVIDER_CLASS, "rocksdb": ROCKSDB, "hdfs": HDFS}


class MigrationError(RuntimeError):
    pass


def _progress(spark: Any, done: threading.Event, out: Any) -> None:
    """Prints `stores copied: k/n` while the copy job runs (Spark's status tracker)."""
    tracker = spark.sparkContext.statusTracker()
    shown = None
    while not done.wait(0.5):
        for stage_id in tracker.getActiveStageIds():
            info = tracker.getStageInfo(stage_id)
            if info is None or not info.name.startswith("collect at Migration"):
                continue
            now = (info.numCompletedTasks, info.numTasks)
            if now != shown:
                shown = now
                print(f"ttlstate migrate: stores copied {now[0]}/{now[1]}", file=out, flush=True)


def _migration_run(spark: Any) -> Any:
    """`ttlstate.tools.Migration.run` of the installed tools jar, as a reflected method."""
    tool = tools_class(spark, "ttlstate.tools.Migration")
    return next(m for m in tool.getMethods() if m.getName() == "run")


def migrate(spark: Any, source: str, target: str, to: str = "ttlstate",
            confs: dict[str, str] | None = None, progress: Any = None) -> dict:
    """Migrate the stopped query of checkpoint `source` into the new checkpoint `target`, its
    state held by `to` ("ttlstate", "rocksdb", "hdfs" or a provider class). Returns the report
    (last committed batch, providers, rows per store). Raises MigrationError."""
    provider = TARGETS.get(to, to)
    if provider != K.PROVIDER_CLASS and not migrate_back_supported(line_for(spark.version).minor):
        since = MIGRATE_BACK_SINCE
        raise MigrationError(
            f"on Spark {spark.version} migrate writes ttlstate's state only, not {provider}'s: writing "
            f"Spark's own providers at a given version needs Spark {since}'s loadEmpty. To go back from "
            f"ttlstate on this line, upgrade Spark to {since} or later (the checkpoint goes on there as it "
            "is) and migrate there, or start the query on a new checkpoint with that provider.")
    jvm = spark.sparkContext._jvm
    spark.streams  # noqa: B018 - creates the state store coordinator on the driver
    done = threading.Event()
    watcher = None
    if progress is not None:
        watcher = threading.Thread(target=_progress, args=(spark, done, progress), daemon=True)
        watcher.start()
    try:
        run = _migration_run(spark)
        args = spark.sparkContext._gateway.new_array(jvm.java.lang.Object, 5)
        for i, arg in enumerate((spark._jsparkSession, source, target, provider,
                                 jvm.java.util.HashMap(dict(confs or {})))):
            args[i] = arg
        report = run.invoke(None, args)
    except Exception as e:  # py4j wraps the JVM's error; keep its message, drop the JVM trace
        message = str(e)
        marker = "MigrationError: "
        if marker in message:
            message = message.split(marker, 1)[1].split("\n", 1)[0]
        raise MigrationError(message) from None
    finally:
        done.set()
        if watcher is not None:
            watcher.join()
    return json.loads(report)


DESCRIPTION = ("Copy a stopped streaming query's checkpoint into a NEW checkpoint whose state is "
               "held by ttlstate (or, with --to rocksdb, by Spark's RocksDB provider). The source is "
               "only read; restart the query on TARGET.")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("source", help="checkpoint location of the stopped query")
    parser.add_argument("target", help="new checkpoint location (must not exist, or be empty)")
    parser.add_argument("--to", default="ttlstate",
                        help="target provider: ttlstate, rocksdb, hdfs, or a provider class")
    parser.add_argument("--master", default=None,
                        help="Spark master when no session is active (default: Spark's own, local[*])")
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                        help="an extra Spark conf for the migration job, repeatable (default: none)")


def main(argv: list[str] | None = None) -> int:
    """`ttlstate migrate ARGS...`."""
    from ttlstate.cli.main import main as cli

    return cli(["migrate", *(sys.argv[1:] if argv is None else argv)])


def run_command(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    """The migration, as `ttlstate migrate` parsed its arguments."""
    from pyspark.sql import SparkSession

    import ttlstate

    builder = SparkSession.builder.appName("ttlstate migrate")
    if args.master:
        builder = builder.master(args.master)
    confs = {}
    for item in args.conf:
        key, sep, value = item.partition("=")
        if not sep:
            parser.error(f"--conf takes KEY=VALUE, not {item!r}")
        confs[key] = value
        builder = builder.config(key, value)
    spark = ttlstate.configure(builder).getOrCreate()
    print(f"ttlstate migrate: {args.source} -> {args.target} ({args.to})", flush=True)
    try:
        report = migrate(spark, args.source, args.target, args.to, progress=sys.stdout)
    except MigrationError as e:
        print(f"ttlstate migrate: {e}", file=sys.stderr)
        return 1
    rows = sum(s["rows"] for s in report["stores"])
    print(f"ttlstate migrate: copied {len(report['stores'])} stores ({rows} rows, counts verified per "
          f"store) at batch {report['batch']}: {report['sourceProvider']} -> {report['targetProvider']}")
    print(f"ttlstate migrate: restart the query with checkpointLocation={args.target}")
    return 0
