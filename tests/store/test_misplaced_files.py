"""A valid file in the wrong place (another store's, version's or query's) is refused at load,
naming the file's full path, what it claims to be and what was expected; nothing of it applies.
A snapshot is only a shortcut: a misplaced one is passed over (a WARN names it) and the changelogs
rebuild the version instead (repair.py)."""

from __future__ import annotations

import logging
import os
import shutil

import pytest

from ttlstate.checkpoint.errors import CheckpointError
from ttlstate.checkpoint.identity import store_label
from ttlstate.checkpoint.location import LocalCheckpointLocation
from ttlstate.cli.inspect_checkpoint import inspect_store
from ttlstate.config.keys import EngineKind
from ttlstate.config.store_config import StoreConfig, TtlConfig
from ttlstate.store.provider import StoreProvider
from ttlstate.ttl.clock import ManualClock

P0 = store_label(0, 0, "default")
P1 = store_label(0, 1, "default")
OP1 = store_label(1, 0, "default")


@pytest.fixture(params=[EngineKind.NATIVE, EngineKind.ROCKSDICT], ids=lambda e: e.value)
def engine(request) -> EngineKind:  # noqa: ANN001
    return request.param


def provider(root, engine: EngineKind, store_id: str, ck: str, query: str = "q1",  # noqa: ANN001
             local: str = "local") -> StoreProvider:
    return StoreProvider(store_id, str(root / f"{local}-{store_id}-{query}"),
                         LocalCheckpointLocation(str(root / ck)),
                         StoreConfig(TtlConfig(), engine, snapshot_interval=2), ManualClock(0), query)


def fill(p: StoreProvider, versions: int, tag: bytes) -> None:
    for v in range(versions):
        s = p.get_store(v, now_ms=1000 + v)
        s.put(tag + b"%d" % v, b"x")
        s.commit()


def expect_refused(p: StoreProvider, version: int, file_name: str, claimed: str, expected: str) -> None:
    with pytest.raises(CheckpointError) as e:
        p.get_store(version)
    msg = str(e.value)
    assert e.value.file_name == file_name, msg
    assert p.checkpoint.describe(file_name) in msg, msg  # the full path
    assert f"is {claimed}, but {expected} was expected" in msg, msg
    with pytest.raises(Exception, match="no version is loaded"):
        p.engine  # noqa: B018  (nothing half-loaded serves)


@pytest.mark.parametrize("case", ["other-partition", "older-version", "other-operator-snapshot",
                                  "other-query"])
def test_a_valid_file_of_another_place_is_refused(tmp_path, engine: EngineKind, case: str,  # noqa: ANN001
                                                  caplog: pytest.LogCaptureFixture) -> None:
    ours = provider(tmp_path, engine, P0, "ck0")
    fill(ours, 3, b"ours")
    ck0 = str(tmp_path / "ck0")
    if case == "other-partition":
        other = provider(tmp_path, engine, P1, "ck1")
        fill(other, 3, b"theirs")
        shutil.copy(tmp_path / "ck1" / "3.changelog", os.path.join(ck0, "3.changelog"))
        claimed = f"the changelog of version 3 of store {P1}, query q1"
        expected = f"the changelog of version 3 of store {P0}, query q1"
        name, version = "3.changelog", 3
    elif case == "older-version":
        shutil.copy(os.path.join(ck0, "2.changelog"), os.path.join(ck0, "3.changelog"))
        claimed = f"the changelog of version 2 of store {P0}, query q1"
        expected = f"the changelog of version 3 of store {P0}, query q1"
        name, version = "3.changelog", 3
    elif case == "other-operator-snapshot":
        other = provider(tmp_path, engine, OP1, "ck1")
        fill(other, 3, b"theirs")
        other.write_snapshot()
        shutil.copy(tmp_path / "ck1" / "3.snapshot", os.path.join(ck0, "3.snapshot"))
        claimed = f"the snapshot of version 3 of store {OP1}, query q1"
        expected = f"the snapshot of version 3 of store {P0}, query q1"
        name, version = "3.snapshot", 3
    else:
        other = provider(tmp_path, engine, P0, "ck1", query="q2")
        fill(other, 3, b"theirs")
        shutil.copy(tmp_path / "ck1" / "2.changelog", os.path.join(ck0, "2.changelog"))
        claimed = f"the changelog of version 2 of store {P0}, query q2"
        expected = f"the changelog of version 2 of store {P0}, query q1"
        name, version = "2.changelog", 3
    fresh = provider(tmp_path, engine, P0, "ck0", local="fresh")  # an empty local dir: reads the files
    if name.endswith(".snapshot"):
        with caplog.at_level(logging.WARNING):
            state = sorted(dict(fresh.get_store(version).iterator()))
        assert state == [b"ours%d" % v for v in range(version)]
        assert fresh.checkpoint.describe(name) in caplog.text
        assert f"is {claimed}, but {expected} was expected" in caplog.text
        assert "passing it over" in caplog.text
    else:
        expect_refused(fresh, version, name, claimed, expected)
    # What inspect says of the directory: the same file, named as misplaced.
    report = inspect_store("0", "0", "default", ck0, 10_000, None, "q1")
    assert any(name in p and "misplaced" in p and claimed in p for p in report.problems), report.problems
    # Nothing of the refused file was applied, and the store's own files still serve.
    good = int(name.split(".")[0]) - 1  # the newest version that does not need the refused file
    assert sorted(dict(fresh.get_store(good).iterator())) == [b"ours%d" % v for v in range(good)]
    fresh.close()
    ours.close()


def test_files_without_a_query_id_still_load(tmp_path, engine: EngineKind) -> None:  # noqa: ANN001
    """Files of queries run without a metadata file (or by an older release) carry no query id:
    only store, kind and version are compared."""
    anon = StoreProvider(P0, str(tmp_path / "a"), LocalCheckpointLocation(str(tmp_path / "ck")),
                         StoreConfig(TtlConfig(), engine), ManualClock(0), None)
    fill(anon, 2, b"k")
    anon.close()
    named = provider(tmp_path, engine, P0, "ck")
    assert sorted(dict(named.get_store(2).iterator())) == [b"k0", b"k1"]
    named.close()
