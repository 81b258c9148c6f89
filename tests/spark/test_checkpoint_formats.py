"""A query restarted on its checkpoint with another checkpoint setting: the other checkpoint
format (Spark keeps the checkpoint's own, its commit log says which), or `checkpoint.localFiles`
switched (on a `file:` checkpoint the state server reads and writes the files itself, and they
stay what Hadoop's local file system reads and writes). ttlstate goes on exactly as Spark's
RocksDB provider does, every way."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from pyspark.sql import DataFrame, SparkSession

from tests.spark.harness import ROCKSDB, TTLSTATE, Run, session
from ttlstate.config import keys as K

pytestmark = pytest.mark.spark

FORMAT_KEY = "spark.sql.streaming.stateStore.checkpointFormatVersion"
SCHEMA = {"events": "k STRING, v INT"}
STEPS = [[{"k": f"k{(s * 2 + i) % 5}", "v": s} for i in range(3)] for s in range(6)]


def _build(sources: dict[str, DataFrame]) -> DataFrame:
    return sources["events"].groupBy("k").count()


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    s = session()
    yield s
    s.conf.unset(FORMAT_KEY)
    s.conf.unset(K.CHECKPOINT_LOCAL_FILES.key)
    s.stop()


def _run(spark: SparkSession, provider: str, values: list[str], key: str = FORMAT_KEY) -> Run:
    """The steps in equal parts, one per start, `key` set to the next of `values` at each."""
    per = len(STEPS) // len(values)
    run = Run(spark, provider, _build, SCHEMA, "update")
    try:
        for i, value in enumerate(values):
            spark.conf.set(key, value)
            run.start()
            for rows in STEPS[i * per:(i + 1) * per]:
                run.step(rows)
            run.stop()
    finally:
        run.stop()
        spark.conf.unset(key)
    return run


@pytest.mark.parametrize(("first", "then"), [("1", "2"), ("2", "1")])
def test_a_restart_in_the_other_format_goes_on_exactly(spark: SparkSession, first: str,
                                                       then: str) -> None:
    ours = _run(spark, TTLSTATE, [first, then])
    assert ours.outputs == _run(spark, ROCKSDB, [first, then]).outputs
    assert len(ours.outputs) == len(STEPS)
    files = [f for f in os.listdir(os.path.join(ours.checkpoint, "state", "0", "0")) if f[0].isdigit()]
    with_ids = [f for f in files if "_" in f]
    assert len(files) == len(STEPS) and len(with_ids) == (len(files) if first == "2" else 0), files


def test_files_the_server_wrote_and_files_hadoop_wrote_continue_each_other(spark: SparkSession) -> None:
    # Through Hadoop (a checksum file beside each file), then direct, then through Hadoop again:
    # each reads what the other wrote, and a direct write leaves no checksum of its own.
    key, values = K.CHECKPOINT_LOCAL_FILES.key, ["false", "true", "false"]
    ours = _run(spark, TTLSTATE, values, key)
    assert ours.outputs == _run(spark, ROCKSDB, values, key).outputs
    assert len(ours.outputs) == len(STEPS)
    files = os.listdir(os.path.join(ours.checkpoint, "state", "0", "0"))
    checksums = {f[1:-len(".crc")] for f in files if f.endswith(".crc")}
    assert not [f for f in files if f.endswith(".tmp")], files
    direct = sorted(int(f.split("_")[0].split(".")[0]) for f in files
                    if f[0].isdigit() and f not in checksums)
    assert direct == [3, 4], files  # versions 1-2 and 5-6 went through Hadoop


def test_the_server_writes_a_file_checkpoint_itself_by_default(spark: SparkSession) -> None:
    run = Run(spark, TTLSTATE, _build, SCHEMA, "update")
    try:
        run.start()
        for rows in STEPS[:2]:
            run.step(rows)
    finally:
        run.stop()
    files = os.listdir(os.path.join(run.checkpoint, "state", "0", "0"))
    assert [f for f in files if f[0].isdigit()] and not [f for f in files if f.startswith(".")], files
