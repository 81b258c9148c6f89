"""Checks at query start (the shim's TtlStateExtensions, which `configure` installs): a query that
asks for ttlstate on a checkpoint pinned to another provider fails in `start()`, naming the
pinned provider and `ttlstate migrate`; ttlstate keys without ttlstate's provider are logged at
WARN; a misspelled key or a bad value fails `start()` of an idle query, before any batch."""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Iterator

import pytest
from pyspark.errors import IllegalArgumentException
from pyspark.sql import SparkSession

from tests.spark.harness import ROCKSDB, TTLSTATE, run_steps, session
from ttlstate.config import keys as K

pytestmark = pytest.mark.spark

SCHEMA = {"events": "k STRING"}


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    s = session(ttl="5s")
    yield s
    s.stop()


def dedup(s):  # noqa: ANN001, ANN201
    return s["events"].dropDuplicates(["k"])


def _start(spark: SparkSession, checkpoint: str, provider: str):  # noqa: ANN202
    """Starts the deduplication on an empty input directory (an idle query: no batch runs)."""
    spark.conf.set(K.PROVIDER_CLASS_KEY, provider)
    source = tempfile.mkdtemp(prefix="ttlstate-idle-")
    df = spark.readStream.schema("k STRING").json(source).dropDuplicates(["k"])
    return df.writeStream.format("noop").option("checkpointLocation", checkpoint).start()


def _warnings(spark: SparkSession) -> list[str]:
    return list(spark.sparkContext._jvm.ttlstate.spark.StartChecks.recentWarnings())


def test_checkpoint_pinned_to_another_provider_fails_start(spark: SparkSession) -> None:
    old = run_steps(spark, ROCKSDB, dedup, SCHEMA, [[{"k": "a"}]])
    with pytest.raises(IllegalArgumentException) as e:
        _start(spark, old.checkpoint, TTLSTATE)
    message = str(e.value)
    assert "TTLSTATE_PROVIDER_PINNED" in message and ROCKSDB in message
    assert "ttlstate migrate" in message and old.checkpoint in message
    assert not spark.streams.active
    # Knowingly on the pinned provider: it runs, and the WARN says TTL is off for it.
    q = _start(spark, old.checkpoint, ROCKSDB)
    q.stop()
    assert any(old.checkpoint in w and "TTL is OFF" in w and "ttlstate migrate" in w
               for w in _warnings(spark))


def test_ttlstate_keys_without_ttlstate_provider_warn(spark: SparkSession) -> None:
    checkpoint = tempfile.mkdtemp(prefix="ttlstate-warn-")
    q = _start(spark, checkpoint, ROCKSDB)
    q.stop()
    assert any(checkpoint in w and K.TTL.key in w and "TTL is OFF" in w and K.PROVIDER_CLASS in w
               for w in _warnings(spark))
    # On ttlstate, no warning.
    checkpoint2 = tempfile.mkdtemp(prefix="ttlstate-ok-")
    _start(spark, checkpoint2, TTLSTATE).stop()
    assert not any(checkpoint2 in w for w in _warnings(spark))


@pytest.mark.parametrize(("key", "value", "expected"), [
    (K.PREFIX + "tll", "5s",
     f"Unknown ttlstate conf '{K.PREFIX}tll' (set to '5s'): did you mean '{K.TTL.key}'?"),
    (K.PREFIX + "keyFilter.maxKey", "10", f"did you mean '{K.KEY_FILTER_MAX_KEYS.key}'?"),
    (K.TTL.key, "5 parsecs", f"Invalid value '5 parsecs' for conf '{K.TTL.key}'"),
    (K.MEMORY_MAX_BYTES.key, "1k", f"Invalid value '1k' for conf '{K.MEMORY_MAX_BYTES.key}'"),
    # a bare number has no unit: "5" is not silently 5 ms
    (K.TTL.key, "5", f"Invalid value '5' for conf '{K.TTL.key}': allowed {K.TTL.allowed}"),
    (K.CLOCK_MAX_GAP.key, "600000", f"Invalid value '600000' for conf '{K.CLOCK_MAX_GAP.key}'"),
    # an operator name Spark does not report: the validator names the one meant
    (K.operator_ttl_key("dedup"), "1h", f"did you mean '{K.operator_ttl_key('dedupe')}'?"),
])
def test_conf_errors_fail_start_of_an_idle_query(spark: SparkSession, key: str, value: str,
                                                  expected: str) -> None:
    before = spark.conf.get(key, None)
    spark.conf.set(key, value)
    try:
        checkpoint = tempfile.mkdtemp(prefix="ttlstate-badconf-")
        with pytest.raises(IllegalArgumentException, match=re.escape(expected)):
            _start(spark, checkpoint, TTLSTATE)
        assert not spark.streams.active
        assert not os.path.exists(os.path.join(checkpoint, "offsets", "0")), "a batch was planned"
    finally:
        if before is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, before)


def test_operator_ttl_by_name_passes_start_and_applies_to_that_operator(spark: SparkSession,
                                                                       capsys: pytest.CaptureFixture) -> None:
    """`configure(operator_ttl={"dedupe": ...})` as the README shows it: the start check takes
    the name (it knew only ids), and the deduplication's stores run with that TTL (written in
    Spark's interval syntax), not the session's 5s, as their checkpoint files record."""
    from ttlstate.cli.main import main as cli

    run = run_steps(spark, TTLSTATE, dedup, SCHEMA, [[{"k": "a"}, {"k": "b"}], [{"k": "c"}]],
                    confs={K.operator_ttl_key("dedupe"): "1 hour"})
    assert len(run.outputs) == 2
    capsys.readouterr()
    cli(["inspect", "--json", run.checkpoint])
    stores = json.loads(capsys.readouterr().out)["stores"]
    assert stores and {(s["operator_name"], s["ttl_ms"]) for s in stores} == {("dedupe", 3_600_000)}


def _notes(spark: SparkSession) -> list[str]:
    return list(spark.sparkContext._jvm.ttlstate.spark.StartChecks.recentNotes())


@pytest.mark.parametrize(("key", "meant"), [
    ("spark.sql.streaming.statestore.ttlstate.ttl", K.TTL.key),  # the prefix in another case
    ("spark.sql.streaming.stateStore.updateType", K.UPDATE_TYPE.key),  # `ttlstate.` left out
])
def test_a_key_that_looks_like_ttlstates_warns_naming_the_right_spelling(spark: SparkSession, key: str,
                                                                        meant: str) -> None:
    spark.conf.set(key, "OnReadAndWrite")
    try:
        _start(spark, tempfile.mkdtemp(prefix="ttlstate-lookalike-"), TTLSTATE).stop()
    finally:
        spark.conf.unset(key)
    assert any(f"'{key}' (set to 'OnReadAndWrite') is not a ttlstate key" in w
               and f"did you mean '{meant}'?" in w for w in _warnings(spark))


def test_a_query_with_ttl_off_gets_one_info_line_saying_so(spark: SparkSession) -> None:
    checkpoint = tempfile.mkdtemp(prefix="ttlstate-ttloff-")
    spark.conf.set(K.TTL.key, "off")
    try:
        _start(spark, checkpoint, TTLSTATE).stop()
    finally:
        spark.conf.set(K.TTL.key, "5s")
    said = [n for n in _notes(spark) if checkpoint in n]
    assert len(said) == 1 and "TTL is off for this query" in said[0] and f"{K.TTL.key} is 'off'" in said[0]
    on = tempfile.mkdtemp(prefix="ttlstate-ttlon-")
    _start(spark, on, TTLSTATE).stop()
    assert not [n for n in _notes(spark) if on in n]


def test_watermark_time_source_needs_a_watermark_in_a_stateful_query(spark: SparkSession) -> None:
    spark.conf.set(K.TIME_SOURCE.key, "watermark")
    try:
        spark.conf.set(K.PROVIDER_CLASS_KEY, TTLSTATE)
        source = tempfile.mkdtemp(prefix="ttlstate-wm-")
        events = spark.readStream.schema("k STRING, ts TIMESTAMP").json(source)
        checkpoint = tempfile.mkdtemp(prefix="ttlstate-nowm-")
        with pytest.raises(IllegalArgumentException) as e:
            (events.dropDuplicates(["k"]).writeStream.format("noop")
             .option("checkpointLocation", checkpoint).start())
        message = str(e.value)
        assert K.TIME_SOURCE.key in message and "'watermark'" in message and "withWatermark" in message
        assert "activeTime" in message and not spark.streams.active
        # with a watermark it starts; a stateless query needs none
        for df in (events.withWatermark("ts", "1 minute").dropDuplicates(["k"]), events.select("k")):
            (df.writeStream.format("noop")
             .option("checkpointLocation", tempfile.mkdtemp(prefix="ttlstate-wm-ok-")).start().stop())
    finally:
        spark.conf.unset(K.TIME_SOURCE.key)
