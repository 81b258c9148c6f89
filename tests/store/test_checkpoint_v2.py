"""Checkpoint format 2: versions loaded by (version, checkpoint id), attempts kept apart."""

from __future__ import annotations

import os
import shutil

import pytest

from ttlstate.checkpoint.errors import CheckpointError, VersionNotFound
from ttlstate.store.provider import StoreProvider


def _commit(p: StoreProvider, version: int, ckpt_id: str | None, rows: dict[bytes, bytes | None]
            ) -> str:
    """Commit version + 1 on (version, ckpt_id); returns the new version's checkpoint id."""
    s = p.get_store(version, now_ms=1_000 + version, ckpt_id=ckpt_id)
    for k, v in rows.items():
        if v is None:
            s.remove(k)
        else:
            s.put(k, v)
    assert s.commit() == version + 1
    new_id, base_id = p.last_commit_ids
    assert new_id and base_id == ckpt_id
    return new_id


def _state(p: StoreProvider, version: int, ckpt_id: str | None) -> dict[bytes, bytes]:
    return dict(p.get_store(version, now_ms=1_000 + version, ckpt_id=ckpt_id).iterator())


def _chain(p: StoreProvider, n: int) -> list[str | None]:
    """Versions 1..n, version v putting k<v>; returns ids by version (0: None)."""
    ids: list[str | None] = [None]
    for v in range(n):
        ids.append(_commit(p, v, ids[v], {b"k%d" % v: b"v%d" % v}))
        p.do_snapshot_maintenance()
    return ids


def _expected(n: int) -> dict[bytes, bytes]:
    return {b"k%d" % v: b"v%d" % v for v in range(n)}


def test_every_version_loads_by_its_id_on_a_fresh_executor(make_provider) -> None:  # noqa: ANN001
    p = make_provider(snapshot_interval=3, checkpoint_ids=True)
    ids = _chain(p, 8)
    files = os.listdir(p.checkpoint.directory)
    assert f"1_{ids[1]}.changelog" in files and f"6_{ids[6]}.snapshot" in files
    assert not any(n in files for n in ("1.changelog", "3.snapshot"))
    for v in range(9):
        assert _state(make_provider(checkpoint_ids=True), v, ids[v]) == _expected(v)


def test_two_attempts_of_one_batch_never_corrupt_state(make_provider) -> None:  # noqa: ANN001
    """A retried or speculative task commits version 4 again under another id. Both files stay;
    the one Spark's commit log names is the one loaded, exactly, and what is built on it."""
    p = make_provider(snapshot_interval=2, checkpoint_ids=True)
    ids = _chain(p, 3)
    first = _commit(p, 3, ids[3], {b"x": b"first"})
    other = make_provider(snapshot_interval=2, checkpoint_ids=True)
    second = _commit(other, 3, ids[3], {b"x": b"second", b"k0": None})
    p.do_snapshot_maintenance()
    other.do_snapshot_maintenance()
    assert first != second
    assert {f"4_{first}.changelog", f"4_{second}.changelog"} <= set(os.listdir(p.checkpoint.directory))
    second_state = {b"k1": b"v1", b"k2": b"v2", b"x": b"second"}
    for loader in (p, other, make_provider(checkpoint_ids=True)):
        assert _state(loader, 4, first) == {**_expected(3), b"x": b"first"}
        assert _state(loader, 4, second) == second_state
    fifth = _commit(p, 4, second, {b"y": b"on-second"})  # the commit log chose the second attempt
    p.do_cleanup_maintenance(2)
    got = _state(make_provider(checkpoint_ids=True), 5, fifth)
    assert got == {b"k1": b"v1", b"k2": b"v2", b"x": b"second", b"y": b"on-second"}


def test_a_file_of_another_attempt_is_refused_naming_both(make_provider) -> None:  # noqa: ANN001
    p = make_provider(snapshot_interval=1000, checkpoint_ids=True)
    ids = _chain(p, 3)
    other = _commit(make_provider(checkpoint_ids=True), 1, ids[1], {b"z": b"z"})  # another 2
    ck = p.checkpoint.directory
    # A copy tool put the other attempt's version 2 under this attempt's name.
    shutil.copyfile(os.path.join(ck, f"2_{other}.changelog"), os.path.join(ck, f"2_{ids[2]}.changelog"))
    with pytest.raises(CheckpointError) as e:
        _state(make_provider(checkpoint_ids=True), 3, ids[3])
    assert other in str(e.value) and ids[2] in str(e.value)


def test_an_unknown_id_is_not_found(make_provider) -> None:  # noqa: ANN001
    p = make_provider(checkpoint_ids=True)
    _chain(p, 2)
    with pytest.raises(VersionNotFound, match="2_no-such-id.changelog"):
        _state(make_provider(checkpoint_ids=True), 2, "no-such-id")


def test_replay_from_a_named_snapshot(make_provider) -> None:  # noqa: ANN001
    """The state data source's snapshotStartBatchId on format 2: exactly that snapshot, then the
    changelogs of the lineage of the end version."""
    p = make_provider(snapshot_interval=2, checkpoint_ids=True)
    ids = _chain(p, 7)
    fresh = make_provider(checkpoint_ids=True)
    s = fresh.get_store(7, ckpt_id=ids[7], from_snapshot=4, snapshot_ckpt_id=ids[4], read_only=True)
    assert dict(s.iterator()) == _expected(7)
    with pytest.raises(VersionNotFound, match="3_"):
        make_provider(checkpoint_ids=True).get_store(7, ckpt_id=ids[7], from_snapshot=3,
                                                      snapshot_ckpt_id=ids[3], read_only=True)


def test_a_format_1_checkpoint_goes_on_in_format_2(make_provider) -> None:  # noqa: ANN001
    """A query restarted with checkpointFormatVersion=2 on a format 1 checkpoint: Spark passes no
    id for the last format 1 version; the first format 2 commit records it in its lineage as a
    format 1 version, found by version alone, and every later version loads through it."""
    v1 = make_provider(snapshot_interval=3)
    for v in range(5):
        s = v1.get_store(v, now_ms=1_000 + v)
        s.put(b"k%d" % v, b"v%d" % v)
        s.commit()
        v1.do_snapshot_maintenance()
    v2 = make_provider(snapshot_interval=3, checkpoint_ids=True)
    ids: dict[int, str | None] = {5: None}
    for v in range(5, 8):
        ids[v + 1] = _commit(v2, v, ids[v], {b"k%d" % v: b"v%d" % v})
    for v in (6, 7, 8):
        assert _state(make_provider(checkpoint_ids=True), v, ids[v]) == _expected(v)
