"""A snapshot is written from a pinned view without holding the store: the store's next batch
loads, writes and commits while it is being written, and the snapshot still holds exactly the
version it was taken of."""

from __future__ import annotations

import threading

from ttlstate import faults
from ttlstate.checkpoint.location import LocalCheckpointLocation
from ttlstate.config.keys import EngineKind
from ttlstate.config.store_config import StoreConfig, TtlConfig
from ttlstate.store.provider import StoreProvider
from ttlstate.ttl.clock import ManualClock


def test_a_batch_commits_while_its_snapshot_is_being_written(tmp_path) -> None:  # noqa: ANN001
    ck = LocalCheckpointLocation(str(tmp_path / "ck"))
    p = StoreProvider("op=0,part=0,store=default", str(tmp_path / "local"), ck,
                      StoreConfig(TtlConfig(), EngineKind.NATIVE, snapshot_interval=1), ManualClock(0))
    s = p.get_store(0, now_ms=1)
    for i in range(20_000):
        s.put(b"k%06d" % i, b"v0")
    s.commit()
    committed: list[int] = []

    def next_batch() -> None:  # the next micro-batch of the same store, on another thread
        b = p.get_store(1, now_ms=2)
        b.put(b"k000000", b"v1")
        b.remove(b"k000001")
        b.put(b"new", b"v1")
        committed.append(b.commit())

    def during_snapshot() -> None:
        t = threading.Thread(target=next_batch)
        t.start()
        t.join(30)
        assert not t.is_alive(), "the batch waited for the snapshot: the store was held"

    faults.on_point("snapshot-before-write", during_snapshot)
    try:
        assert p.write_snapshot() == "1.snapshot"
    finally:
        faults.on_point("snapshot-before-write", None)
    assert committed == [2]
    fresh = StoreProvider("op=0,part=0,store=default", str(tmp_path / "fresh"), ck,
                          StoreConfig(TtlConfig(), EngineKind.NATIVE), ManualClock(0))
    v1 = dict(fresh.get_store(1, now_ms=2).iterator())  # from 1.snapshot alone
    assert len(v1) == 20_000 and v1[b"k000000"] == b"v0" and b"new" not in v1
    v2 = dict(fresh.get_store(2, now_ms=2).iterator())  # 1.snapshot + 2.changelog
    assert v2[b"k000000"] == b"v1" and b"k000001" not in v2 and v2[b"new"] == b"v1"
    fresh.close()
    p.close()


def test_a_snapshot_of_a_version_that_was_reloaded_meanwhile_is_not_published(tmp_path) -> None:  # noqa: ANN001
    """A re-run batch reloads the previous version while the snapshot of the later one is being
    written: that snapshot may belong to a superseded timeline, so it is dropped."""
    ck = LocalCheckpointLocation(str(tmp_path / "ck"))
    p = StoreProvider("op=0,part=0,store=default", str(tmp_path / "local"), ck,
                      StoreConfig(TtlConfig(), EngineKind.NATIVE), ManualClock(0))
    for v in range(2):
        s = p.get_store(v, now_ms=1)
        s.put(b"k%d" % v, b"x")
        s.commit()

    def reload_previous() -> None:
        t = threading.Thread(target=lambda: p.get_store(1, now_ms=1).abort())
        t.start()
        t.join(30)

    faults.on_point("snapshot-before-write", reload_previous)
    try:
        assert p.write_snapshot() is None
    finally:
        faults.on_point("snapshot-before-write", None)
    assert sorted(ck.list_files()) == ["1.changelog", "2.changelog"]
    assert sorted(dict(p.get_store(1, now_ms=1).iterator())) == [b"k0"]
    p.close()
