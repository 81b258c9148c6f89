"""Faults a real query meets: lost local state, damaged checkpoints, bad confs, two queries at once."""

from __future__ import annotations

import glob
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator

import pytest
from pyspark.errors import IllegalArgumentException, StreamingQueryException
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from tests.spark.harness import (
    ROCKSDB,
    TTLSTATE,
    Run,
    is_worker,
    our_server_processes,
    poll_until,
    run_steps,
    session,
)
from tests.unit.test_conf import BAD
from ttlstate.checkpoint.record_file import KIND_CHANGELOG, verify_record_file
from ttlstate.cli.inspect_checkpoint import main as inspect_main
from ttlstate.cli.inspect_checkpoint import query_id_of
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
    return [cmd[cmd.index("--root") + 1] for p, cmd in our_server_processes()
            if not is_worker(p) and "--root" in cmd]


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


@pytest.fixture(scope="module")
def checkpoint_to_damage(spark: SparkSession) -> Run:
    """Three batches with snapshotInterval 2, run until maintenance wrote a snapshot of store 0/0
    (of version 2 or 3; either way no later one can follow)."""
    run = Run(spark, TTLSTATE, agg, SCHEMA, "update", {K.SNAPSHOT_INTERVAL.key: "2"})
    run.start()
    try:
        for rows in STEPS[:3]:
            run.step(rows)
        poll_until(lambda: bool(_snapshots(run)), 60)  # maintenance runs every second (harness.session)
    finally:
        run.stop()
    assert _snapshots(run), "maintenance wrote no snapshot"
    return run


def _store_dir(run: Run) -> str:
    return os.path.join(run.checkpoint, "state", "0", "0")


def _snapshots(run: Run) -> list[str]:
    return sorted((f for f in os.listdir(_store_dir(run)) if f.endswith(".snapshot")),
                  key=lambda f: int(f.split(".")[0]))


def _truncate(path: str) -> None:
    with open(path, "rb") as f:
        data = f.read()
    with open(path, "wb") as f:
        f.write(data[: len(data) // 2])


@pytest.mark.parametrize("damage", ["truncated-changelog", "missing-changelog",
                                    "other-partitions-changelog", "older-versions-changelog"])
def test_damaged_checkpoint_fails_the_query_naming_file_version_and_store(
        spark: SparkSession, checkpoint_to_damage: Run, damage: str) -> None:
    """A copy of the checkpoint is damaged, and the query restarted on it: new providers load
    version 3 from the checkpoint and must refuse, naming the file, never run on partial state.
    (A damaged snapshot is repaired instead: test_damaged_files.py.)"""
    run = Run(spark, TTLSTATE, agg, SCHEMA, "update", root=checkpoint_to_damage.root)
    run.checkpoint = os.path.join(tempfile.mkdtemp(prefix="ttlstate-it-"), "ck")  # the source log
    # Names files by absolute path. The stopped query's executor may still be uploading another
    # store's snapshot (Spark's maintenance goes on for loaded stores): its files in flight are
    # hidden temporary files, renamed or gone at any moment, and no part of the checkpoint yet.
    shutil.copytree(checkpoint_to_damage.checkpoint, run.checkpoint,
                    ignore=shutil.ignore_patterns(".*.tmp"))
    run.step_no = 3
    store = _store_dir(run)
    for name in _snapshots(run):  # without snapshots, version 3 is rebuilt from changelogs 1-3
        os.unlink(os.path.join(store, name))
    if damage.endswith("s-changelog"):  # a valid file, but another store's or version's
        victim = "3.changelog"
        source = (os.path.join(run.checkpoint, "state", "0", "1", victim)
                  if damage.startswith("other-partition") else os.path.join(store, "2.changelog"))
        shutil.copy(source, os.path.join(store, victim))
    else:
        victim = "2.changelog"
        (_truncate if damage == "truncated-changelog" else os.unlink)(os.path.join(store, victim))
    run.start()
    try:
        with pytest.raises(StreamingQueryException) as e:
            run.step(STEPS[3])
    finally:
        run.stop()
    msg = str(e.value)
    assert victim in msg and "version 3" in msg and "operator 0, partition 0" in msg, msg
    assert 3 not in run.outputs
    if damage.endswith("s-changelog"):  # names what the file is and what was expected
        claimed = "store op=0,part=1,store=default" if damage.startswith("other") else "version 2 of store"
        assert claimed in msg and "changelog of version 3 of store op=0,part=0" in msg, msg
        assert inspect_main([run.checkpoint]) == 1  # inspect lists it as misplaced
        # Files carry the query's id (from <checkpoint>/metadata), so another query's file is refused too.
        header = verify_record_file(os.path.join(store, "1.changelog"), KIND_CHANGELOG)
        assert header.query_id is not None and header.query_id == query_id_of(run.checkpoint)


def test_every_bad_conf_value_fails_the_query_at_start(spark: SparkSession) -> None:
    """Each validated key of ttlstate.config.keys, one tiny query each: `start()` fails (the
    start checks that `configure` installs), before any batch, with a message naming the key,
    the value and what is allowed. `workers` comes first, with no server running."""
    cases = {K.WORKERS.key: BAD[K.WORKERS]} | {k.key: v for k, v in BAD.items()}
    cases[K.operator_ttl_key(0)] = "later"
    spark._jvm.ttlstate.server.StateServer.shutdown()  # type: ignore[union-attr]
    wrong: dict[str, str] = {}
    for key, value in cases.items():
        run = Run(spark, TTLSTATE, agg, SCHEMA, "update", {key: value})
        try:
            run.start()
            wrong[key] = "start() did not fail"
        except IllegalArgumentException as e:
            msg = str(e)
            if not (key in msg and repr(value) in msg and "allowed" in msg):
                wrong[key] = msg[:400]
        finally:
            run.stop()
        assert spark.conf.get(key, None) is None  # the bad value did not stay in the session
    assert not wrong, wrong


@pytest.mark.parametrize("how", ["worker-fails", "interpreter-fails"])
def test_a_failed_server_start_leaves_no_directory(spark: SparkSession, tmp_path, how: str) -> None:  # noqa: ANN001
    """A state server that does not start: its workers cannot start (the supervisor cleans up
    and says why), or the interpreter fails at once, as one without ttlstate does (the shim
    cleans up). The query fails saying the server did not start, and why, and no directory the
    shim made for it is left. The interpreter is a wrapper that records its arguments, so the
    test knows them."""
    args = tmp_path / "args"
    wrapper = tmp_path / "python"
    run_it = (f'TTLSTATE_FAULTS=no-such-point exec {sys.executable} "$@"' if how == "worker-fails"
              else 'echo "No module named ttlstate" >&2; exit 1')
    wrapper.write_text(f'#!/bin/sh\necho "$@" >> {args}\n{run_it}\n')
    wrapper.chmod(0o755)
    spark._jvm.ttlstate.server.StateServer.shutdown()  # type: ignore[union-attr]
    run = Run(spark, TTLSTATE, agg, SCHEMA, "update", {K.PYTHON.key: str(wrapper)})
    run.start()
    try:
        with pytest.raises(StreamingQueryException, match="state server did not start") as failed:
            run.step(STEPS[0])
        # The server's own reason when it ran; a guess at the cause when the interpreter failed first.
        said = str(failed.value)
        if how == "worker-fails":
            assert "bad entry 'no-such-point'" in said and "Is ttlstate installed" not in said, said
        else:
            assert "Is ttlstate installed for that interpreter?" in said, said
    finally:
        run.stop()
    starts = [line.split() for line in args.read_text().splitlines()]
    dirs = [a[i + 1] for a in starts for i, flag in enumerate(a) if flag in ("--root", "--socket-dir")]
    assert dirs, "the wrapper was not used"
    assert [d for d in dirs if os.path.exists(d)] == []
    # The next query starts a working server.
    ok = run_steps(spark, TTLSTATE, agg, SCHEMA, STEPS[:1], output_mode="update")
    assert ok.outputs[0] == [("a", 1), ("b", 2)]


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
