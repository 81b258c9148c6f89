"""One Spark line, as its users run it: the pyspark of the venv running these tests (the
Spark-version tier, `make test-spark-versions`, runs this module once per line, each in its own
venv). Every stateful operator ttlstate serves, against that Spark's own RocksDB provider, with a
restart in the middle; TTL taking effect on each operator TTL applies to; and the features the
line offers (docs/spark-versions.md has the table these tests stand behind)."""

from __future__ import annotations

import io
from collections.abc import Iterator

import pandas as pd
import pyspark
import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming.state import GroupStateTimeout

from tests.spark.harness import (
    EVENT_STEPS,
    EVENTS_SCHEMA,
    ROCKSDB,
    TTLSTATE,
    Run,
    ev,
    outputs_per_step,
    run_steps,
    session,
)
from ttlstate.config import keys as K
from ttlstate.spark.lines import OPERATOR_NAMES_SINCE, minor_of, operator_names_known
from ttlstate.spark.repartition import repartition

pytestmark = [pytest.mark.spark, pytest.mark.spark_versions]

LINE = minor_of(pyspark.__version__)
SCHEMAS = {"events": EVENTS_SCHEMA}


def at_least(minor: str) -> bool:
    return tuple(map(int, LINE.split("."))) >= tuple(map(int, minor.split(".")))


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    s = session()
    assert s.version.startswith(LINE + "."), (s.version, LINE)
    yield s
    s.stop()


def _same(spark: SparkSession, build, mode: str = "append", steps: list = EVENT_STEPS,  # noqa: ANN001
          schemas: dict[str, str] = SCHEMAS) -> Run:
    ours = run_steps(spark, TTLSTATE, build, schemas, steps, restart_after=2, output_mode=mode)
    theirs = run_steps(spark, ROCKSDB, build, schemas, steps, restart_after=2, output_mode=mode)
    assert ours.outputs, "the query produced no batch"
    assert ours.outputs == theirs.outputs
    return ours


def test_drop_duplicates(spark: SparkSession) -> None:
    _same(spark, lambda s: s["events"].dropDuplicates(["k"]))


def test_session_window(spark: SparkSession) -> None:
    _same(spark, lambda s: s["events"].withWatermark("ts", "10 seconds")
          .groupBy(F.session_window("ts", "5 seconds"), "k").agg(F.count("*").alias("n")))


def _count(key: tuple, pdfs, state):  # noqa: ANN001, ANN202
    count = (state.get[0] if state.exists else 0) + sum(len(pdf) for pdf in pdfs)
    state.update((count,))
    yield pd.DataFrame({"k": [key[0]], "n": [count]})


def counts(s: dict[str, DataFrame]) -> DataFrame:
    return s["events"].groupBy("k").applyInPandasWithState(_count, "k STRING, n LONG", "n LONG", "append",
                                                           GroupStateTimeout.NoTimeout)


def test_apply_in_pandas_with_state(spark: SparkSession) -> None:
    _same(spark, counts)


def test_stream_stream_join(spark: SparkSession) -> None:
    """Join state keeps working (TTL does not apply to it)."""
    schemas = {"left": "lk STRING, lv INT, lts TIMESTAMP", "right": "rk STRING, rv INT, rts TIMESTAMP"}
    steps = [{"left": [{"lk": k, "lv": i, "lts": f"2026-01-01 00:00:{10 * i:02d}"}],
              "right": [{"rk": k, "rv": i, "rts": f"2026-01-01 00:00:{10 * i + 1:02d}"}]}
             for i, k in enumerate("abcd")]

    def build(s: dict[str, DataFrame]) -> DataFrame:
        left = s["left"].withWatermark("lts", "10 seconds")
        right = s["right"].withWatermark("rts", "10 seconds")
        return left.join(right, F.expr("lk = rk AND rts BETWEEN lts AND lts + INTERVAL 5 SECONDS"))

    ours = run_steps(spark, TTLSTATE, build, schemas, steps, restart_after=2)
    theirs = run_steps(spark, ROCKSDB, build, schemas, steps, restart_after=2)
    rows = lambda r: sorted(x for b in r.outputs.values() for x in b)  # noqa: E731
    assert rows(ours) == rows(theirs) and len(rows(ours)) == 4


# TTL in event time (`timeSource=watermark`): deterministic, no sleeping. The first step sets a
# watermark (5 s behind the newest event; before one exists the batch timestamp stands in, see
# docs/clocks.md); a and b are written at a watermark of 5 s and forgotten once it passes 15 s,
# which it does (35 s) at the last step; Spark's RocksDB provider keeps them.
TTL_STEPS = [[ev("z", 1, 10)], [ev("a", 1, 11), ev("b", 1, 12)], [ev("a", 1, 13)], [ev("c", 1, 40)],
             [ev("a", 1, 41), ev("b", 1, 42)]]
TTL_CONFS = {K.TTL.key: "10s", K.TIME_SOURCE.key: "watermark"}
# Where the line's checkpoints name their operators (4.0+), the deduplication's TTL is given by its
# name instead, the global TTL off: its expiry below then shows that the name took effect.
DEDUPE_TTL_CONFS = ({K.operator_ttl_key("dedupe"): "10s", K.TTL.key: "off", K.TIME_SOURCE.key: "watermark"}
                    if operator_names_known(LINE) else TTL_CONFS)


def _ttl_run(spark: SparkSession, provider: str, build, mode: str,  # noqa: ANN001
             confs: dict[str, str] = TTL_CONFS) -> Run:
    return run_steps(spark, provider, build, SCHEMAS, TTL_STEPS, output_mode=mode,
                     confs=confs if provider == TTLSTATE else {})


def _per_step(run: Run) -> list[list[tuple]]:
    """Rows per step (a step may run a second, no-data batch when the watermark moves)."""
    out = outputs_per_step(run)
    return [out.get(step, []) for step in range(len(TTL_STEPS))]


def _keys_per_step(run: Run) -> list[list[str]]:
    return [sorted(r[0] for r in rows) for rows in _per_step(run)]


def test_ttl_on_drop_duplicates(spark: SparkSession) -> None:
    build = lambda s: s["events"].withWatermark("ts", "5 seconds").dropDuplicates(["k"])  # noqa: E731
    ours, theirs = (_ttl_run(spark, p, build, "append", DEDUPE_TTL_CONFS) for p in (TTLSTATE, ROCKSDB))
    assert _keys_per_step(theirs) == [["z"], ["a", "b"], [], ["c"], []]
    assert _keys_per_step(ours) == [["z"], ["a", "b"], [], ["c"], ["a", "b"]]
    # In the query's progress: a and b (and z) expired, on read or by the incremental cleanup of the
    # no-data batch the watermark's move runs first (which one differs between Spark lines).
    expired = sum(p["stateOperators"][0]["customMetrics"]["ttlExpiredTotal"] for p in ours.progress)
    assert expired >= 2
    # and in Spark's own numRowsRemoved (docs/metrics.md), on every line: this deduplication removes
    # nothing itself (the watermark's column is not among its keys), so they are TTL's removals alone
    assert sum(p["stateOperators"][0]["numRowsRemoved"] for p in ours.progress) == expired


@pytest.mark.skipif(operator_names_known(LINE), reason="the line names its operators: see above")
def test_operator_ttl_by_name_is_refused_before_the_query_starts(spark: SparkSession, tmp_path) -> None:  # noqa: ANN001
    """On a line whose checkpoints do not name operators (3.5), `operator_ttl={"dedupe": ...}` fails
    in configure(), and the conf line fails `start()` (the start checks), naming the key, the value
    and what the line allows, instead of the first batch failing."""
    from pyspark.errors import IllegalArgumentException

    import ttlstate

    allowed = f"operator names are allowed on Spark {OPERATOR_NAMES_SINCE} and later"
    with pytest.raises(ValueError, match=rf"'{K.operator_ttl_key('dedupe')}' \(set to '7s'\): {allowed}"):
        ttlstate.configure(SparkSession.builder, operator_ttl={"dedupe": "7s"})
    (tmp_path / "in").mkdir()
    spark.conf.set(K.PROVIDER_CLASS_KEY, TTLSTATE)  # the runs above leave the last one's provider
    spark.conf.set(K.operator_ttl_key("dedupe"), "7s")
    try:
        with pytest.raises(IllegalArgumentException, match=f"{allowed}.*operator.<operatorId>.ttl"):
            spark.readStream.schema(EVENTS_SCHEMA).json(str(tmp_path / "in")).dropDuplicates(["k"]) \
                .writeStream.format("noop").option("checkpointLocation", str(tmp_path / "ck")).start()
    finally:
        spark.conf.unset(K.operator_ttl_key("dedupe"))
    assert not (tmp_path / "ck" / "offsets" / "0").exists()


EXPECTED_COUNTS = [{"z": 1}, {"a": 1, "b": 1}, {"a": 2}, {"c": 1}, {"a": 1, "b": 1}]


def test_ttl_on_aggregation(spark: SparkSession) -> None:
    build = lambda s: s["events"].withWatermark("ts", "5 seconds").groupBy("k").count()  # noqa: E731
    ours = _ttl_run(spark, TTLSTATE, build, "update")
    counts_now = [dict(rows) for rows in _per_step(ours)]
    assert counts_now == EXPECTED_COUNTS  # a and b start over


def test_ttl_on_apply_in_pandas_with_state(spark: SparkSession) -> None:
    def build(s: dict[str, DataFrame]) -> DataFrame:
        return counts({"events": s["events"].withWatermark("ts", "5 seconds")})

    ours = _ttl_run(spark, TTLSTATE, build, "append")
    assert [dict(rows) for rows in _per_step(ours)] == EXPECTED_COUNTS


FINAL_COUNTS = {"a": 5, "b": 3, "c": 1, "d": 1, "e": 1, "f": 1}


def _read_state(spark: SparkSession, checkpoint: str) -> dict[str, int]:
    rows = spark.read.format("statestore").load(checkpoint).collect()
    return {r["key"]["k"]: r["value"]["count"] for r in rows}


def test_aggregation_and_the_state_reader(spark: SparkSession) -> None:
    """The aggregation, and (4.0+: 3.5 has no state data source) its state as Spark's reader sees it."""
    run = _same(spark, lambda s: s["events"].groupBy("k").count(), mode="update")
    if at_least("4.0"):
        assert _read_state(spark, run.checkpoint) == FINAL_COUNTS


@pytest.mark.skipif(not at_least("4.0"), reason="Spark 3.5 has no checkpoint format 2")
def test_checkpoint_format_2(spark: SparkSession) -> None:
    spark.conf.set("spark.sql.streaming.stateStore.checkpointFormatVersion", "2")
    try:
        run = _same(spark, lambda s: s["events"].groupBy("k").count(), mode="update")
        if at_least("4.1"):  # Spark 4.0's state data source reads no checkpoint ids
            assert _read_state(spark, run.checkpoint) == FINAL_COUNTS
    finally:
        spark.conf.unset("spark.sql.streaming.stateStore.checkpointFormatVersion")


@pytest.mark.skipif(not at_least("4.0"), reason="Spark 3.5 has no transformWithState")
def test_transform_with_state_runs_in_a_ttlstate_session(spark: SparkSession) -> None:
    """Every transformWithState API of the line (Scala's, PySpark's in pandas, from 4.1 in rows),
    routed to Spark's RocksDB provider, across a restart (tests/spark/test_transform_with_state.py
    has all of it on 4.3), giving what that provider gives; and the Scala query served by
    ttlstate's own store (`transformWithState=ttlstate`; test_transform_with_state_served.py),
    then repartitioned from 2 to 3 partitions (its column families by their grouping key, as the
    line's schema file and operator metadata describe them; every family kind on 4.3 in
    tests/spark/test_repartition.py) and restarted there: its ValueState and ListState found;
    and every state kind with TTLConfigs and processing-time timers, served, as on Spark's RocksDB
    provider (what Spark's classes for them put in the families changes by line); both served
    queries report each batch's numRowsTotal and metrics of column families as the line's RocksDB
    provider does (4.0 and 4.1 swap the two counts of families); the served query's change feed
    of its ValueState and ListState (each append a record) is the line's RocksDB provider's."""
    from tests.spark.tws_queries import (
        CHANGELOG_ON,
        EXPECTED,
        FEATURE_STEPS,
        RESTART_AFTER,
        SCHEMAS,
        STEPS,
        apis,
        batch_per_step,
        change_feed,
        family_metrics,
        on_rocksdb,
        pinned_providers,
        routed_run,
        tools_method,
    )

    found = apis(spark)
    for name, build in found.items():
        assert routed_run(spark, build).outputs == EXPECTED, name
    theirs = on_rocksdb(spark, found["scala"], confs=CHANGELOG_ON)
    assert theirs.outputs == EXPECTED
    served = run_steps(spark, TTLSTATE, found["scala"], SCHEMAS, STEPS, restart_after=RESTART_AFTER,
                       output_mode="update", confs={K.TRANSFORM_WITH_STATE.key: "ttlstate"})
    assert served.outputs == EXPECTED and set(pinned_providers(served)) == {TTLSTATE}
    assert family_metrics(served) == family_metrics(theirs)  # the line's metrics, swapped on 4.0 and 4.1
    for var in ("count", "values"):  # before the repartition below rewrites the state
        feed = change_feed(spark, served.checkpoint, var)
        assert feed and feed == change_feed(spark, theirs.checkpoint, var), (var, feed)
    assert repartition(spark, served.checkpoint, 3, out=io.StringIO())["to"] == 3
    served.start()
    try:
        served.step([{"k": "a", "v": 9}, {"k": "c", "v": 2}])
    finally:
        served.stop()
    assert served.outputs[max(served.outputs)] == [("a", 4, "1,3,5,9"), ("c", 2, "2,4")]
    assert {op["numShufflePartitions"] for op in served.progress[-1]["stateOperators"]} == {3}
    features = tools_method(spark, "features")

    def build(s: dict[str, DataFrame]) -> DataFrame:
        return features(s["events"])
    ours = batch_per_step(spark, TTLSTATE, build, FEATURE_STEPS, {K.TRANSFORM_WITH_STATE.key: "ttlstate"})
    theirs = batch_per_step(spark, ROCKSDB, build, FEATURE_STEPS)
    assert ours.outputs == theirs.outputs and family_metrics(ours) == family_metrics(theirs)
    assert set(pinned_providers(ours)) == {TTLSTATE}


WRONG_JAR_JOB = """
import sys
from pyspark.sql import SparkSession
spark = (SparkSession.builder.master("local[1]").config("spark.jars", sys.argv[1])
         .config(sys.argv[2], sys.argv[3])
         .config("spark.sql.streaming.stateStore.providerClass", "ttlstate.spark.TtlStateStoreProvider")
         .config("spark.ui.enabled", "false").getOrCreate())
spark.range(3).collect()
print("STARTED")
"""
# Each entry point Spark loads by name checks the line on its own (Java: it loads on Scala 2.12 and
# 2.13 alike): the plugin as the SparkContext starts, the extension as the session starts.
ENTRIES = {"plugin": ("spark.plugins", "ttlstate.spark.StateServerPlugin"),
           "extension": ("spark.sql.extensions", "ttlstate.spark.TtlStateExtensions")}


@pytest.mark.parametrize("entry", sorted(ENTRIES))
def test_another_lines_jar_fails_at_start_naming_this_lines(entry: str, tmp_path) -> None:  # noqa: ANN001
    """A jar built for another Spark line is refused when the session starts, naming the jar to
    use, instead of failing later with a bare NoSuchMethodError or, across Scala 2.12 and 2.13,
    NoClassDefFoundError: the jar of the other Scala (4.3's on 3.5, 3.5's elsewhere)."""
    import subprocess
    import sys

    from ttlstate.spark.configure import jar_path

    other = "4.3" if LINE == "3.5" else "3.5"
    job = tmp_path / "job.py"
    job.write_text(WRONG_JAR_JOB)
    done = subprocess.run([sys.executable, str(job), jar_path(other), *ENTRIES[entry]], capture_output=True,
                          text=True, timeout=300, cwd=tmp_path)
    out = done.stdout + done.stderr
    assert done.returncode != 0 and "STARTED" not in out, out[-3000:]
    wanted = (f"[TTLSTATE_WRONG_SPARK] This ttlstate shim jar is built for Spark {other}, but this is Spark "
              f"{pyspark.__version__}: put ttlstate-shim-spark{LINE}.jar on spark.jars instead")
    assert wanted in out, out[-3000:]
    assert "NoClassDefFoundError" not in out, out[-3000:]


def test_migrate_back_runs_where_offered_and_says_why_not_elsewhere(spark: SparkSession, tmp_path) -> None:  # noqa: ANN001
    """`ttlstate migrate` to ttlstate runs on every line (its cases: tests/spark/test_migrate.py,
    which the tier runs on each line, scripts/spark_versions.sh); back to Spark's own providers
    only where Spark has loadEmpty (4.2+), and elsewhere it says so before starting anything."""
    from ttlstate.spark.lines import MIGRATE_BACK_SINCE, migrate_back_supported
    from ttlstate.spark.migrate import MigrationError, migrate

    if migrate_back_supported(LINE):
        with pytest.raises(MigrationError, match="not a streaming query checkpoint"):
            migrate(spark, str(tmp_path / "none"), str(tmp_path / "new"), to="rocksdb")
    else:
        refusal = (rf"on Spark {LINE}\.\d+ migrate writes ttlstate's state only.*needs Spark "
                   rf"{MIGRATE_BACK_SINCE}'s loadEmpty")
        with pytest.raises(MigrationError, match=refusal):
            migrate(spark, str(tmp_path / "none"), str(tmp_path / "new"), to="rocksdb")
    with pytest.raises(MigrationError, match="not a streaming query checkpoint"):  # to ttlstate: runs
        migrate(spark, str(tmp_path / "none"), str(tmp_path / "new"))
