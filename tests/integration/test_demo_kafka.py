"""`ttlstate demo --kafka`: the demo's stream through a real broker, run as a user runs it (the
command in its own process, its own driver JVM), its output topics read back and checked."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator

import pytest
from integration.components import KafkaBroker, extra_jars, spark_jars
from pyspark.sql import SparkSession

from tests.spark.harness import session
from ttlstate.demo.kafka import CONNECTOR_CLASS, DemoKafka, connector_package
from ttlstate.demo.runner import QUERY_KEYS
from ttlstate.demo.workload import ChurnWorkload

pytestmark = pytest.mark.integration

BATCHES, SESSIONS = 5, 20


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    s = session("local[2]", confs={"spark.jars": spark_jars()})
    yield s
    s.stop()


def _demo(args: list[str], out: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "ttlstate.cli.main", "demo", "--no-plot", "--out", out, *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=900,
                          env={**os.environ, "TTLSTATE_LOG_LEVEL": "WARNING"})


def test_the_demo_reads_and_writes_kafka(spark: SparkSession, kafka: KafkaBroker, tmp_path: object) -> None:
    # A TTL far beyond the run: both providers must give the same output, record for record.
    demo = DemoKafka(kafka.bootstrap, "demo-it")
    done = _demo(["--kafka", kafka.bootstrap, "--topic-prefix", demo.prefix,
                  "--jars", ",".join(extra_jars("spark-kafka")), "--batches", str(BATCHES),
                  "--interval", "0", "--ttl", "1h", "--sessions", str(SESSIONS)], str(tmp_path))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert f"events into topic {demo.events_topic}" in done.stdout
    workload = ChurnWorkload(new_sessions=SESSIONS)
    events = [e for b in range(BATCHES) for e in workload.events(b)]
    inputs = spark.read.format("kafka").option("kafka.bootstrap.servers", kafka.bootstrap) \
        .option("subscribe", demo.events_topic).option("startingOffsets", "earliest").load().count()
    assert inputs == len(events)
    out = demo.outputs(spark, QUERY_KEYS)
    for key in QUERY_KEYS:
        assert f"{key}: {len(out[key])} records in topic {demo.output_topic(key)}" in done.stdout
    # dropDuplicates: every session once
    sessions = Counter(e["session"] for e in events)
    for provider in ("ttlstate", "rocksdb"):
        assert Counter(r["session"] for r in out[f"{provider}/dropDuplicates"]) == Counter(set(sessions))
    # the aggregation in update mode: a session's last record holds all its events
    for provider in ("ttlstate", "rocksdb"):
        last = {r["session"]: r["events"] for r in out[f"{provider}/aggregation"]}
        assert last == dict(sessions)
    assert sorted(map(repr, out["ttlstate/aggregation"])) == sorted(map(repr, out["rocksdb/aggregation"]))


def test_without_the_connector_the_demo_says_what_to_add(kafka: KafkaBroker, tmp_path: object) -> None:
    done = _demo(["--kafka", kafka.bootstrap, "--batches", "2"], str(tmp_path))
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
    import pyspark

    assert CONNECTOR_CLASS in done.stderr
    assert f"--packages {connector_package(pyspark.__version__)}`" in done.stderr
    assert "--jars" in done.stderr
    assert "Traceback" not in done.stderr
