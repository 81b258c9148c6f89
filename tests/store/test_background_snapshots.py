"""`snapshot.afterCommit`: a due snapshot starts when the commit returns, on the worker's
background thread (store/background_snapshots.py), not at the next maintenance; a restore then
replays nothing; a store's snapshots coalesce while one is written; a failed one loses nothing
and the next due commit writes one; maintenance reports the newest to Spark's coordinator."""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from tests.range_service import FolderChannel, RangeService, short_socket_path

from ttlstate import faults
from ttlstate.checkpoint.location import LocalCheckpointLocation
from ttlstate.config.keys import EngineKind, SnapshotLayout
from ttlstate.config.store_config import StoreConfig, TtlConfig
from ttlstate.server.remote_checkpoint import RemoteCheckpointLocation, set_current_channel
from ttlstate.store import metric_names as M
from ttlstate.store.background_snapshots import BACKGROUND
from ttlstate.store.provider import StoreProvider
from ttlstate.ttl.clock import ManualClock

LAYOUTS = [(EngineKind.NATIVE, SnapshotLayout.SST), (EngineKind.NATIVE, SnapshotLayout.RECORDS),
           (EngineKind.ROCKSDICT, SnapshotLayout.RECORDS)]


def provider(tmp_path, local: str, after_commit: bool = True, interval: int = 1,  # noqa: ANN001
             layout: tuple[EngineKind, SnapshotLayout] = LAYOUTS[0], ck: str = "ck") -> StoreProvider:
    config = StoreConfig(TtlConfig(), layout[0], interval, layout[1], snapshot_after_commit=after_commit)
    return StoreProvider("op0/p0", str(tmp_path / local), LocalCheckpointLocation(str(tmp_path / ck)),
                         config, ManualClock(1000))


def commit(p: StoreProvider, v: int) -> None:
    s = p.get_store(v, now_ms=1000 + v)
    for i in range(50):
        s.put(b"k%d-%d" % (v, i), b"v%d" % v)
    if v:
        s.remove(b"k%d-0" % (v - 1))
    assert s.commit() == v + 1


def expected(upto: int) -> dict[bytes, bytes]:
    return {b"k%d-%d" % (v, i): b"v%d" % v for v in range(upto) for i in range(50)
            if not (i == 0 and v < upto - 1)}


class Held:
    """The background thread, stopped in the first snapshot it writes until `release`."""

    def __init__(self) -> None:
        self._entered, self._release = threading.Event(), threading.Event()

    def hold(self) -> None:
        if not self._entered.is_set():
            self._entered.set()
            assert self._release.wait(30)

    def started(self) -> None:
        assert self._entered.wait(30)

    def release(self) -> None:
        self._release.set()


@contextmanager
def first_snapshot_held() -> Iterator[Held]:
    held = Held()
    faults.on_point("snapshot-before-write", held.hold)
    try:
        yield held
    finally:
        faults.on_point("snapshot-before-write", None)
        held.release()


def snapshot_versions(tmp_path, ck: str = "ck") -> set[int]:  # noqa: ANN001
    return {int(n.split(".")[0]) for n in os.listdir(tmp_path / ck) if n.endswith(".snapshot")}


@pytest.mark.parametrize("layout", LAYOUTS, ids=["sst", "records", "rocksdict"])
def test_each_due_version_is_snapshotted_without_maintenance_and_a_restore_replays_nothing(
        tmp_path, layout: tuple[EngineKind, SnapshotLayout]) -> None:  # noqa: ANN001
    p = provider(tmp_path, "a", interval=2, layout=layout)
    for v in range(7):
        commit(p, v)
        assert BACKGROUND.wait_idle(30)
    assert snapshot_versions(tmp_path) == {2, 4, 6}  # every second version, no maintenance called
    p.close()
    fresh = provider(tmp_path, "b", layout=layout)
    assert dict(fresh.get_store(7, now_ms=2000).iterator()) == expected(7)
    assert fresh.drain_metrics()[M.REPLAYED_CHANGELOGS.name] == 1  # 6.snapshot + 7.changelog
    assert dict(fresh.get_store(6, now_ms=2000).iterator()) == expected(6)
    assert fresh.drain_metrics()[M.REPLAYED_CHANGELOGS.name] == 0  # 6.snapshot alone
    fresh.close()


def test_on_a_checkpoint_only_the_shim_reaches_the_snapshots_go_through_its_range_service(tmp_path) -> None:  # noqa: ANN001
    # HDFS, S3A: the task's requests reach the checkpoint through their connection, the
    # background thread has none. Before, each of its snapshots failed ("checkpoint access
    # outside of a shim request") and only maintenance wrote any.
    ck = tmp_path / "ck"
    ck.mkdir()
    service = RangeService(str(ck), short_socket_path(str(tmp_path), "r.sock"))
    config = StoreConfig(TtlConfig(), EngineKind.NATIVE, 1, SnapshotLayout.SST, snapshot_after_commit=True)
    p = StoreProvider("op0/p0", str(tmp_path / "a"), RemoteCheckpointLocation(str(ck), service.socket_path),
                      config, ManualClock(1000))
    set_current_channel(FolderChannel(str(ck)))  # this thread is a task's request
    try:
        for v in range(4):
            commit(p, v)
            assert BACKGROUND.wait_idle(30)
        assert snapshot_versions(tmp_path) == {1, 2, 3, 4}
        assert service.checkpoint_calls > 0
        p.close()
    finally:
        set_current_channel(None)
        service.stop()
    fresh = provider(tmp_path, "b")
    assert dict(fresh.get_store(4, now_ms=2000).iterator()) == expected(4)
    assert fresh.drain_metrics()[M.REPLAYED_CHANGELOGS.name] == 0
    fresh.close()


def test_without_a_request_or_a_range_service_a_remote_checkpoint_says_which_it_lacks() -> None:
    with pytest.raises(RuntimeError, match="hdfs://nn/ck/.*outside of a shim request, and the shim offered"):
        RemoteCheckpointLocation("hdfs://nn/ck").list_files()


def test_off_by_default_snapshots_wait_for_maintenance(tmp_path) -> None:  # noqa: ANN001
    p = provider(tmp_path, "a", after_commit=False)
    for v in range(3):
        commit(p, v)
    assert BACKGROUND.wait_idle(30)
    assert snapshot_versions(tmp_path) == set()
    assert p.do_snapshot_maintenance() == "3.snapshot"
    p.close()


def test_commits_while_a_snapshot_is_written_are_followed_by_one_of_the_newest(tmp_path) -> None:  # noqa: ANN001
    """The thread is held in the first snapshot while three more versions commit: they queue the
    store once, and the run after writes only the newest version."""
    p = provider(tmp_path, "a")
    with first_snapshot_held() as held:
        commit(p, 0)
        held.started()
        for v in range(1, 4):
            commit(p, v)  # not held up by the snapshot being written
        held.release()
        assert BACKGROUND.wait_idle(30)
    assert snapshot_versions(tmp_path) == {1, 4}
    # maintenance reports the newest published one to the coordinator, once
    assert p.do_snapshot_maintenance() == "4.snapshot"
    assert p.do_snapshot_maintenance() is None
    p.close()


def test_a_failed_snapshot_loses_nothing_and_the_next_due_commit_writes_one(
        tmp_path, caplog: pytest.LogCaptureFixture) -> None:  # noqa: ANN001
    p = provider(tmp_path, "a")
    failures = [1]

    def fail_once() -> None:
        if failures:
            failures.pop()
            raise OSError("the checkpoint's file system is unreachable (test)")

    faults.on_point("snapshot-before-write", fail_once)
    try:
        with caplog.at_level(logging.WARNING, "ttlstate"):
            commit(p, 0)
            assert BACKGROUND.wait_idle(30)
        assert snapshot_versions(tmp_path) == set()
        assert "op0/p0: a snapshot started after a commit failed" in caplog.text
        assert "unreachable (test)" in caplog.text
        commit(p, 1)
        assert BACKGROUND.wait_idle(30)
    finally:
        faults.on_point("snapshot-before-write", None)
    assert snapshot_versions(tmp_path) == {2}
    p.close()
    fresh = provider(tmp_path, "b")
    assert dict(fresh.get_store(2, now_ms=2000).iterator()) == expected(2)
    fresh.close()


def test_a_store_closed_before_its_snapshot_runs_is_not_snapshotted(tmp_path) -> None:  # noqa: ANN001
    p = provider(tmp_path, "a")
    other = provider(tmp_path, "other", ck="other-ck")
    with first_snapshot_held() as held:  # the thread is busy with another store's snapshot
        commit(other, 0)
        held.started()
        commit(p, 0)  # queued behind it
        p.close()
        held.release()
        assert BACKGROUND.wait_idle(30)
    assert snapshot_versions(tmp_path) == set()
    assert snapshot_versions(tmp_path, "other-ck") == {1}
    other.close()


def test_a_snapshot_asked_for_while_one_is_written_is_skipped(tmp_path) -> None:  # noqa: ANN001
    """One snapshot at a time per store: maintenance's while the background thread writes one
    returns at once, without uploading the same files beside it (the first to publish may evict
    a file the other still reads: snapshot.localMaxBytes)."""
    p = provider(tmp_path, "a")
    with first_snapshot_held() as held:
        commit(p, 0)
        held.started()
        commit(p, 1)
        assert p.write_snapshot() is None  # skipped, not waiting for the held one
        held.release()
        assert BACKGROUND.wait_idle(30)
    assert snapshot_versions(tmp_path) == {1, 2}  # the held one, then the background's next
    p.close()
