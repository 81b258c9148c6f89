"""The streaming job the cluster tier submits with spark-submit (YARN client and cluster mode,
standalone), as a user's job: `ttlstate.configure()` on the builder, Kafka in, Kafka out, the
checkpoint on HDFS. It imports nothing but pyspark and ttlstate (in cluster mode it runs in a
YARN container, from the packed venv).

Each run (`--run NAME=PROVIDER[:TAG+TAG...]`, in order) is one query over the same input topic:
`dropDuplicates(["id"])`, then a per-key count, written by `foreachBatch` to the topic
`NAME-out`, each record tagged with its batch id and attempt (the driver's clock), so a reader
can tell a retried batch's rows (tests/cluster/outputs.py). `maxOffsetsPerTrigger` with
`availableNow` cuts the input into the same micro-batches on every provider and after every
restart. A run given pause tags holds the task that sees a row whose key is `__pause_<TAG>__`
until the test writes `<pause dir>/go-<TAG>` (it first writes `paused-<TAG>` there: the task's
YARN container, its Python worker's pid and that worker's parent): a batch is then in flight,
its stores open, while the test kills or decommissions something.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StringType

import ttlstate

ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
PROVIDERS = {"rocksdb": ROCKSDB, "ttlstate": "ttlstate.spark.TtlStateStoreProvider"}
SCHEMA = "id LONG, k STRING, v LONG"
PAUSE_PREFIX = "__pause_"


def pause_udf(pause_dir: str | None, tags: frozenset[str]) -> Any:
    """Identity on the key; holds the task at the pause keys of `tags` (see the module)."""
    def hold(k: str) -> str:
        tag = k[len(PAUSE_PREFIX):].rstrip("_") if k.startswith(PAUSE_PREFIX) else None
        if pause_dir and tag in tags:
            go = os.path.join(pause_dir, f"go-{tag}")
            if not os.path.exists(go):
                where = f"{os.environ.get('CONTAINER_ID', '-')} {os.getpid()} {os.getppid()}"
                marker = os.path.join(pause_dir, f"paused-{tag}")
                with open(marker + ".tmp", "w") as f:
                    f.write(where)
                os.replace(marker + ".tmp", marker)
                deadline = time.monotonic() + 300
                while not os.path.exists(go) and time.monotonic() < deadline:
                    time.sleep(0.1)
        return k
    return F.udf(hold, StringType(), useArrow=False)  # no pyarrow in the executors' venv


def query(events: DataFrame, pause_dir: str | None, tags: frozenset[str]) -> DataFrame:
    """Two stateful operators: a deduplication, then an aggregation (the pause between them, so
    a paused task holds its deduplication stores open)."""
    return (events.dropDuplicates(["id"]).withColumn("k", pause_udf(pause_dir, tags)("k"))
            .groupBy("k").agg(F.count("*").alias("n"), F.sum("v").alias("total")))


def sink(bootstrap: str, topic: str, name: str) -> Callable[[DataFrame, int], None]:
    def write(df: DataFrame, batch_id: int) -> None:
        attempt = time.time_ns()
        print(f"BATCH {name} {batch_id}", flush=True)
        tagged = df.select(F.to_json(F.struct(F.lit(batch_id).alias("batch"), F.lit(attempt).alias("attempt"),
                                              F.struct(*df.columns).alias("row"))).alias("value"))
        (tagged.write.format("kafka").option("kafka.bootstrap.servers", bootstrap)
         .option("topic", topic).save())
    return write


def run(spark: SparkSession, args: argparse.Namespace, name: str, provider: str,
        tags: frozenset[str]) -> None:
    spark.conf.set("spark.sql.streaming.stateStore.providerClass", PROVIDERS[provider])
    events = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", args.bootstrap)
              .option("subscribe", args.input).option("startingOffsets", "earliest")
              .option("maxOffsetsPerTrigger", str(args.rows_per_batch)).option("failOnDataLoss", "true")
              .load().select(F.from_json(F.col("value").cast("string"), SCHEMA).alias("e")).select("e.*"))
    q = (query(events, args.pause_dir, tags).writeStream
         .foreachBatch(sink(args.bootstrap, f"{name}-out", name)).outputMode("update")
         .option("checkpointLocation", f"{args.root}/{name}").queryName(name)
         .trigger(availableNow=True).start())
    q.awaitTermination()
    print(f"DONE {name} {provider}", flush=True)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--input", required=True, help="the input topic (JSON events)")
    ap.add_argument("--root", required=True, help="checkpoints go to ROOT/NAME (an hdfs:// URL)")
    ap.add_argument("--run", action="append", required=True, help="NAME=rocksdb|ttlstate[:TAG+TAG], in order")
    ap.add_argument("--rows-per-batch", type=int, required=True)
    ap.add_argument("--pause-dir", help="a local folder shared with the test (the nodes are this machine)")
    ap.add_argument("--ttl", default="1h")
    args = ap.parse_args(argv)
    builder = (SparkSession.builder.appName("ttlstate-cluster-tier")
               .config("spark.sql.shuffle.partitions", "2"))
    spark = ttlstate.configure(builder, ttl=args.ttl).getOrCreate()
    print("CONF spark.executor.memoryOverhead=" + spark.conf.get("spark.executor.memoryOverhead", "unset"),
          flush=True)
    for spec in args.run:
        name, _, what = spec.partition("=")
        provider, _, tags = what.partition(":")
        run(spark, args, name, provider, frozenset(t for t in tags.split("+") if t))
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
