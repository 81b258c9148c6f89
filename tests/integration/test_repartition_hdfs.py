"""`ttlstate repartition` of a checkpoint on HDFS (MiniDFSCluster), run as users run it: the
command in its own process and Spark session. While the query runs, the command refuses it (the
query's lease on the lock file, seen from another process). Killed (-9) after staging the new
state and again in the middle of the switch, each time holding the lock file's lease, the command
run again takes the lock over from the dead process and finishes; the query continues with the new
partition count, its outputs those of the same query run from the start with that count (TTL
expiring keys on the way)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import pytest
from integration.components import MiniHdfs
from pyspark.sql import SparkSession

from tests.integration.test_kafka_hdfs import HDFS_CLIENT
from tests.spark.harness import TTLSTATE, Run, session
from tests.spark.test_repartition import (
    ONE_BATCH_PER_STEP,
    SCHEMA,
    TTL_CONFS,
    TTL_STEPS,
    agg_by_two_columns,
    crashing_at,
    partitioned,
    side_by_side,
)
from ttlstate import faults
from ttlstate.spark.repartition import repartition

pytestmark = pytest.mark.integration

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    s = session(confs=HDFS_CLIENT)
    yield s
    s.stop()


def command(checkpoint: str, partitions: int, kill_at: str | None = None,
            marker: str = "") -> subprocess.CompletedProcess:
    """`ttlstate repartition` in its own process (and JVM), killed (-9) at `kill_at` if given."""
    path = os.pathsep.join([os.path.join(REPO, "python"), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "PYTHONPATH": path}
    if kill_at:
        env[faults.ENV] = f"{kill_at}:{marker}"
    confs = [arg for k, v in HDFS_CLIENT.items() for arg in ("--conf", f"{k}={v}")]
    argv = [sys.executable, "-m", "ttlstate", "repartition", checkpoint, "--partitions", str(partitions),
            "--master", "local[2]", *confs]
    return subprocess.run(argv, env=env, cwd=REPO, capture_output=True, text=True, timeout=600)


def test_repartition_on_hdfs_refused_while_running_killed_twice_then_finished(
        spark: SparkSession, hdfs: MiniHdfs, tmp_path) -> None:  # noqa: ANN001
    first = Run(spark, TTLSTATE, agg_by_two_columns, SCHEMA, "update", partitioned(TTL_CONFS, 2))
    first.checkpoint = f"{hdfs.url}/repartition/ck"
    expected = Run(spark, TTLSTATE, agg_by_two_columns, SCHEMA, "update", partitioned(TTL_CONFS, 5))
    first.start()
    expected.start()
    side_by_side([first, expected], TTL_STEPS[:4])
    refused = command(first.checkpoint, 5)
    assert refused.returncode == 1 and "in use by a streaming query of application" in refused.stderr, \
        refused.stderr[-3000:]
    first.stop()

    for point in ("repartition-staged", "repartition-offsets-switched"):
        marker = tmp_path / point
        killed = command(first.checkpoint, 5, point, str(marker))
        assert killed.returncode == -9 and marker.exists(), (point, killed.stderr[-3000:])
    with crashing_at("repartition-switched"):  # this session's run, stopped after the switch
        repartition(spark, first.checkpoint, 5, out=open(os.devnull, "w"))  # noqa: SIM115
    assert repartition(spark, first.checkpoint, 5, out=open(os.devnull, "w"))["resumed"]  # noqa: SIM115

    # One batch per step, as the other two runs (and test_repartition.rescaled's continued run):
    # that conf is not pinned in the checkpoint.
    got = Run(spark, TTLSTATE, agg_by_two_columns, SCHEMA, "update", {**ONE_BATCH_PER_STEP, **TTL_CONFS},
              root=first.root)
    got.checkpoint, got.step_no, got.outputs = first.checkpoint, first.step_no, dict(first.outputs)
    got.step_of_batch = dict(first.step_of_batch)
    got.start()
    side_by_side([got, expected], TTL_STEPS[4:])
    got.stop()
    expected.stop()
    assert {op["numShufflePartitions"] for p in got.progress for op in p["stateOperators"]} == {5}
    assert got.outputs == expected.outputs
