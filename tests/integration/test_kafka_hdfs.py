"""Kafka in, Kafka out, checkpoint on HDFS: ttlstate against Spark's RocksDB provider.

Every query reads a Kafka topic, writes a Kafka topic (tests/integration/pipeline.py says what
"exactly once" means for that sink) and keeps its checkpoint on a real HDFS
(MiniDFSCluster: a NameNode and two DataNodes, replication 2), so ttlstate's changelogs and
snapshots travel through Hadoop's DistributedFileSystem. RocksDB's run of the same steps, also
on HDFS, is the reference, record for record per batch.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Iterator

import pandas as pd
import pytest
from integration.components import KafkaBroker, MiniHdfs, spark_jars
from pyspark.sql import DataFrame, SparkSession

from tests.integration.pipeline import KafkaRun, batch_times, hdfs_files, run_steps
from tests.spark.harness import ROCKSDB, TTLSTATE, session
from ttlstate.config import keys as K

pytestmark = pytest.mark.integration

# HDFS client: give up on an unreachable NameNode after about a second, not after ten.
HDFS_CLIENT = {"spark.hadoop.ipc.client.connect.max.retries": "2",
               "spark.hadoop.ipc.client.connect.retry.interval": "300"}

_names = itertools.count()


def ev(*triples: tuple[int, str, int]) -> list[dict]:
    return [{"id": i, "k": k, "v": v} for i, k, v in triples]


# Ids and keys repeat across steps (also across the restart), so state carries over.
STEPS = [
    ev((1, "a", 1), (2, "b", 2), (3, "a", 3)),
    ev((4, "c", 4), (1, "a", 1), (5, "b", 5)),
    ev((6, "a", 6), (2, "b", 2), (7, "d", 7)),
    ev((3, "a", 3), (8, "c", 8), (4, "c", 4), (9, "e", 9)),
    ev((10, "a", 10), (6, "a", 6), (11, "b", 11), (12, "f", 12)),
]
RESTART_AFTER = 2


def dedupe(events: DataFrame) -> DataFrame:
    return events.dropDuplicates(["id"])


def count(events: DataFrame) -> DataFrame:
    return events.groupBy("k").count()


def _counting(key: tuple, pdfs: Iterator[pd.DataFrame], state):  # noqa: ANN001, ANN202
    n, total = state.get if state.exists else (0, 0)
    for pdf in pdfs:
        n += len(pdf)
        total += int(pdf["v"].sum())
    state.update((n, total))
    yield pd.DataFrame({"k": [key[0]], "n": [n], "total": [total]})


def pandas_state(events: DataFrame) -> DataFrame:
    return events.groupBy("k").applyInPandasWithState(
        _counting, "k STRING, n LONG, total LONG", "n LONG, total LONG", "update", "NoTimeout")


QUERIES = {"dedupe": (dedupe, "append"), "count": (count, "update"), "pandas": (pandas_state, "update")}


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    s = session("local[2,3]", confs={"spark.jars": spark_jars(), **HDFS_CLIENT})
    yield s
    s.stop()


def new_run(spark: SparkSession, kafka: KafkaBroker, hdfs: MiniHdfs, provider: str, query: str,
            confs: dict[str, str] | None = None) -> KafkaRun:
    build, mode = QUERIES[query]
    label = "ttl" if provider == TTLSTATE else "rocksdb"
    name = f"{query}-{label}-{next(_names)}"
    return KafkaRun(spark, provider, build, kafka.bootstrap, f"{hdfs.url}/it", name, mode, dict(confs or {}))


@pytest.mark.parametrize("query", sorted(QUERIES))
def test_same_outputs_as_rocksdb_through_a_restart(spark: SparkSession, kafka: KafkaBroker, hdfs: MiniHdfs,
                                                   query: str) -> None:
    # ttlstate with a TTL far beyond the test: its TTL bookkeeping runs, nothing expires.
    ours = run_steps(new_run(spark, kafka, hdfs, TTLSTATE, query, {K.TTL.key: "1h"}), STEPS, RESTART_AFTER)
    theirs = run_steps(new_run(spark, kafka, hdfs, ROCKSDB, query), STEPS, RESTART_AFTER)
    expected = theirs.outputs()
    assert len(expected) == len(STEPS), expected  # one batch a step (and an empty batch 0)
    assert ours.outputs() == expected
    # ttlstate's own checkpoint files went through HDFS (dfs.replication 2 for each).
    files = hdfs_files(spark, f"{ours.checkpoint}/state/0/0")
    assert {f"{v}.changelog" for v in range(1, len(STEPS) + 1)} <= {name for name, _ in files}, files
    assert {replication for _, replication in files} == {2}, files


TTL_S = 10
# Keys written in the step before the pause expire during it; a key written just before a
# quick step is kept. Ids are unique here (only keys matter).
TTL_STEPS = [ev((1, "a", 1), (2, "b", 2), (3, "c", 3)), ev((4, "a", 4), (5, "d", 5)),
             ev((6, "a", 6), (7, "b", 7)), ev((8, "a", 8), (9, "c", 9)), ev((10, "d", 10))]
PAUSE_BEFORE = 2  # the step after the pause (longer than the TTL); the query restarts there


def _counting_with_ttl_written_out(key: tuple, pdfs: Iterator[pd.DataFrame], state):  # noqa: ANN001, ANN202
    """The reference on RocksDB: the same counting, with the TTL (OnCreateAndWrite,
    NeverReturnExpired) done by hand on the batch time Spark gives the function, which is the
    batch timestamp ttlstate's TTL runs on."""
    now = state.getCurrentProcessingTimeMs()
    n, total, written = state.get if state.exists else (0, 0, now)
    if now - written >= TTL_S * 1000:
        n, total = 0, 0
    for pdf in pdfs:
        n += len(pdf)
        total += int(pdf["v"].sum())
    state.update((n, total, now))
    yield pd.DataFrame({"k": [key[0]], "n": [n], "total": [total]})


def pandas_ttl_reference(events: DataFrame) -> DataFrame:
    return events.groupBy("k").applyInPandasWithState(
        _counting_with_ttl_written_out, "k STRING, n LONG, total LONG", "n LONG, total LONG, written LONG",
        "update", "NoTimeout")


def _ttl_steps(run: KafkaRun) -> KafkaRun:
    run.start()
    try:
        for i, rows in enumerate(TTL_STEPS):
            if i == PAUSE_BEFORE:
                run.stop()
                time.sleep(TTL_S + 1)
                run.start()
            run.step(rows)
    finally:
        run.stop()
    return run


def test_applyinpandaswithstate_ttl_expires_as_the_reference_says(spark: SparkSession, kafka: KafkaBroker,
                                                                  hdfs: MiniHdfs) -> None:
    """ttlstate's TTL (10 s, on the batch timestamps) against RocksDB running the same counting
    with that TTL written into the function: record for record per batch."""
    root = f"{hdfs.url}/it"
    ours = _ttl_steps(KafkaRun(spark, TTLSTATE, pandas_state, kafka.bootstrap, root,
                               f"ttl-ttl-{next(_names)}", confs={K.TTL.key: f"{TTL_S}s"}))
    theirs = _ttl_steps(KafkaRun(spark, ROCKSDB, pandas_ttl_reference, kafka.bootstrap, root,
                                 f"ttl-rocksdb-{next(_names)}"))
    for run in (ours, theirs):  # what decides expiry: the gaps around the pause
        times = batch_times(spark, run.checkpoint)
        t = [times[b] for b in sorted(run.outputs())]  # the batches of the steps, one each
        gaps = [b - a for a, b in itertools.pairwise(t)]
        before, pause, after = gaps[PAUSE_BEFORE - 2:PAUSE_BEFORE + 1]
        assert max(before, after) < TTL_S * 1000 <= pause, f"{run.name}: step times {t}, TTL not bracketed"
    expected = theirs.outputs()
    assert len(expected) == len(TTL_STEPS), expected
    after_pause = {row[0]: row[1] for row in expected[PAUSE_BEFORE + 1]}
    assert after_pause == {"a": 1, "b": 1}, after_pause  # both expired during the pause: counted anew
    assert ours.outputs() == expected


def test_streaming_kafka_sink_writes_what_rocksdb_writes(spark: SparkSession, kafka: KafkaBroker,
                                                         hdfs: MiniHdfs) -> None:
    """Spark's streaming Kafka sink (writeStream.format("kafka"), at least once), keyed by the
    group key, so a key's updates stay in order in one partition: the distinct records and each
    key's last value equal RocksDB's."""
    def run(provider: str, confs: dict[str, str]) -> list[tuple[int, int, str]]:
        name = f"sink-{'ttl' if provider == TTLSTATE else 'rocksdb'}-{next(_names)}"
        r = KafkaRun(spark, provider, count, kafka.bootstrap, f"{hdfs.url}/it", name, confs=confs,
                     sink="kafka")
        return run_steps(r, STEPS, RESTART_AFTER).records()

    def last_per_key(records: list[tuple[int, int, str]]) -> dict[str, int]:
        return {row["k"]: row["count"] for row in (json.loads(v) for _, _, v in records)}

    ours, theirs = run(TTLSTATE, {K.TTL.key: "1h"}), run(ROCKSDB, {})
    assert {v for _, _, v in ours} == {v for _, _, v in theirs}
    assert last_per_key(ours) == last_per_key(theirs) == {"a": 7, "b": 4, "c": 3, "d": 1, "e": 1, "f": 1}
