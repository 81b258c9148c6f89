"""Faults a real query meets: lost local state, damaged checkpoints, bad confs, two queries at once."""

from __future__ import annotations

import glob
import os
import shutil
from collections.abc import Iterator

import pytest
from pyspark.errors import StreamingQueryException
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from tests.spark.harness import ROCKSDB, TTLSTATE, Run, our_server_processes, run_steps, session
from ttlstate.config import keys as K

pytestmark = pytest.mark.spark

SCHEMA = {"events": "k STRING, v INT"}
STEPS = [[{"k": "a", "v": 1}, {"k": "b", "v": 2}], [{"k": "a", "v": 3}, {"k": "c", "v": 4}],
         [{"k": "a", "v": 5}], [{"k": "b", "v": 6}, {"k": "d", "v": 7}]]


def agg(s):  # noqa: ANN001, ANN201
    return s["events"].groupBy("k").agg(F.sum("v").alias("total"))


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    s = session()
    yield s
    s.stop()


def _server_roots() -> list[str]:
    return [cmd[cmd.index("--root") + 1] for _p, cmd in our_server_processes()
            if "ttlstate.server" in cmd and "--root" in cmd]


def test_local_state_deleted_between_batches_is_restored(spark: SparkSession) -> None:
    """As if the task moved to a new executor: the store rebuilds from the checkpoint."""
    ours = Run(spark, TTLSTATE, agg, SCHEMA, "update")
    ours.start()
    try:
        ours.step(STEPS[0])
        ours.step(STEPS[1])
        dbs = [d for root in _server_roots() for d in glob.glob(os.path.join(root, "w*", "*", "db"))]
        assert dbs, "no local store found to delete"
        for d in dbs:
            shutil.rmtree(d)
        ours.step(STEPS[2])
        ours.step(STEPS[3])
    finally:
        ours.stop()
    theirs = run_steps(spark, ROCKSDB, agg, SCHEMA, STEPS, output_mode="update")
    assert ours.outputs == theirs.outputs


def test_damaged_changelog_fails_the_query_naming_file_version_and_store(spark: SparkSession) -> None:
    run = run_steps(spark, TTLSTATE, agg, SCHEMA, STEPS[:3], output_mode="update")
    changelog = os.path.join(run.checkpoint, "state", "0", "0", "2.changelog")
    with open(changelog, "rb") as f:
        data = f.read()
    with open(changelog, "wb") as f:
        f.write(data[: len(data) // 2])
    run.start()  # a restarted query: new providers, which load version 3 from the checkpoint
    try:
        with pytest.raises(StreamingQueryException) as e:
            run.step(STEPS[3])
    finally:
        run.stop()
    msg = str(e.value)
    assert "2.changelog" in msg and "version 3" in msg and "operator 0, partition 0" in msg


def test_bad_conf_value_fails_the_query_at_start(spark: SparkSession) -> None:
    run = Run(spark, TTLSTATE, agg, SCHEMA, "update", {K.TTL.key: "soon"})
    run.start()
    try:
        with pytest.raises(StreamingQueryException) as e:
            run.step(STEPS[0])
    finally:
        run.stop()
    msg = str(e.value)
    assert K.TTL.key in msg and "'soon'" in msg and "allowed" in msg
    assert run.outputs == {}


def test_two_stateful_queries_at_once(spark: SparkSession) -> None:
    dedup = lambda s: s["events"].dropDuplicates(["k"])  # noqa: E731
    q1 = Run(spark, TTLSTATE, agg, SCHEMA, "update")
    q2 = Run(spark, TTLSTATE, dedup, SCHEMA, "append")
    q1.start()
    q2.start()
    try:
        for rows in STEPS:
            q1.step(rows)
            q2.step(rows)
    finally:
        q1.stop()
        q2.stop()
    assert q1.outputs == run_steps(spark, ROCKSDB, agg, SCHEMA, STEPS, output_mode="update").outputs
    assert q2.outputs == run_steps(spark, ROCKSDB, dedup, SCHEMA, STEPS).outputs
