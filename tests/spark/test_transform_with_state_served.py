"""transformWithState served by ttlstate's own store (`transformWithState=ttlstate`, opt-in).

Its stores' column families are key prefixes in ttlstate's store; from Spark 4.2 the extension
admits ttlstate's provider to the operators that check it. Each query here runs on ttlstate
(the offset log names ttlstate's provider, the state folders hold ttlstate's changelogs) and on
Spark's RocksDB provider, both restarted in the middle, and must give the same rows: every API
of Spark 4.3 (Scala, `transformWithStateInPandas`, row-based `transformWithState`), and in Scala
ValueState, ListState and MapState with and without `TTLConfig` (a 1 ms TTL expires at any later
batch), processing-time timers, event-time timers and an initial state; the state data source
reads a served store, and its change feed of a ValueState, a ListState and a MapState is Spark's,
every write of a batch (a value updated twice in one, a ListState's appends), on checkpoint
format 1 (format 2's is not yet served). Each batch's numRowsTotal and the metrics of its column
families (internal families' keys, how many families of each kind) are those of Spark's provider."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from pyspark.sql import DataFrame, SparkSession

from tests.damage import damage
from tests.spark.harness import EVENTS_SCHEMA, ROCKSDB, TTLSTATE, Run, ev, poll_until, run_steps, session
from tests.spark.tws_queries import (
    CHANGELOG_ON,
    EXPECTED,
    FEATURE_STEPS,
    FINAL_COUNTS,
    SCHEMAS,
    STEPS,
    apis,
    batch_per_step,
    change_feed,
    family_metrics,
    pinned_providers,
    read_counts,
    scala_counts,
    tools_method,
    warnings,
)
from ttlstate.config import keys as K
from ttlstate.store import metric_names as M

pytestmark = pytest.mark.spark

SERVED = {K.TRANSFORM_WITH_STATE.key: "ttlstate"}


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    s = session(ttl="5s")
    yield s
    s.stop()


def _both(spark: SparkSession, build, schemas: dict[str, str], steps: list, restart_after: int = 1,  # noqa: ANN001
          ) -> tuple[Run, Run]:
    def run(provider: str, confs: dict[str, str]) -> Run:
        return run_steps(spark, provider, build, schemas, steps, restart_after=restart_after,
                         output_mode="update", confs=confs)
    ours, theirs = run(TTLSTATE, SERVED), run(ROCKSDB, CHANGELOG_ON)
    assert pinned_providers(ours) and set(pinned_providers(ours)) == {TTLSTATE}
    store = os.path.join(ours.checkpoint, "state", "0", "0")
    assert any(name.endswith(".changelog") for name in os.listdir(store))
    assert family_metrics(ours) == family_metrics(theirs)
    return ours, theirs


def _rows(run: Run) -> list[tuple]:
    """Every row the run emitted: timers fire in whichever batch runs after their time."""
    return sorted((row for rows in run.outputs.values() for row in rows), key=repr)


def test_each_api_served_by_ttlstate_as_on_rocksdb(spark: SparkSession) -> None:
    for name, build in apis(spark).items():
        ours, theirs = _both(spark, build, SCHEMAS, STEPS)
        assert ours.outputs == theirs.outputs == EXPECTED, name
        assert any(ours.checkpoint in w and "do not apply to the transformWithState operators" in w
                   for w in warnings(spark)), name
    assert read_counts(spark, ours.checkpoint) == FINAL_COUNTS  # the state data source, on ttlstate's store
    # The change feed of a ValueState and a ListState (each append: appendList of 3 and 5 is
    # two rows), as Spark's RocksDB provider gives it.
    feed = change_feed(spark, ours.checkpoint, "count")
    assert feed == change_feed(spark, theirs.checkpoint, "count") and len(feed) == 5, feed
    feed = change_feed(spark, ours.checkpoint, "values")
    assert feed == change_feed(spark, theirs.checkpoint, "values") and len(feed) == 6, feed
    assert all("'change_type': 'append'" in row for row in feed)


def test_state_kinds_ttl_and_processing_time_timers(spark: SparkSession) -> None:
    features = tools_method(spark, "features")

    def build(s: dict[str, DataFrame]) -> DataFrame:
        return features(s["events"])
    # The last two steps iterate the MapState of 200 keys each, about 100 per partition: past the
    # 64th prefix scan of a family in a version, the task copies the family and answers the rest.
    many = [[{"k": f"m{i}", "v": (i + step) % 3} for i in range(200)] for step in range(2)]
    steps = [*FEATURE_STEPS, *many]
    ours = batch_per_step(spark, TTLSTATE, build, steps, SERVED)
    theirs = batch_per_step(spark, ROCKSDB, build, steps)
    assert set(pinned_providers(ours)) == {TTLSTATE}
    assert ours.outputs == theirs.outputs
    # The 1 ms TTL'd value is gone; batch 0's timers fire.
    assert ours.outputs[1] == [("a", "in", 3, "recent=-1 map=1:2,3:1 list=1,1,3"),
                               ("a", "timer", 0, ""), ("b", "timer", 0, "")]
    assert ("m1", "in", 2, "recent=-1 map=1:1,2:1 list=1,2") in ours.outputs[5]
    copied = [int(op["customMetrics"].get(M.FAMILY_COPY_SCANS.name, 0))
              for op in ours.progress[-1]["stateOperators"]]
    assert sum(copied) > 0, copied  # the copies answered, and exactly (the outputs above)


def test_event_time_timers_and_initial_state(spark: SparkSession) -> None:
    event_timers = tools_method(spark, "eventTimers")

    def build(s: dict[str, DataFrame]) -> DataFrame:
        initial = spark.createDataFrame([("a", 10), ("z", 100)], "k STRING, n LONG")
        return event_timers(s["events"].withWatermark("ts", "5 seconds"), initial)
    steps = [[ev("a", 1, 1), ev("b", 2, 2)], [ev("a", 3, 4)], [ev("c", 4, 20)], [ev("a", 5, 40)]]
    ours, theirs = _both(spark, build, {"events": EVENTS_SCHEMA}, steps, restart_after=2)
    assert _rows(ours) == _rows(theirs)
    fired = sorted(r[0] for r in _rows(ours) if r[1].startswith("timer"))
    assert fired == ["a", "a", "b", "c"] and ("a", "in", 11, "1:1") in _rows(ours)  # initial count 10
    # The change feed of a ValueState and a MapState, every write as on Spark's provider: the
    # initial state's put of "a" and the first batch's update of it are two changes of batch 0.
    # Spark's state data source fails on its own provider's timers' change feed
    # (`readRegisteredTimers`: a ClassCastException in 4.3), so timers are not compared.
    for var in ("count", "values"):
        feed = change_feed(spark, ours.checkpoint, var)
        assert feed and feed == change_feed(spark, theirs.checkpoint, var), var
    assert sum("'batch_id': 0, 'change_type': 'update', 'key': {'value': 'a'}" in row
               for row in change_feed(spark, ours.checkpoint, "count")) == 2


FORMAT_KEY = "spark.sql.streaming.stateStore.checkpointFormatVersion"
MORE = [{"k": "a", "v": 7}, {"k": "d", "v": 8}]


def _version(name: str) -> int:
    """The version of a checkpoint file: `5.snapshot`, `5_<id>.snapshot`."""
    return int(name.split(".")[0].split("_")[0])


def _snapshots(store: str) -> list[str]:
    return [n for n in os.listdir(store) if n.endswith(".snapshot") and not n.startswith(".")]


@pytest.mark.parametrize(("layout", "checkpoint_format"), [("sst", "2"), ("records", "1")])
def test_snapshots_of_both_layouts_and_formats_rebuild_the_families_and_a_damaged_one_is_repaired(
        spark: SparkSession, layout: str, checkpoint_format: str) -> None:
    """A served store's snapshots (both layouts, both checkpoint formats between the two cases)
    hold its column families: every store snapshotted, its newest snapshot then damaged (a byte
    flipped), the restarted query rebuilds each store from an older snapshot and the changelogs
    since (counted as repaired) and goes on as the same query on Spark's RocksDB provider."""
    counts = scala_counts(spark)
    confs = {**SERVED, K.SNAPSHOT_INTERVAL.key: "1", K.SNAPSHOT_LAYOUT.key: layout,
             FORMAT_KEY: checkpoint_format}
    run = Run(spark, TTLSTATE, counts, SCHEMAS, "update", confs)
    run.start()
    try:
        for rows in STEPS:
            run.step(rows)
        state = os.path.join(run.checkpoint, "state", "0")
        stores = [os.path.join(state, p) for p in sorted(os.listdir(state)) if p.isdigit()]
        newest = len(STEPS)  # every store snapshotted at the newest version (maintenance: every second)
        assert poll_until(lambda: all(any(_version(n) == newest for n in _snapshots(s)) for s in stores), 60)
    finally:
        run.stop()
    for store in stores:
        damage(os.path.join(store, max(_snapshots(store), key=_version)), "flip")
    run.start()
    try:
        run.step(MORE)
    finally:
        run.stop()
    theirs = run_steps(spark, ROCKSDB, counts, SCHEMAS, [*STEPS, MORE], output_mode="update",
                       confs=CHANGELOG_ON)
    assert run.outputs == theirs.outputs and run.outputs[len(STEPS)] == [("a", 4, "1,3,5,7"), ("d", 1, "8")]
    if checkpoint_format == "1":  # the ListState's change feed after a repair (format 2: not yet served)
        feed = change_feed(spark, run.checkpoint, "values")
        assert feed == change_feed(spark, theirs.checkpoint, "values") and len(feed) == 8, feed
    # The counts of keys survive the snapshot (its header, or its build) and the repair.
    assert family_metrics(run) == family_metrics(theirs)
    operators = run.progress_by_batch[len(STEPS)]["stateOperators"]
    repaired = sum(int(op["customMetrics"].get(M.SNAPSHOTS_AUTO_REPAIRED.name, 0)) for op in operators)
    assert repaired == len(stores)
