"""Damaged checkpoints fail the load naming file and version; nothing loads partially."""

from __future__ import annotations

import os

import pytest

from ttlstate.checkpoint.errors import CheckpointError, VersionNotFound


def commit_versions(p, n: int, start: int = 0) -> None:  # noqa: ANN001
    for v in range(start, n):
        s = p.get_store(v, now_ms=1000 + v)
        s.put(b"k%d" % v, b"v%d" % v)
        s.commit()


def _ck(p) -> str:  # noqa: ANN001
    return p.checkpoint.directory


def test_corrupted_snapshot(make_provider) -> None:  # noqa: ANN001
    p = make_provider()
    commit_versions(p, 4)
    p.do_snapshot_maintenance()  # snapshot of version 4
    path = os.path.join(_ck(p), "4.snapshot")
    data = bytearray(open(path, "rb").read())
    data[len(data) // 2] ^= 0xFF
    open(path, "wb").write(bytes(data))
    fresh = make_provider()
    with pytest.raises(CheckpointError, match=r"version 4.*4\.snapshot.*corrupt") as e:
        fresh.get_store(4)
    assert (e.value.file_name, e.value.version) == ("4.snapshot", 4)
    with pytest.raises(Exception, match="no version is loaded"):
        fresh.engine  # noqa: B018  (nothing half-loaded is left serving)
    assert sorted(dict(fresh.get_store(3).iterator())) == [b"k0", b"k1", b"k2"]  # 3 needs no snapshot


def test_truncated_changelog(make_provider) -> None:  # noqa: ANN001
    p = make_provider()
    commit_versions(p, 3)
    path = os.path.join(_ck(p), "2.changelog")
    data = open(path, "rb").read()
    open(path, "wb").write(data[:-10])
    fresh = make_provider()
    with pytest.raises(CheckpointError, match=r"version 3.*2\.changelog.*truncated"):
        fresh.get_store(3)
    with pytest.raises(CheckpointError, match=r"2\.changelog"):
        fresh.get_store(2)
    assert dict(fresh.get_store(1).iterator()) == {b"k0": b"v0"}


def test_missing_changelog(make_provider) -> None:  # noqa: ANN001
    p = make_provider()
    commit_versions(p, 3)
    os.unlink(os.path.join(_ck(p), "2.changelog"))
    fresh = make_provider()
    with pytest.raises(VersionNotFound, match=r"version 3.*2\.changelog.*missing"):
        fresh.get_store(3)
    with pytest.raises(VersionNotFound, match="does not exist"):
        fresh.get_store(2)


def test_failed_replay_on_top_of_local_state_leaves_nothing_half_applied(make_provider) -> None:  # noqa: ANN001
    writer = make_provider()
    commit_versions(writer, 2)
    reader = make_provider()
    reader.get_store(1).release()  # local state at version 1
    commit_versions(writer, 4, start=2)
    path = os.path.join(_ck(writer), "4.changelog")
    open(path, "wb").write(open(path, "rb").read()[:-3])
    with pytest.raises(CheckpointError, match=r"4\.changelog"):
        reader.get_store(4)  # every file is verified before 2, 3 would replay onto local 1
    assert reader.local_version == 1  # untouched: nothing was applied
    assert sorted(dict(reader.get_store(1).iterator())) == [b"k0"]
    assert sorted(dict(reader.get_store(3).iterator())) == [b"k0", b"k1", b"k2"]

