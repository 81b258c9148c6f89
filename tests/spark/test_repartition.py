"""`ttlstate repartition`: a query runs some batches with N state partitions, is stopped, its
checkpoint is repartitioned to M, and it continues there. Its outputs must be those of the same
query run from the start with M partitions (Spark's RocksDB provider, or ttlstate where TTL
expires keys on the way), up and down and to prime counts; every entry keeps its TtlValue and the
files record what the old ones did. Also what it refuses, and its dry run."""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pandas as pd
import psutil
import pyspark
import pytest
from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery
from pyspark.sql.streaming.state import GroupStateTimeout

from tests.damage import damage
from tests.spark.harness import (
    EVENTS_SCHEMA,
    ROCKSDB,
    TTLSTATE,
    Run,
    is_worker,
    our_server_processes,
    outputs_per_step,
    poll_until,
    session,
)
from tests.spark.test_differential import JOIN_SCHEMAS, JOIN_STEPS, join
from tests.spark.tws_queries import tools_method
from ttlstate import faults
from ttlstate.checkpoint import names
from ttlstate.checkpoint.identity import store_label
from ttlstate.checkpoint.location import LocalCheckpointLocation
from ttlstate.checkpoint.record_file import verify_record_file
from ttlstate.cli.commit_log import committed_ids
from ttlstate.config import keys as K
from ttlstate.config.store_config import StoreConfig
from ttlstate.spark.repartition import RepartitionError, repartition
from ttlstate.store.column_families import split_key
from ttlstate.store.provider import StoreProvider

pytestmark = pytest.mark.spark

SCHEMA = {"events": EVENTS_SCHEMA}
ONE_BATCH_PER_STEP = {"spark.sql.streaming.noDataMicroBatches.enabled": "false"}
FORMAT_VERSION = "spark.sql.streaming.stateStore.checkpointFormatVersion"


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    s = session(ttl="1h")
    yield s
    s.stop()


def at(k: str, minute: int, v: int = 1) -> dict:
    """An event of key `k` at `minute` minutes past 2026-01-01 00:00 (event time)."""
    return {"k": k, "v": v, "ts": f"2026-01-01 {minute // 60:02d}:{minute % 60:02d}:00"}


def keys(first: int, last: int, minute: int) -> list[dict]:
    return [at(f"k{i}", minute, i) for i in range(first, last + 1)]


def partitioned(confs: dict[str, str], partitions: int) -> dict[str, str]:
    """`confs` for a run from the start (one batch per step) with `partitions` state partitions."""
    return {**ONE_BATCH_PER_STEP, **confs, "spark.sql.shuffle.partitions": str(partitions)}


def side_by_side(runs: list[Run], steps: list) -> None:
    """Each step fed to every run, then every run settled: their batches overlap."""
    for rows in steps:
        for run in runs:
            run.feed(rows)
        for run in runs:
            run.settle()


def rescaled(spark: SparkSession, reference: str, build: Callable, steps: list, mode: str, old: int,
             new: int, stop_after: int, confs: dict[str, str] | None = None,
             schemas: dict[str, str] = SCHEMA, killed_at: str | None = None) -> tuple[Run, Run]:
    """The query on ttlstate with `old` partitions for `stop_after` steps, repartitioned to `new`
    (`killed_at`: first stopped at that crash point, then run again to finish), then on for the
    other steps; beside it, the same query on `reference` with `new` partitions
    from the start. Every entry and what the files recorded must be the same after the
    repartition as before; the continued query runs with `new` partitions."""
    confs = {**ONE_BATCH_PER_STEP, **(confs or {})}
    first = Run(spark, TTLSTATE, build, schemas, mode, partitioned(confs, old))
    expected = Run(spark, reference, build, schemas, mode, partitioned(confs, new))
    first.start()
    expected.start()
    side_by_side([first, expected], steps[:stop_after])
    first.stop()
    before = raw_state(first.checkpoint)
    if killed_at is not None:
        with crashing_at(killed_at):
            repartition(spark, first.checkpoint, new, out=open(os.devnull, "w"))  # noqa: SIM115
    summary = repartition(spark, first.checkpoint, new, out=open(os.devnull, "w"))  # noqa: SIM115
    assert (summary["from"], summary["to"], summary["batch"]) == (old, new, max(first.outputs))
    assert summary.get("resumed", False) == (killed_at is not None)
    assert raw_state(first.checkpoint) == before, "entries (keys, TtlValues) or recorded settings changed"
    assert not os.path.exists(os.path.join(first.checkpoint, "_ttlstate_repartition"))
    got = Run(spark, TTLSTATE, build, schemas, mode, confs, root=first.root)
    got.checkpoint, got.step_no, got.outputs = first.checkpoint, first.step_no, dict(first.outputs)
    got.step_of_batch = dict(first.step_of_batch)
    got.start()
    side_by_side([got, expected], steps[stop_after:])
    got.stop()
    expected.stop()
    assert {op["numShufflePartitions"] for p in got.progress for op in p["stateOperators"]} == {new}
    return got, expected


def raw_state(checkpoint: str) -> dict[tuple[str, str], dict]:
    """Per operator and store: every entry (key -> TtlValue) of the newest version of each of its
    partitions, read from the files as a state reader would, with the settings and batch time its
    newest files recorded."""
    out: dict[tuple[str, str], dict] = {}
    for (op, _part, name), entries, recorded in _stores_read(checkpoint):
        entry = out.setdefault((op, name), {"entries": {}, "recorded": set()})
        for k, v in entries.items():
            assert k not in entry["entries"], "a key in two partitions"
            entry["entries"][k] = v
        entry["recorded"].add(recorded)
    return out


def _stores_read(checkpoint: str) -> Iterator[tuple[tuple[str, str, str], dict, tuple]]:
    """Each store's (operator, partition, name), its newest version's entries, and the version,
    batch time and settings its changelog recorded."""
    state = os.path.join(checkpoint, "state")
    for op in sorted(os.listdir(state)):
        for part in sorted(p for p in os.listdir(os.path.join(state, op)) if p.isdigit()):
            folder = os.path.join(state, op, part)
            stores = [(d, os.path.join(folder, d)) for d in os.listdir(folder)
                      if os.path.isdir(os.path.join(folder, d)) and not d.startswith("_")]
            for name, directory in stores or [("default", folder)]:
                version, ckpt_id = _newest_committed(checkpoint, op, part, directory)
                tmp = tempfile.mkdtemp()
                p = StoreProvider(store_label(op, part, name), tmp, LocalCheckpointLocation(directory),
                                  StoreConfig(), reader=True, checkpoint_ids=bool(ckpt_id))
                try:
                    p.get_store(version, read_only=True, ckpt_id=ckpt_id or None).release()
                    entries = dict(p.engine.iterate())
                    changelog = os.path.join(directory, names.changelog_name(version, ckpt_id))
                    header = verify_record_file(changelog, b"C")
                    settings = json.dumps(header.settings, sort_keys=True)
                    yield (op, part, name), entries, (version, header.batch_time_ms, settings)
                finally:
                    p.close()
                    shutil.rmtree(tmp, ignore_errors=True)


def _newest_committed(checkpoint: str, op: str, part: str, directory: str) -> tuple[int, str]:
    """The store's newest version, and on checkpoint format 2 the id of it that the newest
    commit log entry names ("" on format 1)."""
    files = [f for f in names.parse_all(os.listdir(directory)) if f.kind == names.CHANGELOG]
    version = max(f.version for f in files)
    committed = committed_ids(checkpoint, op, part)
    ids = [f.ckpt_id for f in files if f.version == version and f.ckpt_id]
    if not ids:
        return version, ""
    assert committed is not None and committed[0] == version, (committed, version)
    named = [i for i in ids if i in committed[1]]
    assert len(named) == 1, (ids, committed)
    return version, named[0]


# Aggregation by a string and an int, TTL 10 minutes of event time (timeSource=watermark: the
# same expiry in every run) refreshed by reads too. The first step only starts the watermark;
# keys last accessed at minutes 0 and 1 expire in the batch of minute 12, after the repartition
# (their counts restart).
TTL_STEPS = [[at("w", 0)], keys(0, 19, 1), keys(0, 9, 6), keys(0, 4, 11), keys(0, 19, 12), keys(15, 19, 30)]
TTL_CONFS = {K.TTL.key: "10m", K.TIME_SOURCE.key: "watermark", K.UPDATE_TYPE.key: "OnReadAndWrite"}


def agg_by_two_columns(s: dict[str, DataFrame]) -> DataFrame:
    return (s["events"].withWatermark("ts", "0 seconds").withColumn("g", F.col("v") % 3)
            .groupBy("k", "g").agg(F.count("*").alias("n"), F.sum("v").alias("total")))


def test_aggregation_up_to_a_prime_count_keeps_ttl(spark: SparkSession) -> None:
    got, expected = rescaled(spark, TTLSTATE, agg_by_two_columns, TTL_STEPS, "update", 2, 5, 4, TTL_CONFS)
    assert got.outputs == expected.outputs
    counts = {r[0]: r[2] for r in got.outputs[4]}
    assert counts["k0"] == 4 and counts["k19"] == 1, "keys expired on schedule"


STEPS = [keys(0, 11, 1), keys(6, 17, 3) + [at("k1", 2)], keys(12, 23, 20), keys(0, 23, 40)]


def _running_count(key: tuple, pdfs, state):  # noqa: ANN001, ANN202
    count = (state.get[0] if state.exists else 0) + sum(len(pdf) for pdf in pdfs)
    state.update((count,))
    yield pd.DataFrame({"k": [key[0]], "n": [count]})


OPERATORS = {
    "session-window-2-to-3": (lambda s: s["events"].withWatermark("ts", "10 minutes")
                              .groupBy(F.session_window("ts", "5 minutes"), "k").agg(F.count("*").alias("n")),
                              "append", 2, 3),
    "apply-in-pandas-3-to-2": (lambda s: s["events"].groupBy("k").applyInPandasWithState(
        _running_count, "k STRING, n LONG", "n LONG", "update", GroupStateTimeout.NoTimeout), "update", 3, 2),
}


@pytest.mark.parametrize("name", OPERATORS)
def test_operator_against_spark_rocksdb(spark: SparkSession, name: str) -> None:
    build, mode, old, new = OPERATORS[name]
    got, expected = rescaled(spark, ROCKSDB, build, STEPS, mode, old, new, 2)
    assert got.outputs == expected.outputs


def test_dedup_on_checkpoint_format_2_against_spark_rocksdb(spark: SparkSession) -> None:
    """dropDuplicates 4 -> 3 on checkpoint format 2 (format 1 is the other operators'): the old
    stores are read at the ids the last commit recorded, and the commit log entry is rewritten
    with the new stores' ids (one list per new partition), which the restarted query loads by.
    Killed right after that rewrite, the command run again finishes the switch."""
    got, expected = rescaled(spark, ROCKSDB, lambda s: s["events"].dropDuplicates(["k"]), STEPS, "append", 4,
                             3, 2, {FORMAT_VERSION: "2"}, killed_at="repartition-ids-switched")
    assert got.outputs == expected.outputs
    ids = committed_ids(got.checkpoint, "0", "1")
    assert ids is not None and ids[0] == 1 + max(got.outputs)  # the continued query's own commits
    with open(os.path.join(got.checkpoint, "commits", "1")) as f:  # the rewritten entry: 3 partitions
        assert len(json.loads(f.read().split("\n")[1])["stateUniqueIds"]["0"]) == 3


# transformWithState served by ttlstate (processing time, Scala: TransformWithStateQueries.features):
# ValueStates with and without a TTLConfig, a MapState and a ListState with TTLConfigs, and a
# processing-time timer per key and batch; so every family kind: the variables, the list's row
# counter and TTL indexes ($rowCounter_, $ttl_, $min_, $count_), the map's TTL index, and the timers
# with their secondary index. One batch per step (Trigger.Once): such a query never settles. Each
# batch fires the timers the one before registered. The keys' names occur in no other key's bytes.
TWS_KEYS = ("alpha-key", "bravo-key", "charlie-key", "delta-key", "echo-key", "foxtrot-key")
TWS_STEPS = [[{"k": k, "v": v} for k, v in zip(TWS_KEYS[:4], (1, 2, 1, 3), strict=True)],
             [{"k": k, "v": v} for k, v in zip(TWS_KEYS[1:5], (3, 6, 2, 2), strict=True)],
             [{"k": k, "v": v} for k, v in zip(TWS_KEYS[::2] + TWS_KEYS[5:], (5, 7, 1, 4), strict=True)]]
TWS_RESCALES = {1: 3, 2: 2}  # before step 1: up to 3 partitions; before step 2: down to 2
TWS_VARIABLES = ("seen", "recent", "perValue", "history")


def _state_by_variable(spark: SparkSession, checkpoint: str) -> dict[str, list]:
    """Each state variable's entries as Spark's state data source reads them (its partition
    aside), and the keys with registered timers; TTL expiration times (processing time: they
    differ between runs) left out."""
    def plain(v: object) -> object:
        if isinstance(v, Row):
            return tuple(plain(x) for k, x in v.asDict().items() if k != "ttlExpirationMs")
        if isinstance(v, list):
            return sorted((plain(x) for x in v), key=repr)
        if isinstance(v, dict):
            return sorted(((plain(k), plain(x)) for k, x in v.items()), key=repr)
        return v
    out = {}
    for name in TWS_VARIABLES:
        rows = spark.read.format("statestore").option("stateVarName", name).load(checkpoint).collect()
        out[name] = sorted(((plain(r["key"]), plain(r[c])) for r in rows for c in r.asDict()
                            if c not in ("key", "partition_id")), key=repr)
    timers = spark.read.format("statestore").option("readRegisteredTimers", "true").load(checkpoint).collect()
    out["timers"] = sorted({plain(r["key"]) for r in timers}, key=repr)
    return out


def _partitions_by_grouping_key(checkpoint: str) -> dict[str, set[str]]:
    """For each grouping key, the partitions holding any entry of any column family that names
    it (every family's keys contain their grouping key's bytes): one each, where its ValueState
    is, when every family was placed by its grouping key."""
    where: dict[str, set[str]] = {}
    for (_op, part, _name), entries, _recorded in _stores_read(checkpoint):
        for stored in entries:
            family, key = split_key(stored)
            named = [k for k in TWS_KEYS if k.encode() in key]
            assert len(named) == 1, (family, key)
            where.setdefault(named[0], set()).add(part)
    return where


def test_transform_with_state_served_up_and_down(spark: SparkSession) -> None:
    """A served transformWithState 2 -> 3 (a prime count) after a batch, then 3 -> 2 after the
    next, each time restarted: every batch's output, and each state variable and the timers as
    the state data source reads them, equal the same query's on Spark's RocksDB provider with 3
    partitions from the start; each move keeps every entry as it was (its value with the TTL
    expiration time in it), and after it every family's entries of a grouping key are in one
    partition; the operator metadata (v2) names the new count."""
    features = tools_method(spark, "features")

    def build(s: dict[str, DataFrame]) -> DataFrame:
        return features(s["events"])

    served = {K.TRANSFORM_WITH_STATE.key: "ttlstate"}
    ours = Run(spark, TTLSTATE, build, SCHEMA, "update", partitioned(served, 2))
    theirs = Run(spark, ROCKSDB, build, SCHEMA, "update", partitioned({}, 3))
    quiet = open(os.devnull, "w")  # noqa: SIM115
    for i, rows in enumerate(TWS_STEPS):
        if i in TWS_RESCALES:
            if i == 1:
                said = io.StringIO()
                repartition(spark, ours.checkpoint, TWS_RESCALES[i], dry_run=True, out=said)
                assert "store default: 2 -> 3 partitions" in said.getvalue(), said.getvalue()
                for family in ("$procTimers_timestampToKey", "$rowCounter_history", "$count_history",
                               "$ttl_perValue", "perValue"):
                    assert f" {family}," in said.getvalue(), family
            before = raw_state(ours.checkpoint)
            assert repartition(spark, ours.checkpoint, TWS_RESCALES[i], out=quiet)["to"] == TWS_RESCALES[i]
            assert raw_state(ours.checkpoint) == before, "entries (keys, values, TTL times) changed"
            placed = _partitions_by_grouping_key(ours.checkpoint)
            assert {k: len(p) for k, p in placed.items()} == {k: 1 for k in placed}, placed
            assert set().union(*placed.values()) <= {str(p) for p in range(TWS_RESCALES[i])}
        for run in (ours, theirs):
            run.feed(rows)
            run.start(once=True)
            assert run.query is not None
            run.query.awaitTermination()
            run.query = None
    assert ours.outputs == theirs.outputs
    assert any(row[1] == "timer" for row in ours.outputs[2])  # timers moved down fire
    assert _state_by_variable(spark, ours.checkpoint) == _state_by_variable(spark, theirs.checkpoint)
    metadata = os.path.join(ours.checkpoint, "state", "0", "_metadata", "v2")
    newest = max((n for n in os.listdir(metadata) if n.isdigit()), key=int)
    with open(os.path.join(metadata, newest)) as f:
        assert {s["numPartitions"] for s in json.loads(f.read().split("\n")[-1])["stateStoreInfo"]} == {2}


def test_stream_stream_join_against_spark_rocksdb(spark: SparkSession) -> None:
    got, expected = rescaled(spark, ROCKSDB, join("left_outer"), JOIN_STEPS, "append", 2, 3, 2,
                             schemas=JOIN_SCHEMAS)
    # Two sources: Spark may split a step into two batches in one run and not the other (harness.py).
    assert outputs_per_step(got) == outputs_per_step(expected)


@pytest.fixture(scope="module")
def stopped(spark: SparkSession) -> Run:
    """A stopped aggregation on ttlstate, 2 partitions, 2 batches: copied by the tests below."""
    run = Run(spark, TTLSTATE, agg_by_two_columns, SCHEMA, "update", partitioned(TTL_CONFS, 2))
    run.start()
    side_by_side([run], TTL_STEPS[:2])
    run.stop()
    return run


def _copy(run: Run, tmp_path) -> str:  # noqa: ANN001
    target = str(tmp_path / "ck")
    shutil.copytree(run.checkpoint, target)
    return target


def _files(root: str) -> dict[str, bytes]:
    """Every file of a checkpoint but its lock (whose holder line changes with every holder)."""
    out = {}
    for d, _dirs, files in os.walk(root):
        for n in files:
            if n.startswith("_ttlstate_lock"):
                continue
            with open(os.path.join(d, n), "rb") as f:
                out[os.path.relpath(os.path.join(d, n), root)] = f.read()
    return out


def _edit_offsets(checkpoint: str, batch: int, **conf: str) -> None:
    path = os.path.join(checkpoint, "offsets", str(batch))
    with open(path) as f:
        lines = f.read().split("\n")
    meta = json.loads(lines[1])
    meta["conf"].update(conf)
    lines[1] = json.dumps(meta)
    with open(path, "w") as f:
        f.write("\n".join(lines))
    crc = os.path.join(checkpoint, "offsets", f".{batch}.crc")
    if os.path.exists(crc):
        os.unlink(crc)


def test_refusals_leave_the_checkpoint_as_it_was(spark: SparkSession, stopped: Run,
                                                 tmp_path) -> None:  # noqa: ANN001
    ck = _copy(stopped, tmp_path)
    before = _files(ck)
    for partitions, why in ((0, "from 1 to"), (-3, "from 1 to"), ("x", "whole number"), (2, "already has 2")):
        with pytest.raises(RepartitionError, match=why):
            repartition(spark, ck, partitions)  # type: ignore[arg-type]
    with pytest.raises(RepartitionError, match="not a streaming query checkpoint"):
        repartition(spark, str(tmp_path), 3)
    _edit_offsets(ck, 1, **{FORMAT_VERSION: "3"})
    with pytest.raises(RepartitionError, match="format version 3"):
        repartition(spark, ck, 3)
    _edit_offsets(ck, 1, **{FORMAT_VERSION: "2"})  # a format 1 commit log: no ids to load by
    with pytest.raises(RepartitionError, match="records no state checkpoint ids .* for operator 0"):
        repartition(spark, ck, 3)
    _edit_offsets(ck, 1, **{FORMAT_VERSION: "1",
                            "spark.sql.streaming.statefulOperator.useStrictDistribution": "false"})
    with pytest.raises(RepartitionError, match="useStrictDistribution=false"):
        repartition(spark, ck, 3)
    shutil.rmtree(ck)
    ck = _copy(stopped, tmp_path)
    os.unlink(os.path.join(ck, "commits", "1"))
    with pytest.raises(RepartitionError, match="batch 1 .* never committed"):
        repartition(spark, ck, 3)
    assert {k: v for k, v in _files(ck).items() if "commits" not in k} == {
        k: v for k, v in before.items() if "commits" not in k}


def test_a_damaged_header_is_named_as_damaged_not_as_different_settings(spark: SparkSession, stopped: Run,
                                                                       tmp_path) -> None:  # noqa: ANN001
    """One partition's changelog of the version to move with one bit of its header's TTL flipped
    (its JSON still parses, only the checksum tells): the command names that file as damaged, not
    the partitions' TTL settings as different, and changes nothing."""
    ck = _copy(stopped, tmp_path)
    victim = os.path.join(ck, "state", "0", "1", "2.changelog")
    with open(victim, "rb") as f:
        data = f.read()
    ttl = b'"ttlMs": 600000, "updateType"'  # TTL_CONFS' 10m, in the header's settings
    assert data.count(ttl) == 1
    with open(victim, "wb") as f:
        f.write(data.replace(ttl, b'"ttlMs": 600001, "updateType"'))
    before = _files(ck)
    with pytest.raises(RepartitionError, match=re.escape("/state/0/1/2.changelog is damaged: it is corrupt "
                                                         "(checksum mismatch)")):
        repartition(spark, ck, 3, out=open(os.devnull, "w"))  # noqa: SIM115
    assert _files(ck) == before


def test_another_providers_checkpoint_is_refused_naming_migrate(spark: SparkSession) -> None:
    run = Run(spark, ROCKSDB, agg_by_two_columns, SCHEMA, "update", TTL_CONFS)
    run.start()
    side_by_side([run], TTL_STEPS[:1])
    run.stop()
    with pytest.raises(RepartitionError, match="RocksDBStateStoreProvider.*ttlstate migrate"):
        repartition(spark, run.checkpoint, 3)


def test_a_running_query_and_a_running_repartition_exclude_each_other(spark: SparkSession, stopped: Run,
                                                                      tmp_path) -> None:  # noqa: ANN001
    """The checkpoint's lock: a query of this session, or another process holding the lock file,
    makes the command refuse; a query does not start while a tool holds it (here another process
    holds it as `ttlstate repartition` does), but does while another query's driver holds it."""
    ck = _copy(stopped, tmp_path)
    run = Run(spark, TTLSTATE, agg_by_two_columns, SCHEMA, "update", TTL_CONFS, root=stopped.root)
    run.checkpoint = ck
    run.start()
    try:
        with pytest.raises(RepartitionError, match="running query .* of this session: stop it first"):
            repartition(spark, ck, 3)
    finally:
        run.stop()
    lock = os.path.join(ck, "_ttlstate_lock")
    assert poll_until(lambda: _lockable(ck), 30, every_s=0.1)  # the stopped run let its lock go
    with _held(lock, "tool ttlstate repartition in a test"):
        with pytest.raises(RepartitionError, match="in use by ttlstate repartition in a test"):
            repartition(spark, ck, 3)
        with pytest.raises(Exception, match="TTLSTATE_CHECKPOINT_LOCKED.*by ttlstate repartition in a test"):
            run.start()
    with _held(lock, "query a streaming query of another driver"):
        with pytest.raises(RepartitionError, match="in use by a streaming query of another driver"):
            repartition(spark, ck, 3)
    # Another query's driver (live, or dead with its lease still held on HDFS) never stops a query
    # from starting; the query runs without the lock, and takes it after a batch once it is free.
    other = str(tmp_path / "other")
    os.makedirs(other)
    with _held(os.path.join(other, "_ttlstate_lock"), "query a streaming query of another driver"):
        query = _rate_query(spark, other, "lock-after-another-driver")
        assert poll_until(lambda: query.lastProgress is not None, 60)  # it runs
    try:  # the other driver was killed (-9) when its block ended
        assert poll_until(lambda: not _lockable(other), 30, every_s=0.1)
    finally:
        query.stop()
    assert poll_until(lambda: _lockable(other), 30, every_s=0.1)
    assert repartition(spark, ck, 3, out=open(os.devnull, "w"))["to"] == 3  # noqa: SIM115


def test_the_lock_follows_every_run_of_a_session(spark: SparkSession, tmp_path) -> None:  # noqa: ANN001
    """Two queries of one session each hold their checkpoint's lock while they run (one given as
    a file: URI whose path has a space and a %, as Spark resolves it: the lock is in that folder
    and no other is made); a start that fails after ttlstate's checks (its query name in use)
    keeps no lock; each lock is free again once its query stopped."""
    spaced, two, three = (str(tmp_path / "a b%41" / "ck"), str(tmp_path / "two"), str(tmp_path / "three"))

    def start(checkpoint: str, name: str) -> StreamingQuery:
        return _rate_query(spark, checkpoint, name)

    one = start("file://" + spaced, "lock-one")
    try:
        q2 = start(two, "lock-two")
        try:
            assert os.path.exists(os.path.join(spaced, "_ttlstate_lock"))
            assert sorted(os.listdir(tmp_path)) == ["a b%41", "two"]
            assert not _lockable(spaced) and not _lockable(two)
            with pytest.raises(Exception, match="lock-one"):
                start(three, "lock-one")
            one.stop()
            assert poll_until(lambda: _lockable(spaced) and _lockable(three), 30, every_s=0.1)
            assert not _lockable(two)
            with pytest.raises(RepartitionError, match="running query lock-two of this session"):
                repartition(spark, two, 3)
        finally:
            q2.stop()
    finally:
        one.stop()
    assert poll_until(lambda: _lockable(two), 30, every_s=0.1)


def _rate_query(spark: SparkSession, checkpoint: str, name: str) -> StreamingQuery:
    """A small deduplication on ttlstate, a batch every 0.2 s."""
    return (spark.readStream.format("rate").option("rowsPerSecond", 5).load().dropDuplicates(["value"])
            .writeStream.format("noop").queryName(name).option("checkpointLocation", checkpoint)
            .trigger(processingTime="200 milliseconds").start())


def _lockable(checkpoint: str) -> bool:
    """Whether another process can take the checkpoint's lock now (it frees it at once)."""
    path = os.path.join(checkpoint, "_ttlstate_lock")
    return subprocess.run([sys.executable, "-c", TRY_LOCK, path]).returncode == 0


TRY_LOCK = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_CREAT | os.O_RDWR, 0o644)
try:
    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
except OSError:
    sys.exit(1)
"""


@contextmanager
def _held(path: str, line: str) -> Iterator[None]:
    """The lock file held by another process, with `line` as its holder."""
    holder = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, path, line], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"  # type: ignore[union-attr]
        yield
    finally:
        holder.kill()
        holder.wait()


# Another process holding a checkpoint's lock: an fcntl lock on the file (what Java's
# FileChannel.tryLock takes on Linux), with its holder line (its first word: query or tool).
HOLD_LOCK = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_CREAT | os.O_RDWR, 0o644)
fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
os.ftruncate(fd, 0)
os.write(fd, sys.argv[2].encode() + b"\\n")
print("held", flush=True)
sys.stdin.read()
"""


def test_dry_run_says_what_it_would_move_and_changes_nothing(spark: SparkSession, stopped: Run, tmp_path,
                                                            capsys) -> None:  # noqa: ANN001
    from ttlstate.cli.main import main

    ck = _copy(stopped, tmp_path)
    before = _files(ck)
    assert main(["repartition", ck, "--partitions", "7", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "would move the state after batch 1 from 2 to 7 partitions (21 rows" in out
    assert "store default: 2 -> 7 partitions" in out and "dry run" in out
    assert _files(ck) == before
    assert main(["repartition", ck, "--partitions", "2"]) == 1
    assert "already has 2 state partitions" in capsys.readouterr().err


def test_a_file_system_without_locks_is_refused_unless_the_query_is_stated_stopped(
        spark: SparkSession, stopped: Run, tmp_path, capsys) -> None:  # noqa: ANN001
    """A checkpoint where the command cannot see a running query (here Hadoop's viewfs over a
    local folder: its scheme has no lock, as S3A's has none): refused, naming why and the flag;
    with --assume-stopped it goes on, with a WARNING."""
    from ttlstate.cli.main import main

    ck = _copy(stopped, tmp_path)
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    conf.set("fs.viewfs.mounttable.nolock.link./ck", "file://" + ck)
    try:
        before = _files(ck)
        assert main(["repartition", "viewfs://nolock/ck", "--partitions", "7", "--dry-run"]) == 1
        err = capsys.readouterr().err
        assert ("viewfs://nolock/ck cannot be locked (checkpoints on 'viewfs' file systems have no lock), so "
                "this command cannot tell whether its query runs: stop the query, then run the command again "
                "with --assume-stopped") in err, err
        assert main(["repartition", "viewfs://nolock/ck", "--partitions", "7", "--dry-run",
                     "--assume-stopped"]) == 0
        got = capsys.readouterr()
        assert "WARNING: viewfs://nolock/ck cannot be locked" in got.err, got.err
        assert "--assume-stopped says its query is stopped" in got.err
        assert "would move the state after batch 1 from 2 to 7 partitions" in got.out
        assert _files(ck) == before
    finally:
        conf.unset("fs.viewfs.mounttable.nolock.link./ck")


class Crash(Exception):
    """Raised at a crash point: the command stops there, as if killed (nothing after it runs)."""


@contextmanager
def crashing_at(point: str) -> Iterator[None]:
    def stop() -> None:
        raise Crash(point)

    faults.on_point(point, stop)
    try:
        with pytest.raises(Crash):
            yield
    finally:
        faults.on_point(point, None)


def _arm_worker_kill(spark: SparkSession, tmp_path) -> None:  # noqa: ANN001
    """The next state server runs with `commit-before-upload` armed (a worker SIGKILLs itself in its
    first commit), and the running one is killed so that the next store starts it."""
    wrapper = tmp_path / "python"
    spec = f"commit-before-upload:{tmp_path / 'fired'}"
    wrapper.write_text(f"#!/bin/sh\n{faults.ENV}='{spec}'\nexport {faults.ENV}\n"
                       f"exec '{sys.executable}' \"$@\"\n")
    wrapper.chmod(0o700)
    spark.conf.set(K.PYTHON.key, str(wrapper))
    procs = [p for p, _cmd in our_server_processes() if not is_worker(p)]
    for p in procs:
        p.kill()
    psutil.wait_procs(procs, timeout=30)


def _outside_staging(checkpoint: str) -> dict[str, bytes]:
    return {k: v for k, v in _files(checkpoint).items() if not k.startswith("_ttlstate_repartition")}


def test_killed_anywhere_then_run_again_finishes(spark: SparkSession, tmp_path) -> None:  # noqa: ANN001
    confs = {**TTL_CONFS, **ONE_BATCH_PER_STEP}
    first = Run(spark, TTLSTATE, agg_by_two_columns, SCHEMA, "update", partitioned(confs, 2))
    expected = Run(spark, TTLSTATE, agg_by_two_columns, SCHEMA, "update", partitioned(confs, 3))
    first.start()
    expected.start()
    side_by_side([first, expected], TTL_STEPS[:2])
    first.stop()
    side_by_side([expected], TTL_STEPS[2:])
    expected.stop()
    ck = first.checkpoint
    before = _files(ck)
    quiet = open(os.devnull, "w")  # noqa: SIM115

    # A state server worker killed (-9) while a new store commits: the job fails, nothing switched.
    _arm_worker_kill(spark, tmp_path)
    try:
        with pytest.raises(RepartitionError, match="unchanged"):
            repartition(spark, ck, 3, out=quiet)
    finally:
        spark.conf.unset(K.PYTHON.key)
    assert (tmp_path / "fired").exists() and _outside_staging(ck) == before
    with crashing_at("repartition-staged"):  # the job ran again; the checkpoint is still as it was
        repartition(spark, ck, 3, out=quiet)
    assert _outside_staging(ck) == before
    with crashing_at("repartition-old-state-aside"):  # resumed from the staged state, no job
        repartition(spark, ck, 3, out=quiet)

    # A query restarted now has no state folder: it fails (Spark 4.1+ says the state directory is
    # missing, older lines fail at the first load), after planning batch 2 with 2 partitions.
    restarted = Run(spark, TTLSTATE, agg_by_two_columns, SCHEMA, "update", confs, root=first.root)
    restarted.checkpoint, restarted.step_no = ck, 2
    restarted.start()
    restarted.feed(TTL_STEPS[2])
    with pytest.raises(Exception, match="MISSING_STATE_DIRECTORY|does not exist"):
        restarted.query.processAllAvailable()
    restarted.stop()

    with crashing_at("repartition-offsets-switched"):
        repartition(spark, ck, 3, out=quiet)
    with crashing_at("repartition-switched"):
        repartition(spark, ck, 3, out=quiet)
    assert repartition(spark, ck, 3, out=quiet)["resumed"]
    assert not os.path.exists(os.path.join(ck, "_ttlstate_repartition"))
    got = Run(spark, TTLSTATE, agg_by_two_columns, SCHEMA, "update", confs, root=first.root)
    got.checkpoint, got.step_no, got.outputs = ck, 3, dict(first.outputs)
    got.start()
    got.settle()  # batch 2, planned by the failed restart, re-runs with 3 partitions
    side_by_side([got], TTL_STEPS[3:])
    got.stop()
    assert got.outputs == expected.outputs


def test_a_checkpoint_that_needs_repair_is_read_as_a_query_would(spark: SparkSession,
                                                                  tmp_path) -> None:  # noqa: ANN001
    """The old stores are loaded as a query's restart loads them: a damaged newest snapshot is
    passed over for an older base and the changelogs since (the repair of damaged snapshots), so
    the new stores hold exactly what the undamaged checkpoint's do; a damaged changelog the state
    needs fails the command naming the file, the checkpoint unchanged."""
    confs = {**TTL_CONFS, K.SNAPSHOT_INTERVAL.key: "2"}
    run = Run(spark, TTLSTATE, agg_by_two_columns, SCHEMA, "update", partitioned(confs, 2))
    run.start()
    try:
        side_by_side([run], TTL_STEPS[:5])

        def snapshotted() -> bool:  # maintenance runs every second (harness.session)
            return all(any(n.endswith(".snapshot") for n in os.listdir(s)) for s in _stores(run.checkpoint))
        assert poll_until(snapshotted, 60)
    finally:
        run.stop()
    copies = {}
    for name in ("clean", "snapshot", "changelog"):
        copies[name] = str(tmp_path / name)
        shutil.copytree(run.checkpoint, copies[name])
    for store in _stores(copies["snapshot"]):
        damage(os.path.join(store, _newest(store, ".snapshot")), "flip")
    store = _stores(copies["changelog"])[0]
    victim = os.path.join(store, _newest(store, ".changelog"))  # version 5, above the snapshot of 4
    damage(victim, "truncate")
    quiet = open(os.devnull, "w")  # noqa: SIM115
    for name in ("clean", "snapshot"):
        repartition(spark, copies[name], 3, out=quiet)
    assert raw_state(copies["snapshot"]) == raw_state(copies["clean"])
    before = _files(copies["changelog"])
    with pytest.raises(RepartitionError, match=re.escape(os.path.basename(victim))):
        repartition(spark, copies["changelog"], 3, out=quiet)
    assert _outside_staging(copies["changelog"]) == before


def _stores(checkpoint: str) -> list[str]:
    state = os.path.join(checkpoint, "state")
    return sorted(os.path.join(state, op, p) for op in os.listdir(state) if op.isdigit()
                  for p in os.listdir(os.path.join(state, op)) if p.isdigit())


def _newest(store: str, suffix: str) -> str:
    return max((n for n in os.listdir(store) if n.endswith(suffix)), key=lambda n: int(n.split(".")[0]))


@pytest.mark.skipif(tuple(int(x) for x in pyspark.__version__.split(".")[:2]) < (4, 2),
                    reason="OfflineStateRepartitionRunner came with Spark 4.2")
def test_sparks_own_offline_repartition_runner_refuses_a_ttlstate_checkpoint(spark: SparkSession,
                                                                             tmp_path) -> None:  # noqa: ANN001
    """Spark 4.2+ has an offline repartition of its own (OfflineStateRepartitionRunner, internal:
    no API, no command). It reads the state through the state data source, which it lets read
    only Spark's own providers: on a ttlstate checkpoint it fails, but only after it added an
    offset log entry for a new batch with the new count (which a restarted query would run with
    the old state: it must be deleted)."""
    first = Run(spark, TTLSTATE, agg_by_two_columns, SCHEMA, "update", partitioned(TTL_CONFS, 2))
    first.start()
    side_by_side([first], TTL_STEPS[:2])
    first.stop()
    before = _files(first.checkpoint)
    state = spark.sparkContext._jvm.org.apache.spark.sql.execution.streaming.state
    with pytest.raises(Exception, match="UNSUPPORTED_PROVIDER.*TtlStateStoreProvider is not supported"):
        state.OfflineStateRepartitionRunner(spark._jsparkSession, first.checkpoint, 3, True).run()
    after = _files(first.checkpoint)
    assert all(after[k] == v for k, v in before.items())
    added = sorted(set(after) - set(before))
    planned = [n for n in added if not os.path.basename(n).startswith(".")]
    assert planned == [os.path.join("offsets", "2")], added
    assert '"spark.sql.shuffle.partitions":"3"' in after[planned[0]].decode()
