"""The commit path: the native plane encodes the changelog as the writes arrive, and applies
the batch to the local DB while its changelog is written and uploaded (the commit may return
before the apply ends). The changelog holds exactly the batch's writes, each key once (on the
native plane in the order they were first written, or in key order when a key was written
twice; any order is valid); a commit whose changelog cannot be written or uploaded fails
whole, its local DB discarded, and the store then loads the last committed version from the
checkpoint."""

from __future__ import annotations

import os
import random
import threading
import time

import pytest

from ttlstate import _native
from ttlstate.checkpoint.record_file import KIND_CHANGELOG, header_json, verify_record_file
from ttlstate.checkpoint.record_reader import read_records
from ttlstate.config.keys import EngineKind
from ttlstate.config.store_config import TtlConfig
from ttlstate.engine.select import open_engine
from ttlstate.store.planes import native as native_plane
from ttlstate.store.planes import portable as portable_plane
from ttlstate.store.store_files import StoreFiles


def _batch(seed: int, n: int) -> list[tuple[bytes, bytes | None]]:
    rng = random.Random(seed)
    keys = [b"\0" * 12 + rng.randbytes(rng.randint(1, 12)) for _ in range(n)]
    return [(k, None if rng.random() < 0.2 else rng.randbytes(rng.randint(0, 8))) for k in keys]


@pytest.mark.parametrize("n", [50, 6000], ids=["write-batch", "sst-ingest"])
def test_the_changelog_holds_exactly_the_batch_and_the_db_the_model(make_provider, n: int) -> None:  # noqa: ANN001
    p = make_provider(snapshot_interval=1000)
    model: dict[bytes, bytes] = {}
    for version in range(3):
        batch = _batch(version, n)
        s = p.get_store(version)
        expected: dict[bytes, bytes | None] = {}
        for k, v in batch:
            if v is None:
                s.remove(k)
                model.pop(k, None)
            else:
                s.put(k, v)
                model[k] = v
            expected[k] = v
        assert s.commit() == version + 1
        path = os.path.join(p.checkpoint.directory, f"{version + 1}.changelog")
        records = list(read_records(path, verify_record_file(path, KIND_CHANGELOG)))
        written = {k: (v[8:] if v is not None else None) for k, v in records}  # TtlValue: 8-byte stamp first
        assert len(records) == len(written) == len(expected)
        assert written == expected
        if p.engine.native_data_plane:
            first_written = list(dict.fromkeys(k for k, _ in batch))
            rewritten = len(first_written) < len(batch)
            assert [k for k, _ in records] == (sorted(written) if rewritten else first_written)
        assert p.num_keys == len(model)
    s = p.get_store(3)
    assert dict(s.iterator()) == model
    s.abort()
    restored = make_provider()
    s = restored.get_store(3)
    assert dict(s.iterator()) == model
    s.abort()


@pytest.mark.parametrize("fails", ["write_changelog", "publish"])
def test_a_commit_whose_changelog_fails_commits_nothing(make_provider, monkeypatch, fails: str) -> None:  # noqa: ANN001
    p = make_provider(snapshot_interval=1000)
    s = p.get_store(0)
    s.put(b"a", b"1")
    s.commit()

    def broken(*_args: object) -> None:
        raise OSError("disk full")

    target = {"write_changelog": (native_plane.NativeVersion if p.engine.native_data_plane
                                  else portable_plane.PortableVersion, "write_changelog"),
              "publish": (StoreFiles, "publish")}[fails]
    with monkeypatch.context() as m:
        m.setattr(*target, broken)
        s = p.get_store(1)
        for i in range(6000):  # bulk-loaded on the native plane
            s.put(b"k%05d" % i, b"x")
        with pytest.raises(OSError, match="disk full"):
            s.commit()
    assert sorted(os.listdir(p.checkpoint.directory)) == ["1.changelog"]
    with pytest.raises(Exception):  # noqa: B017  (version 2 was never committed)
        p.get_store(2)
    s = p.get_store(1)
    assert dict(s.iterator()) == {b"a": b"1"}
    s.put(b"b", b"2")
    assert s.commit() == 2
    assert dict(make_provider().get_store(2).iterator()) == {b"a": b"1", b"b": b"2"}


def test_native_apply_left_open_runs_beside_the_changelog_write(tmp_path) -> None:  # noqa: ANN001
    """`apply(end=False)` on one thread and `write_changelog` on another read the same pending
    writes (the key order computed once, by whichever comes first: a key written twice makes
    the changelog sort them too); the transaction ends "committed" only when the caller says so."""
    engine = open_engine(EngineKind.NATIVE, str(tmp_path / "db"), None)
    try:
        for round_no in range(5):
            txn = engine.begin("op=0,part=0,store=default", round_no, 1000, True,  # type: ignore[attr-defined]
                               TtlConfig(), _native.CleanupCursor())
            batch = dict(_batch(100 + round_no, 8000))
            txn.put(next(iter(batch)), b"written twice")
            for k, v in batch.items():
                if v is None:
                    txn.remove(k)
                else:
                    txn.put(k, v)
            out: dict[str, object] = {}

            def apply(t=txn, o=out) -> None:  # noqa: ANN001
                o["delta"] = t.apply(str(tmp_path / "batch.sst"), end=False)

            worker = threading.Thread(target=apply)
            worker.start()
            path = str(tmp_path / f"{round_no}.changelog")
            count = txn.write_changelog(path, header_json("op=0,part=0,store=default", round_no + 1, 1000,
                                                          None, None).decode())
            worker.join()
            assert txn.state != "committed"
            txn.end("committed")
            assert txn.state == "committed"
            assert count == len(batch)
            records = list(read_records(path, verify_record_file(path, KIND_CHANGELOG)))
            assert [k for k, _ in records] == sorted(batch)
        assert not (tmp_path / "batch.sst").exists()
    finally:
        engine.close()


# The portable plane applies on the committing thread: nothing of a commit runs after it.
_native_plane_only = pytest.mark.parametrize("make_provider", ["native", "native-records"], indirect=True)


@_native_plane_only
def test_a_commit_returns_before_its_apply_only_when_every_key_count_is_known(make_provider) -> None:  # noqa: ANN001
    """A key read before it is written is known present or absent, so the commit counts keys
    without the apply's lookups and returns at once; a key written blind needs them."""
    p = make_provider(snapshot_interval=1000)
    s = p.get_store(0)
    for k in (b"a", b"b"):
        assert s.get(k) is None
        s.put(k, b"1")
    assert s.commit() == 1 and s.has_committed
    assert p.applying is not None and p.num_keys == 2
    deadline = time.monotonic() + 10
    while s.txn.state != "committed" and time.monotonic() < deadline:  # the apply frees the batch
        time.sleep(0.01)
    assert s.txn.state == "committed" and p.applying is not None
    s = p.get_store(1)  # waits for it
    assert p.applying is None
    s.put(b"c", b"1")  # never read: the commit waits for the lookup
    assert s.commit() == 2
    assert p.applying is None and p.num_keys == 3


@_native_plane_only
def test_an_apply_that_fails_after_its_commit_returned_is_rebuilt_from_the_checkpoint(
        make_provider, monkeypatch, caplog) -> None:  # noqa: ANN001
    p = make_provider(snapshot_interval=1000)
    s = p.get_store(0)
    s.put(b"a", b"1")
    s.commit()
    release = threading.Event()
    real_apply = _native.Txn.apply

    def slow_broken_apply(self, *args: object, **kwargs: object) -> int:  # noqa: ANN001
        release.wait(10)
        raise RuntimeError("No space left on device")

    monkeypatch.setattr(_native.Txn, "apply", slow_broken_apply)
    s = p.get_store(1)
    for i in range(6000):
        assert s.get(b"k%05d" % i) is None
        s.put(b"k%05d" % i, b"x")
    assert s.commit() == 2  # the changelog is published: version 2 is committed
    assert not release.is_set() and p.num_keys == 6001
    release.set()
    monkeypatch.setattr(_native.Txn, "apply", real_apply)
    with caplog.at_level("WARNING"):
        s = p.get_store(2)
    assert "applying committed version 2 to the local DB failed" in caplog.text
    assert dict(s.iterator()) == {b"a": b"1", **{b"k%05d" % i: b"x" for i in range(6000)}}
    assert p.num_keys == 6001
    s.abort()


def _gate_applies(monkeypatch) -> threading.Event:  # noqa: ANN001
    """Every apply of the native plane waits until the returned event is set (10 s at most)."""
    gate = threading.Event()
    real_apply = _native.Txn.apply

    def gated_apply(self, *args: object, **kwargs: object) -> int:  # noqa: ANN001
        gate.wait(10)
        return real_apply(self, *args, **kwargs)

    monkeypatch.setattr(_native.Txn, "apply", gated_apply)
    return gate


@_native_plane_only
def test_snapshot_and_close_wait_for_the_apply(make_provider, monkeypatch) -> None:  # noqa: ANN001
    """A snapshot taken right after a commit holds its batch, and closing waits for the apply."""
    p = make_provider(snapshot_interval=1000)
    gate = _gate_applies(monkeypatch)
    s = p.get_store(0)
    assert s.get(b"a") is None
    s.put(b"a", b"1")
    assert s.commit() == 1
    threading.Timer(0.2, gate.set).start()
    assert p.write_snapshot() is not None
    restored = make_provider()
    os.remove(os.path.join(p.checkpoint.directory, "1.changelog"))  # the snapshot alone
    s = restored.get_store(1)
    assert dict(s.iterator()) == {b"a": b"1"}
    s.abort()
    gate.clear()
    s = p.get_store(1)
    assert s.get(b"b") is None
    s.put(b"b", b"2")
    assert s.commit() == 2
    threading.Timer(0.2, gate.set).start()
    p.close()
    assert gate.is_set() and p.applying is None


@_native_plane_only
def test_abort_or_release_after_commit_leave_the_running_apply_alone(make_provider, monkeypatch) -> None:  # noqa: ANN001
    """Ending a committed version is a no-op: its writes may still be going into the local DB."""
    p = make_provider(snapshot_interval=1000)
    gate = _gate_applies(monkeypatch)
    s = p.get_store(0)
    for i in range(6000):
        assert s.get(b"k%05d" % i) is None
        s.put(b"k%05d" % i, b"x")
    assert s.commit() == 1
    loaded = p.lineage
    s.abort()
    s.release()
    gate.set()
    s = p.get_store(1)
    assert p.lineage == loaded  # the apply succeeded: no reload from the checkpoint
    assert s.has_committed is False and sum(1 for _ in s.iterator()) == 6000
    s.abort()


@_native_plane_only
@pytest.mark.parametrize("seed", range(4))
def test_the_key_count_of_commits_that_skip_the_apply_matches_the_model(make_provider, seed: int) -> None:  # noqa: ANN001
    """Every key is read before it is written, so each commit knows its change in keys from the
    batch alone (kept as the writes arrive) and returns before its apply: the count stays exact
    through puts, removes, rewrites and removes of absent keys, and after a restore."""
    rng = random.Random(seed)
    p = make_provider(snapshot_interval=3)
    model: dict[bytes, bytes] = {}
    for version in range(6):
        s = p.get_store(version)
        for _ in range(rng.choice([20, 5000])):
            k = b"k%04d" % rng.randrange(3000)
            assert s.get(k) == model.get(k)
            if rng.random() < 0.3:
                s.remove(k)
                model.pop(k, None)
            else:
                v = rng.randbytes(4)
                s.put(k, v)
                model[k] = v
        assert s.commit() == version + 1
        assert p.applying is not None and p.num_keys == len(model)
    restored = make_provider()
    s = restored.get_store(6)
    assert dict(s.iterator()) == model and restored.num_keys == len(model)
    s.abort()


@pytest.mark.parametrize("make_provider", ["native"], indirect=True)  # loads replay on an SST snapshot
def test_a_changelog_records_the_key_count_its_commit_knew_and_a_load_ending_there_uses_it(
        make_provider, monkeypatch) -> None:  # noqa: ANN001
    """A commit that knew its change in keys writes the version's count into the changelog's
    header; a load whose last changelog has it counts no keys. A blind write leaves it out,
    and the load then looks the keys up: either way the count is exact."""
    p = make_provider(snapshot_interval=1000)
    s = p.get_store(0)
    for i in range(50):
        assert s.get(b"k%02d" % i) is None
        s.put(b"k%02d" % i, b"v")
    s.commit()
    assert p.write_snapshot() == "1.snapshot"
    s = p.get_store(1)
    assert s.get(b"k00") == b"v"
    s.remove(b"k00")
    assert s.get(b"new") is None
    s.put(b"new", b"v")
    s.commit()
    s = p.get_store(2)
    s.put(b"blind", b"v")  # never read: its presence is unknown until the apply looks
    s.commit()
    headers = [verify_record_file(os.path.join(p.checkpoint.directory, f"{v}.changelog"), KIND_CHANGELOG)
               for v in (1, 2, 3)]
    assert [h.keys for h in headers] == [50, 50, None]

    counted: list[bool] = []
    real = type(p.engine).apply_changelog_file

    def spy(self, path, hashes=None, ingest_min_keys=None, count_keys=True):  # noqa: ANN001
        counted.append(count_keys)
        return real(self, path, hashes, ingest_min_keys, count_keys=count_keys)

    monkeypatch.setattr(type(p.engine), "apply_changelog_file", spy)
    for version, keys, lookups in ((2, 50, [False]), (3, 51, [False, True])):
        counted.clear()
        fresh = make_provider(snapshot_interval=1000)
        fresh.get_store(version).abort()
        assert fresh.num_keys == keys and counted == lookups
