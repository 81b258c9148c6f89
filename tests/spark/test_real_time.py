"""Spark 4.3's Real-time Mode (`trigger(realTime=...)`) on ttlstate.

Deduplication, a running aggregation and a windowed aggregation run in Real-time Mode on
ttlstate and on Spark's RocksDB provider with the same input, restarted in the middle, and
must emit the same rows. Each run starts as Spark allows a Real-time query on a provider
other than RocksDB (tests/spark/realtime_io.py): a first micro-batch run pins the provider in
the checkpoint, then the query restarts in Real-time Mode with the provider conf unset.

Checkpoint format: version 2 is what Real-time Mode requires; version 1 runs too, with Spark's
`dangerouslyAllowCheckpointV1` conf.

Real-time batches are 1 s here (Spark's minimum is lowered for the tests) so that batch ends
come quickly; the TTL test uses 60 s batches, so its expiry happens inside one batch.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable, Iterator

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from tests.spark.harness import ROCKSDB, TTLSTATE, session
from tests.spark.realtime_io import (
    ALLOW_V1_KEY,
    FORMAT_VERSION_KEY,
    MIN_BATCH_KEY,
    LowLatencyInput,
    MemorySink,
    session_confs,
    start,
    wait_committed,
    wait_until,
)
from ttlstate.config import keys as K

pytestmark = pytest.mark.spark



@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    # Real-time Mode holds a task slot per source partition plus one per shuffle partition,
    # for each running query: 3 queries x (1 + 2) slots.
    s = session("local[9]", confs={MIN_BATCH_KEY: "1000"}, ttl="1h")
    s.conf.unset(K.PROVIDER_CLASS_KEY)  # each run sets the provider it wants
    yield s
    s.stop()


def _parsed(df: DataFrame) -> DataFrame:
    """`k,v,second` strings as k STRING, v INT, ts TIMESTAMP."""
    parts = F.split("value", ",")
    return df.select(parts[0].alias("k"), parts[1].cast("int").alias("v"),
                     F.timestamp_seconds(parts[2].cast("long")).alias("ts"))


QUERIES: dict[str, Callable[[DataFrame], DataFrame]] = {
    "dedupe": lambda d: d.dropDuplicates(["k"]).select("k", "v"),
    "aggregate": lambda d: d.groupBy("k").agg(F.count("*").alias("n"), F.sum("v").alias("total")),
    "window": lambda d: (d.groupBy(F.window("ts", "10 seconds"), "k").count()
                         .select(F.col("window.start").cast("long").alias("start"), "k", "count")),
}

# Three steps of input: the micro-batch run that pins the provider, then Real-time Mode,
# then Real-time Mode again after a restart. One source partition keeps each key in order.
STEPS = [
    ["a,1,1", "b,2,2", "a,3,3"],
    ["a,4,12", "c,5,13", "b,6,2", "d,7,25", "c,8,14"],
    ["a,9,26", "e,10,42", "b,11,41", "d,12,27", "f,13,60"],
]


def _format_confs(version: int) -> dict[str, str | None]:
    return {FORMAT_VERSION_KEY: str(version), ALLOW_V1_KEY: "true" if version == 1 else None}


# ttlstate's clock advances inside Real-time batches (every access path asks the server again
# once per interval); the 1 h TTL expires nothing, so outputs must equal RocksDB's.
CLOCK = {K.REAL_TIME_CLOCK_INTERVAL.key: "100ms"}


def _run_all(spark: SparkSession, provider: str, version: int) -> dict[str, list[tuple]]:
    """Every query of QUERIES through STEPS on `provider`: what each emitted, sorted."""
    root = tempfile.mkdtemp(prefix="ttlstate-rtm-")
    confs = {**_format_confs(version), **CLOCK}
    inputs = {name: LowLatencyInput(spark) for name in QUERIES}
    outputs: dict[str, list[tuple]] = {name: [] for name in QUERIES}
    try:
        for step, rows in enumerate(STEPS):
            sinks = {name: MemorySink(spark) for name in QUERIES}
            queries = {}
            for name, build in QUERIES.items():
                inputs[name].add(rows)
                queries[name] = start(spark, build(_parsed(inputs[name].df())), sinks[name], root, name,
                                      real_time=None if step == 0 else "1 second",
                                      provider=provider if step == 0 else None, confs=confs)
            try:
                for name, q in queries.items():
                    if step == 0:
                        q.processAllAvailable()
                    else:
                        wait_committed(q, inputs[name].added)
                    assert q.exception() is None, q.exception()
            finally:
                for q in queries.values():
                    q.stop()
            for name in QUERIES:
                outputs[name] += sinks[name].rows()
        for name in QUERIES:
            _assert_pinned(root, name, provider)
        return {name: sorted(rows, key=repr) for name, rows in outputs.items()}
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _assert_pinned(root: str, name: str, provider: str) -> None:
    """Every batch of the query, Real-time ones included, ran on `provider`."""
    import glob
    import json
    import os

    for path in glob.glob(os.path.join(root, name, "offsets", "[0-9]*")):
        with open(path) as f:
            f.readline()
            conf = json.loads(f.readline())["conf"]
        assert conf[K.PROVIDER_CLASS_KEY] == provider, (path, conf[K.PROVIDER_CLASS_KEY])


@pytest.fixture(scope="module")
def rocksdb_outputs(spark: SparkSession) -> dict[int, dict[str, list[tuple]]]:
    return {v: _run_all(spark, ROCKSDB, v) for v in (1, 2)}


@pytest.mark.parametrize("version", [1, 2])
def test_real_time_outputs_match_rocksdb_across_a_restart(
        spark: SparkSession, rocksdb_outputs: dict[int, dict[str, list[tuple]]], version: int) -> None:
    expected = rocksdb_outputs[version]
    # A micro-batch emits each key's final aggregate once; Real-time Mode once per input row.
    first_keys = {r.split(",")[0] for r in STEPS[0]}
    assert len(expected["aggregate"]) == len(first_keys) + len(STEPS[1]) + len(STEPS[2])
    assert sorted(k for k, _ in expected["dedupe"]) == list("abcdef")
    assert _run_all(spark, TTLSTATE, version) == expected


def _dedup_in_one_long_batch(spark: SparkSession, clock: str) -> list[str]:
    """What a deduplication with a 2 s TTL emits inside one 60 s Real-time batch: x, then x
    and y 0.5 s later, then x and z 2.5 s after that."""
    root = tempfile.mkdtemp(prefix="ttlstate-rtm-ttl-")
    source = LowLatencyInput(spark)
    confs: dict[str, str | None] = {K.TTL.key: "2s", K.REAL_TIME_CLOCK_INTERVAL.key: clock,
                                    **_format_confs(1)}
    try:
        source.add(["seed,0,0"])
        with session_confs(spark, confs):
            q = start(spark, QUERIES["dedupe"](_parsed(source.df())), MemorySink(spark), root, "q",
                      real_time=None, provider=TTLSTATE)
            q.processAllAvailable()
            q.stop()
            sink = MemorySink(spark)
            q = start(spark, QUERIES["dedupe"](_parsed(source.df())), sink, root, "q",
                      real_time="60 seconds", provider=None)
        try:
            def keys() -> list[str]:
                return [r[0] for r in sink.rows()]
            source.add(["x,1,1"])
            wait_until(lambda: keys() == ["x"], 30, q, keys)
            time.sleep(0.5)
            source.add(["x,2,2", "y,3,3"])   # x is remembered: dropped
            wait_until(lambda: keys() == ["x", "y"], 30, q, keys)
            time.sleep(2.5)                  # past x's TTL, well inside the 60 s batch
            source.add(["x,4,4", "z,5,5"])
            wait_until(lambda: "z" in keys(), 30, q, keys)
            time.sleep(0.5)
            assert not q.recentProgress, "the long Real-time batch ended during the test"
            return keys()
        finally:
            q.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_ttl_expires_inside_one_long_real_time_batch(spark: SparkSession) -> None:
    """With realTime.clockInterval, a deduplicated key is forgotten TTL after it was stored,
    while the batch that stored it still runs; without it, now stays at one batch timestamp
    for the whole batch and the key is remembered until the batch ends."""
    assert _dedup_in_one_long_batch(spark, "100ms") == ["x", "y", "x", "z"]
    assert _dedup_in_one_long_batch(spark, "off") == ["x", "y", "z"]


def test_aggregate_forgets_a_key_after_the_ttl_between_real_time_records(spark: SparkSession) -> None:
    """A running count on ttlstate with a 2 s TTL in 1 s Real-time batches: a key seen again
    5 s later counts from 1 again; RocksDB (no TTL) counts on."""
    counts = {}
    for provider in (TTLSTATE, ROCKSDB):
        root = tempfile.mkdtemp(prefix="ttlstate-rtm-agg-ttl-")
        source = LowLatencyInput(spark)
        build = lambda d: QUERIES["aggregate"](_parsed(d)).select("k", "n")  # noqa: E731
        confs = {K.TTL.key: "2s", **CLOCK, **_format_confs(1)}
        try:
            source.add(["seed,0,0"])
            seed = start(spark, build(source.df()), MemorySink(spark), root, "q", real_time=None,
                         provider=provider, confs=confs)
            seed.processAllAvailable()
            seed.stop()
            sink = MemorySink(spark)
            q = start(spark, build(source.df()), sink, root, "q", real_time="1 second", provider=None,
                      confs=confs)
            try:
                source.add(["a,1,1"])
                wait_until(lambda s=sink: len(s.rows()) == 1, 30, q, sink.rows)
                source.add(["a,1,1"])
                wait_until(lambda s=sink: len(s.rows()) == 2, 30, q, sink.rows)
                time.sleep(5.0)  # the TTL counts from the write-back at the batch end
                source.add(["a,1,1"])
                wait_until(lambda s=sink: len(s.rows()) == 3, 30, q, sink.rows)
                counts[provider] = [n for _, n in sink.rows()]
            finally:
                q.stop()
        finally:
            shutil.rmtree(root, ignore_errors=True)
    assert counts[TTLSTATE] == [1, 2, 1]
    assert counts[ROCKSDB] == [1, 2, 3]
