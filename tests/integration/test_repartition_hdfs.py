"""`ttlstate repartition` of a checkpoint on HDFS (MiniDFSCluster), run as users run it: the
command, in its own process and Spark session, is killed (-9) in the middle of switching the
checkpoint over; run again, it finishes (taking over the killed command's lease on the lock
file), and the query continues with the new partition count, its outputs those of the same query
run from the start with that count (TTL expiring keys on the way)."""

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
    SCHEMA,
    TTL_CONFS,
    TTL_STEPS,
    agg_by_two_columns,
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


def test_repartition_on_hdfs_killed_mid_switch_then_finished(spark: SparkSession, hdfs: MiniHdfs,
                                                             tmp_path) -> None:  # noqa: ANN001
    first = Run(spark, TTLSTATE, agg_by_two_columns, SCHEMA, "update", partitioned(TTL_CONFS, 2))
    first.checkpoint = f"{hdfs.url}/repartition/ck"
    expected = Run(spark, TTLSTATE, agg_by_two_columns, SCHEMA, "update", partitioned(TTL_CONFS, 5))
    first.start()
    expected.start()
    side_by_side([first, expected], TTL_STEPS[:4])
    first.stop()

    marker = tmp_path / "killed"
    path = os.pathsep.join([os.path.join(REPO, "python"), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, faults.ENV: f"repartition-offsets-switched:{marker}", "PYTHONPATH": path}
    confs = [arg for k, v in HDFS_CLIENT.items() for arg in ("--conf", f"{k}={v}")]
    command = [sys.executable, "-m", "ttlstate", "repartition", first.checkpoint, "--partitions", "5",
               "--master", "local[2]", *confs]
    killed = subprocess.run(command, env=env, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert killed.returncode == -9 and marker.exists(), killed.stderr[-3000:]
    assert "stores written 5/5" in killed.stdout or "moving the state after batch 3" in killed.stdout

    assert repartition(spark, first.checkpoint, 5, out=open(os.devnull, "w"))["resumed"]  # noqa: SIM115
    got = Run(spark, TTLSTATE, agg_by_two_columns, SCHEMA, "update", TTL_CONFS, root=first.root)
    got.checkpoint, got.step_no, got.outputs = first.checkpoint, first.step_no, dict(first.outputs)
    got.start()
    side_by_side([got, expected], TTL_STEPS[4:])
    got.stop()
    expected.stop()
    assert {op["numShufflePartitions"] for p in got.progress for op in p["stateOperators"]} == {5}
    assert got.outputs == expected.outputs
