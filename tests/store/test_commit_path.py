"""The commit path: the native plane applies the batch to the local DB while its changelog is
written and uploaded. The changelog holds exactly the batch's writes (in key order on the
native plane, any order being valid: a changelog holds each key once); a commit whose changelog
cannot be written or uploaded fails whole, its local DB discarded, and the store then loads
the last committed version from the checkpoint."""

from __future__ import annotations

import os
import random
import threading

import pytest

from ttlstate import _native
from ttlstate.checkpoint.record_file import KIND_CHANGELOG, header_json, read_records, verify_record_file
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
            assert [k for k, _ in records] == sorted(written)
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
    writes (the key order computed once, by whichever comes first); the transaction ends
    "committed" only when the caller says so."""
    engine = open_engine(EngineKind.NATIVE, str(tmp_path / "db"), None)
    try:
        for round_no in range(5):
            txn = engine.begin("op=0,part=0,store=default", round_no, 1000, True,  # type: ignore[attr-defined]
                               TtlConfig(), _native.CleanupCursor())
            batch = dict(_batch(100 + round_no, 8000))
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
