"""Replaying a changelog file natively (in key-ordered chunks, written through the memtable or
bulk-loaded as an SST file) is the same as applying its records one by one in file order: the
last record of a key wins, and the reported change in the number of keys, and in those of
internal column families (`$` names), is exact. Building a
version from nothing (a snapshot and changelogs merged into one SST file) is the same as loading
the snapshot and replaying the changelogs in order. Both fold a changelog of operations (puts,
deletes and appends, a key several times) as the Python reference (`record_file.fold`) does. A
snapshot file that is not one sorted run of puts is refused whole."""

from __future__ import annotations

import os
import tempfile

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ttlstate.checkpoint.changelog_fold import fold
from ttlstate.checkpoint.record_file import (
    KIND_CHANGELOG,
    KIND_SNAPSHOT,
    OP_APPEND,
    OP_DELETE,
    OP_PUT,
    Operation,
    header_json,
    write_operations,
    write_record_file,
)
from ttlstate.config.keys import EngineKind
from ttlstate.engine.select import open_engine
from ttlstate.store.column_families import family_prefix, is_internal_key

keys = st.binary(min_size=0, max_size=3)
records = st.lists(st.tuples(keys, st.one_of(st.none(), st.binary(max_size=4))), max_size=40)
# Operations of a store with column families: TtlValues (8-byte timestamp, then user bytes).
ttl_values = st.binary(min_size=8, max_size=11)
operations = st.lists(st.one_of(st.tuples(st.just(OP_PUT), keys, ttl_values),
                                st.tuples(st.just(OP_DELETE), keys, st.none()),
                                st.tuples(st.just(OP_APPEND), keys, ttl_values)), max_size=40)


# Key shapes for the sort's inline bytes: short keys; keys sharing a 12-byte prefix (as Spark's
# UnsafeRow keys share null bits and offsets), decided within the 8 bytes after it; and keys
# sharing it that tie on those 8 bytes, decided only by comparing whole keys.
SHAPES = {"short": lambda k: k, "shared-prefix": lambda k: b"\0" * 12 + k,
          "tie-past-8-bytes": lambda k: b"\0" * 12 + b"\1" * 8 + k,
          # a store with column families: user ones and internal ones ($), by the key's first byte
          "families": lambda k: family_prefix(("$ttl_v", "$t", "v", "m")[k[0] % 4] if k else "") + k}


def _internal(keys: object) -> int:
    return sum(is_internal_key(k) for k in keys)  # type: ignore[attr-defined]


@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("ingest_min_keys", [0, 1 << 30], ids=["sst-ingest", "memtable"])
@settings(max_examples=60, deadline=None)
@given(before=st.dictionaries(keys, st.binary(max_size=4), max_size=20), changelog=records)
def test_replay_equals_applying_in_file_order(shape: str, ingest_min_keys: int, before: dict[bytes, bytes],
                                              changelog: list[tuple[bytes, bytes | None]]) -> None:
    before = {SHAPES[shape](k): v for k, v in before.items()}
    changelog = [(SHAPES[shape](k), v) for k, v in changelog]
    with tempfile.TemporaryDirectory() as d:
        engine = open_engine(EngineKind.NATIVE, os.path.join(d, "db"), None)
        try:
            engine.write(list(before.items()))
            path = os.path.join(d, "1.changelog")
            write_record_file(path, KIND_CHANGELOG, "op=0,part=0,store=default", 1, None, changelog)
            count, delta, internal = engine.apply_changelog_file(  # type: ignore[attr-defined]
                path, ingest_min_keys=ingest_min_keys)
            model = dict(before)
            _apply_in_order(model, changelog)
            assert count == len(changelog)
            assert delta == len(model) - len(before)
            assert internal == _internal(model) - _internal(before)
            assert dict(engine.iterate()) == model
            assert sorted(os.listdir(d)) == ["1.changelog", "db"]  # no SST file left behind
        finally:
            engine.close()


def _apply_in_order(model: dict[bytes, bytes], records: list[tuple[bytes, bytes | None]]) -> None:
    for key, value in records:
        if value is None:
            model.pop(key, None)
        else:
            model[key] = value


def _header(version: int) -> bytes:
    return header_json("op=0,part=0,store=default", version, None, None, None)


def _folded(before: dict[bytes, bytes], log: list[Operation]) -> dict[bytes, bytes]:
    """`before` after the operations of `log`, by the Python reference."""
    named = list(dict.fromkeys(k for _, k, _ in log))
    after = {k: v for k, v in before.items() if k not in named}
    after.update({k: v for k, v in fold(log, {k: before.get(k) for k in named}).items() if v is not None})
    return after


@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("ingest_min_keys", [0, 1 << 30], ids=["sst-ingest", "memtable"])
@settings(max_examples=30, deadline=None)
@given(before=st.dictionaries(keys, ttl_values, max_size=20), log=operations)
def test_replay_of_operations_folds_each_key_as_the_python_reference(
        shape: str, ingest_min_keys: int, before: dict[bytes, bytes], log: list[Operation]) -> None:
    """Appends onto the DB's values, onto earlier records of the file, after deletes; the key
    count exact and every key left present hashed."""
    from ttlstate import _native

    before = {SHAPES[shape](k): v for k, v in before.items()}
    log = [(op, SHAPES[shape](k), v) for op, k, v in log]
    with tempfile.TemporaryDirectory() as d:
        engine = open_engine(EngineKind.NATIVE, os.path.join(d, "db"), None)
        try:
            engine.write(list(before.items()))
            path = os.path.join(d, "1.changelog")
            write_operations(path, KIND_CHANGELOG, _header(1), log)
            hashes = _native.KeyHashes()
            count, delta, internal = engine.apply_changelog_file(  # type: ignore[attr-defined]
                path, hashes, ingest_min_keys=ingest_min_keys)
            model = _folded(before, log)
            assert count == len(log)
            assert delta == len(model) - len(before)
            assert internal == _internal(model) - _internal(before)
            assert dict(engine.iterate()) == model
            assert len(hashes) == sum(op != OP_DELETE for op, _, _ in log)  # each put and append's key
        finally:
            engine.close()


@pytest.mark.parametrize("shape", list(SHAPES))
@settings(max_examples=30, deadline=None)
@given(snapshot=st.one_of(st.none(), st.dictionaries(keys, ttl_values, max_size=20)),
       logs=st.lists(operations, max_size=3))
def test_building_from_operations_folds_each_key_as_the_python_reference(
        shape: str, snapshot: dict[bytes, bytes] | None, logs: list[list[Operation]]) -> None:
    """Appends onto the snapshot's values and onto earlier changelogs' records."""
    snapshot = None if snapshot is None else {SHAPES[shape](k): v for k, v in snapshot.items()}
    logs = [[(op, SHAPES[shape](k), v) for op, k, v in log] for log in logs]
    with tempfile.TemporaryDirectory() as d:
        engine = open_engine(EngineKind.NATIVE, os.path.join(d, "db"), None)
        try:
            builder = engine.restore_builder()  # type: ignore[attr-defined]
            for i, log in enumerate(logs, start=2):
                path = os.path.join(d, f"{i}.changelog")
                write_operations(path, KIND_CHANGELOG, _header(i), log)
                assert builder.add_changelog(path) == len(log)
            snapshot_path = ""
            if snapshot is not None:
                snapshot_path = os.path.join(d, "1.snapshot")
                write_record_file(snapshot_path, KIND_SNAPSHOT, "op=0,part=0,store=default", 1, None,
                                  sorted(snapshot.items()))
            _loaded, count, internal = builder.finish(snapshot_path, os.path.join(d, "build.sst"), None)
            model = dict(snapshot or {})
            for log in logs:
                model = _folded(model, log)
            assert (count, internal) == (len(model), _internal(model))
            assert dict(engine.iterate()) == model
        finally:
            engine.close()


@pytest.mark.parametrize("shape", list(SHAPES))
@settings(max_examples=60, deadline=None)
@given(snapshot=st.one_of(st.none(), st.dictionaries(keys, st.binary(max_size=4), max_size=20)),
       changelogs=st.lists(records, max_size=3))
def test_building_from_nothing_equals_loading_the_snapshot_then_replaying(
        shape: str, snapshot: dict[bytes, bytes] | None,
        changelogs: list[list[tuple[bytes, bytes | None]]]) -> None:
    from ttlstate import _native

    snapshot = None if snapshot is None else {SHAPES[shape](k): v for k, v in snapshot.items()}
    changelogs = [[(SHAPES[shape](k), v) for k, v in log] for log in changelogs]
    with tempfile.TemporaryDirectory() as d:
        engine = open_engine(EngineKind.NATIVE, os.path.join(d, "db"), None)
        try:
            builder = engine.restore_builder()  # type: ignore[attr-defined]
            files = []
            for i, log in enumerate(changelogs, start=2):
                path = os.path.join(d, f"{i}.changelog")
                write_record_file(path, KIND_CHANGELOG, "op=0,part=0,store=default", i, None, log)
                assert builder.add_changelog(path) == len(log)
                files.append(path)
            snapshot_path = ""
            if snapshot is not None:
                snapshot_path = os.path.join(d, "1.snapshot")
                write_record_file(snapshot_path, KIND_SNAPSHOT, "op=0,part=0,store=default", 1, None,
                                  sorted(snapshot.items()))
            hashes = _native.KeyHashes()
            loaded, count, internal = builder.finish(snapshot_path, os.path.join(d, "build.sst"), hashes)
            model = dict(snapshot or {})
            for log in changelogs:
                _apply_in_order(model, log)
            assert loaded == len(snapshot or {})
            assert count == len(model) == len(hashes)
            assert internal == _internal(model)
            assert dict(engine.iterate()) == model
            assert engine.count_key_kinds() == (len(model), _internal(model))
            assert "build.sst" not in os.listdir(d)
        finally:
            engine.close()


def test_a_build_refuses_a_db_that_is_not_empty(tmp_path) -> None:  # noqa: ANN001
    engine = open_engine(EngineKind.NATIVE, str(tmp_path / "db"), None)
    try:
        engine.write([(b"k", b"v")])
        with pytest.raises(RuntimeError, match="not empty"):
            engine.restore_builder().finish("", str(tmp_path / "build.sst"))  # type: ignore[attr-defined]
        assert dict(engine.iterate()) == {b"k": b"v"}
    finally:
        engine.close()


@pytest.mark.parametrize(("records", "why"), [
    ([(b"a", b"1"), (b"c", b"3"), (b"b", b"2")], "snapshot keys out of order"),
    ([(b"a", b"1"), (b"a", b"2")], "snapshot keys out of order"),
    ([(b"a", b"1"), (b"b", None)], "a delete in a snapshot"),
], ids=["out-of-order", "repeated-key", "delete"])
def test_a_snapshot_the_bulk_load_cannot_take_is_refused_whole(records: list[tuple[bytes, bytes | None]],
                                                                why: str) -> None:
    """A snapshot is one sorted run of puts; anything else is a corrupt file, and nothing of it
    (or of the changelogs gathered to build with it) reaches the DB; the SST file it was being
    written to is removed."""
    with tempfile.TemporaryDirectory() as d:
        engine = open_engine(EngineKind.NATIVE, os.path.join(d, "db"), None)
        try:
            path = os.path.join(d, "1.snapshot")
            write_record_file(path, KIND_SNAPSHOT, "op=0,part=0,store=default", 1, None, records)
            log = os.path.join(d, "2.changelog")
            write_record_file(log, KIND_CHANGELOG, "op=0,part=0,store=default", 2, None, [(b"0", b"x")])
            builder = engine.restore_builder()  # type: ignore[attr-defined]
            builder.add_changelog(log)
            with pytest.raises(RuntimeError, match=f"1.snapshot is corrupt \\({why}\\)"):
                builder.finish(path, path + ".sst")
            assert dict(engine.iterate()) == {}
            assert sorted(os.listdir(d)) == ["1.snapshot", "2.changelog", "db"]
        finally:
            engine.close()
