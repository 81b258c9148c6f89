"""Spark's store contract, item by item, on the embedded store (both engines)."""

from __future__ import annotations

import os

import pytest

from ttlstate.checkpoint.errors import VersionNotFound
from ttlstate.checkpoint.sst_manifest import is_sst_file
from ttlstate.config.store_config import IncrementalCleanup, TtlConfig
from ttlstate.errors import StoreStateError
from ttlstate.store.planes import native as native_plane


def test_lifecycle_rules(make_provider) -> None:  # noqa: ANN001
    p = make_provider()
    s = p.get_store(0)
    assert s.get(b"missing") is None
    s.put(b"a", b"1")
    assert s.get(b"a") == b"1"  # visible before commit
    assert s.commit() == 1 and s.has_committed
    with pytest.raises(StoreStateError):
        s.put(b"b", b"2")
    with pytest.raises(StoreStateError):
        s.commit()
    s.abort()  # a no-op after commit
    with pytest.raises(ValueError, match="Cannot put a null value"):
        p.get_store(1).put(b"x", None)  # type: ignore[arg-type]


def test_abort_leaves_no_trace_and_is_idempotent(make_provider) -> None:  # noqa: ANN001
    p = make_provider()
    s = p.get_store(0)
    s.put(b"a", b"1")
    s.commit()
    s = p.get_store(1)
    s.put(b"b", b"2")
    s.remove(b"a")
    s.abort()
    s.abort()
    assert dict(p.get_store(1).iterator()) == {b"a": b"1"}
    assert sorted(os.listdir(p.checkpoint.directory)) == ["1.changelog"]


def test_release_is_idempotent_and_read_store_is_read_only(make_provider) -> None:  # noqa: ANN001
    p = make_provider()
    p.get_store(0).commit()
    r = p.get_store(1, read_only=True)
    with pytest.raises(StoreStateError, match="read-only"):
        r.put(b"a", b"1")
    r.release()
    r.release()


def test_upgrade_in_place_keeps_the_read_handle_working(make_provider) -> None:  # noqa: ANN001
    p = make_provider()
    s = p.get_store(0)
    s.put(b"a", b"1")
    s.commit()
    r = p.get_store(1, read_only=True)
    w = p.upgrade(r)
    assert w is r
    w.put(b"b", b"2")
    assert r.get(b"a") == b"1" and r.get(b"b") == b"2"
    assert w.commit() == 2


def test_future_version_does_not_exist_and_negative_is_refused(make_provider) -> None:  # noqa: ANN001
    p = make_provider()
    with pytest.raises(VersionNotFound, match="does not exist"):
        p.get_store(3)
    with pytest.raises(VersionNotFound):
        p.get_store(-1)


def test_iterator_sees_writes_made_before_it_and_survives_writes_during(make_provider) -> None:  # noqa: ANN001
    p = make_provider()
    s = p.get_store(0)
    for i in range(20):
        s.put(b"k%02d" % i, b"v")
    s.commit()
    s = p.get_store(1)
    s.put(b"k99", b"new")
    s.remove(b"k00")
    seen = []
    for k, _v in s.iterator():
        seen.append(k)
        s.remove(k)
        s.put(b"zz" + k, b"during")
    assert seen == [b"k%02d" % i for i in range(1, 20)] + [b"k99"]
    assert sorted(dict(s.iterator())) == sorted(b"zz" + k for k in seen)


def test_prefix_scan_sees_uncommitted_puts_and_forgets_aborted_ones(make_provider) -> None:  # noqa: ANN001
    p = make_provider()
    s = p.get_store(0)
    s.put(b"\x00\x00\x00\x01a" + b"1", b"x")
    s.put(b"\x00\x00\x00\x01b" + b"1", b"y")
    assert [k for k, _ in s.prefix_scan(b"\x00\x00\x00\x01a")] == [b"\x00\x00\x00\x01a1"]
    s.abort()
    assert list(p.get_store(0).prefix_scan(b"\x00\x00\x00\x01a")) == []


def test_num_keys_after_commit(make_provider) -> None:  # noqa: ANN001
    p = make_provider()
    s = p.get_store(0)
    for i in range(5):
        s.put(b"%d" % i, b"v")
    s.put(b"0", b"again")
    s.commit()
    assert s.metrics().num_keys == 5
    s = make_provider().get_store(1)  # a reloaded provider
    assert s.metrics().num_keys == 5
    s.remove(b"1")
    s.remove(b"nope")
    s.commit()
    assert s.metrics().num_keys == 4


def test_recommit_overwrites_and_keeps_later_versions(make_provider) -> None:  # noqa: ANN001
    """A re-commit overwrites its own version and deletes nothing else: files of later versions
    may be another writer's committed state (see tests/store/test_concurrent_writers.py)."""
    p = make_provider()
    for v, value in enumerate([b"a", b"b", b"c"]):
        s = p.get_store(v)
        s.put(b"k", value)
        s.commit()
    s = p.get_store(1)  # a retried batch 1
    s.put(b"k", b"B")
    assert s.commit() == 2
    assert p.get_store(2).get(b"k") == b"B"
    assert make_provider().get_store(2).get(b"k") == b"B"
    assert "3.changelog" in os.listdir(p.checkpoint.directory)
    assert make_provider().get_store(3).get(b"k") == b"c"


def test_maintenance_snapshots_and_deletes_only_what_is_not_needed(make_provider) -> None:  # noqa: ANN001
    p = make_provider(snapshot_interval=3)
    for v in range(10):
        s = p.get_store(v)
        s.put(b"k%d" % v, b"v")
        s.commit()
        p.do_snapshot_maintenance()
        p.do_cleanup_maintenance(4)
    files = sorted((n for n in os.listdir(p.checkpoint.directory) if not is_sst_file(n)),
                   key=lambda n: (int(n.split(".")[0]), n))
    # Versions 7..10 need snapshot 6; snapshot 3 and the changelogs after it stay too, so that a
    # repair can rebuild them should snapshot 6 be found damaged (repair.py).
    assert "9.snapshot" in files and "6.snapshot" in files and "3.snapshot" in files
    assert all(int(f.split(".")[0]) >= 3 for f in files) and "3.changelog" not in files
    for v in range(7, 11):  # the newest 4 versions load, on a fresh executor too
        assert len(dict(make_provider().get_store(v).iterator())) == v


def test_old_version_reload_while_newer_exists(make_provider) -> None:  # noqa: ANN001
    p = make_provider()
    for v in range(3):
        s = p.get_store(v)
        s.put(b"k%d" % v, b"v")
        s.commit()
    assert sorted(dict(p.get_store(1).iterator())) == [b"k0"]
    assert sorted(dict(p.get_store(3).iterator())) == [b"k0", b"k1", b"k2"]


def test_vanished_local_directory_is_restored_from_checkpoint(make_provider) -> None:  # noqa: ANN001
    import shutil

    p = make_provider()
    s = p.get_store(0)
    s.put(b"a", b"1")
    s.commit()
    shutil.rmtree(p.db_dir)
    assert p.get_store(1).get(b"a") == b"1"


def test_ttl_metrics_count_on_read_and_incremental_removals(make_provider) -> None:  # noqa: ANN001
    p = make_provider(TtlConfig(ttl_ms=100, incremental=IncrementalCleanup(10)))
    s = p.get_store(0, now_ms=1000)
    for i in range(5):
        s.put(b"k%d" % i, b"v")
    s.commit()
    s = p.get_store(1, now_ms=1100)
    assert s.get(b"k0") is None
    s.commit()
    m = s.metrics().custom
    assert m["ttlExpiredOnRead"] == 1 and m["ttlRemovedByIncrementalCleanup"] == 4
    assert s.metrics().num_keys == 0


@pytest.mark.parametrize("gather_bytes", [128 << 20, 0], ids=["built-from-nothing", "replayed"])
def test_large_batches_equal_a_dict_model_through_commit_and_restore(make_provider, monkeypatch,  # noqa: ANN001
                                                                     gather_bytes: int) -> None:
    """Batches of thousands of keys (the native plane bulk-loads these as SST files, at commit
    and at changelog replay) hold exactly what a dict would: puts of new and existing keys,
    deletes of present and absent keys, the exact key count, and the same after a restore,
    whether the restore gathers the changelogs into one build or (over its memory budget)
    replays them one by one."""
    monkeypatch.setattr(native_plane, "_RESTORE_GATHER_BYTES", gather_bytes)
    p = make_provider(snapshot_interval=100)  # restores read every changelog
    model: dict[bytes, bytes] = {}
    batches = [
        [(b"k%05d" % i, b"a") for i in range(6000)],
        [(b"k%05d" % i, b"b") for i in range(0, 6000, 2)]  # overwrites
        + [(b"k%05d" % i, None) for i in range(1, 3000, 2)]  # deletes of present keys
        + [(b"z%05d" % i, None) for i in range(1000)]  # deletes of absent keys
        + [(b"n%05d" % i, b"c") for i in range(5000)],  # new keys
    ]
    for version, batch in enumerate(batches):
        s = p.get_store(version)
        for k, v in batch:
            if v is None:
                s.remove(k)
                model.pop(k, None)
            else:
                s.put(k, v)
                model[k] = v
        assert s.commit() == version + 1
        assert s.metrics().num_keys == len(model)
        if p.engine.native_data_plane:  # bulk-loaded: nothing went through the memtable
            assert p.engine.memtable_bytes() < 64 << 10, p.engine.memtable_bytes()
    s = p.get_store(len(batches))
    assert dict(s.iterator()) == model
    s.abort()
    assert [f for f in os.listdir(p.files.staging) if f.endswith(".sst")] == []
    restored = make_provider()
    s = restored.get_store(len(batches))
    assert dict(s.iterator()) == model and restored.num_keys == len(model)
    s.abort()


def test_a_commit_on_an_empty_store_at_a_later_version_is_rebuildable(make_provider) -> None:  # noqa: ANN001
    """Spark's loadEmpty (as `ttlstate migrate` writes a whole state at its source's version):
    no file below that version exists, so the commit is snapshotted at once."""
    p = make_provider(snapshot_interval=1000)
    s = p.get_store(5, empty=True)
    s.put(b"k", b"v")
    assert s.commit() == 6
    assert "6.snapshot" in os.listdir(p.checkpoint.directory)
    assert dict(make_provider().get_store(6).iterator()) == {b"k": b"v"}
