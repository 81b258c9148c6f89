"""Spark Connect: a server started with pyspark's `sbin/start-connect-server.sh`, ttlstate's jar
and settings (`--jars`, the extension, the plugin, the provider class, the executors' Python),
and a Python client session (`SparkSession.builder.remote(...)`, through `ttlstate.configure()`)
that turns TTL on per query with `spark.conf.set`: a deduplication and an aggregation with a 2 s
TTL forget a key after a pause, an aggregation with TTL off in the same session does not, and
the expiries show in each query's progress metrics."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from integration.connect_server import ConnectServer

import ttlstate
from ttlstate.config import keys as K
from ttlstate.spark.configure import EXTENSIONS_CLASS, PLUGIN_CLASS, jar_path

pytestmark = pytest.mark.cluster


def server_args() -> list[str]:
    return ["--master", "local[2]", "--jars", jar_path(), "--conf", "spark.ui.enabled=false",
            "--driver-java-options", "-XX:TieredStopAtLevel=1",
            "--conf", f"spark.sql.extensions={EXTENSIONS_CLASS}", "--conf", f"spark.plugins={PLUGIN_CLASS}",
            "--conf", f"{K.PROVIDER_CLASS_KEY}={K.PROVIDER_CLASS}",
            "--conf", f"spark.pyspark.python={sys.executable}", "--conf", "spark.sql.shuffle.partitions=2"]


@pytest.fixture(scope="module")
def server() -> Iterator[ConnectServer]:
    s = ConnectServer(server_args())
    yield s
    s.stop()


def _write(folder: Path, name: str, rows: list[dict]) -> None:
    """Written under a hidden name first: Spark's file source lists every file not starting with
    '.' or '_', so a visible temporary file caught empty made a batch of its own (a CI failure:
    the expiries landed in that batch, not in the last one)."""
    hidden = folder / f".{name}.json.tmp"
    hidden.write_text("".join(json.dumps(r) + "\n" for r in rows))
    hidden.rename(folder / f"{name}.json")


def test_ttl_per_query_over_spark_connect(server: ConnectServer, tmp_path: Path) -> None:
    from pyspark.sql import SparkSession

    spark = ttlstate.configure(SparkSession.builder.remote(server.remote), ttl="1h").getOrCreate()
    try:
        assert spark.conf.get(K.PROVIDER_CLASS_KEY) == K.PROVIDER_CLASS
        src = tmp_path / "in"
        src.mkdir()
        events = spark.readStream.schema("id LONG, k STRING").json(str(src))
        queries = {}
        for name, ttl, df, mode in [("dedupe", "2s", events.dropDuplicates(["id"]), "append"),
                                    ("agg", "2s", events.groupBy("k").count(), "complete"),
                                    ("agg_off", "off", events.groupBy("k").count(), "complete")]:
            spark.conf.set(K.TTL.key, ttl)  # per query: read when it starts
            queries[name] = (df.writeStream.format("memory").queryName(name).outputMode(mode)
                             .option("checkpointLocation", str(tmp_path / f"ck-{name}")).start())
        _write(src, "1", [{"id": 1, "k": "x"}, {"id": 2, "k": "x"}, {"id": 3, "k": "y"}])
        for q in queries.values():
            q.processAllAvailable()
        time.sleep(3)  # longer than the 2 s TTL, in batch time
        _write(src, "2", [{"id": 1, "k": "x"}, {"id": 4, "k": "y"}])
        for q in queries.values():
            q.processAllAvailable()

        dedupe = sorted(r.id for r in spark.sql("select id from dedupe").collect())
        assert dedupe == [1, 1, 2, 3, 4], dedupe  # id 1 expired, so it is new again
        counts = {r.k: r["count"] for r in spark.sql("select * from agg").collect()}
        assert counts == {"x": 1, "y": 1}, counts  # both keys expired and started over
        no_ttl = {r.k: r["count"] for r in spark.sql("select * from agg_off").collect()}
        assert no_ttl == {"x": 3, "y": 2}, no_ttl
        for name, expired in (("dedupe", 1), ("agg", 2), ("agg_off", 0)):
            metrics = queries[name].lastProgress["stateOperators"][0]["customMetrics"]
            assert metrics["ttlExpiredOnRead"] == expired, (name, metrics)
    finally:
        for q in spark.streams.active:
            q.stop()
        spark.stop()
