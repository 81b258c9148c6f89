"""The checkpoint record file: round trips, and damage is detected before anything is read; a
changelog of operations (a store with column families) holds appends in a format of its own,
which folds as applying its records in order does."""

from __future__ import annotations

import os
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ttlstate.checkpoint import record_file
from ttlstate.checkpoint.changelog_fold import fold
from ttlstate.checkpoint.record_file import (
    APPENDS_FORMAT,
    FORMAT_VERSION,
    KIND_CHANGELOG,
    KIND_SNAPSHOT,
    OP_APPEND,
    OP_DELETE,
    OP_PUT,
    Operation,
    RecordFileError,
    header_json,
    verify_record_file,
    write_operations,
    write_record_file,
)
from ttlstate.checkpoint.record_reader import read_operations, read_records

records_st = st.lists(st.tuples(st.binary(max_size=40), st.none() | st.binary(max_size=200)),
                      max_size=60)
# Values are TtlValues (an 8-byte timestamp, then the user bytes), as every store writes them.
ttl_values = st.binary(min_size=8, max_size=14)
operations_st = st.lists(st.one_of(
    st.tuples(st.just(OP_PUT), st.binary(max_size=2), ttl_values),
    st.tuples(st.just(OP_DELETE), st.binary(max_size=2), st.none()),
    st.tuples(st.just(OP_APPEND), st.binary(max_size=2), ttl_values)), max_size=40)


@settings(max_examples=60, deadline=None)
@given(records=records_st, batch_time=st.none() | st.integers(-(2**63), 2**63 - 1))
def test_round_trip(tmp_path_factory: pytest.TempPathFactory, records: list, batch_time: int | None) -> None:
    path = str(tmp_path_factory.mktemp("rf") / "f")
    assert write_record_file(path, KIND_CHANGELOG, "op/0", 7, batch_time, records, 1000) == len(records)
    header = verify_record_file(path, KIND_CHANGELOG)
    assert (header.store_id, header.version, header.batch_time_ms, header.ttl_ms) == (
        "op/0", 7, batch_time, 1000)
    assert list(read_records(path, header)) == records


def _sample(path: str) -> bytes:
    write_record_file(path, KIND_SNAPSHOT, "s", 3, 5, [(b"k%d" % i, b"v" * i) for i in range(500)])
    with open(path, "rb") as f:
        return f.read()


@pytest.mark.parametrize("cut", [1, 10, 27, 28, 100, 1000])
def test_truncation_is_detected(tmp_path, cut: int) -> None:  # noqa: ANN001
    path = str(tmp_path / "f")
    data = _sample(path)
    with open(path, "wb") as f:
        f.write(data[:-cut])
    with pytest.raises(RecordFileError, match="truncated|corrupt"):
        verify_record_file(path, KIND_SNAPSHOT)


@settings(max_examples=40, deadline=None)
@given(pos=st.integers(min_value=0), bit=st.integers(0, 7))
def test_any_bit_flip_is_detected(tmp_path_factory: pytest.TempPathFactory, pos: int, bit: int) -> None:
    path = str(tmp_path_factory.mktemp("rf") / "f")
    data = bytearray(_sample(path))
    data[pos % len(data)] ^= 1 << bit
    with open(path, "wb") as f:
        f.write(data)
    with pytest.raises(RecordFileError):
        verify_record_file(path, KIND_SNAPSHOT)


def test_wrong_kind_and_foreign_files_are_refused(tmp_path) -> None:  # noqa: ANN001
    path = str(tmp_path / "f")
    _sample(path)
    with pytest.raises(RecordFileError, match="kind"):
        verify_record_file(path, KIND_CHANGELOG)
    foreign = str(tmp_path / "1.delta")
    with open(foreign, "wb") as f:
        f.write(os.urandom(200))
    with pytest.raises(RecordFileError, match="not a ttlstate checkpoint file"):
        verify_record_file(foreign, KIND_SNAPSHOT)


def test_flipped_record_count_is_detected_before_reading(tmp_path) -> None:  # noqa: ANN001
    path = str(tmp_path / "f")
    data = bytearray(_sample(path))
    data[-28 + 8 + 7] ^= 1  # lowest byte of the footer's record count
    with open(path, "wb") as f:
        f.write(data)
    with pytest.raises(RecordFileError, match="checksum"):
        verify_record_file(path, KIND_SNAPSHOT)


@settings(max_examples=60, deadline=None)
@given(operations=operations_st)
def test_operations_round_trip_in_a_format_only_a_reader_of_appends_takes(
        tmp_path_factory: pytest.TempPathFactory, operations: list[Operation]) -> None:
    """In the order written; with an append, of APPENDS_FORMAT (without, of the format every
    ttlstate reads), and `read_records`, which knows no appends, refuses it as corrupt."""
    path = str(tmp_path_factory.mktemp("rf") / "f")
    assert write_operations(path, KIND_CHANGELOG, header_json("op/0", 2, None, None, None), operations) \
        == len(operations)
    header = verify_record_file(path, KIND_CHANGELOG)
    appends = any(op == OP_APPEND for op, _, _ in operations)
    assert header.format == (APPENDS_FORMAT if appends else FORMAT_VERSION)
    assert list(read_operations(path, header)) == operations
    if appends:
        with pytest.raises(RecordFileError, match="an append record in a file of puts and deletes"):
            list(read_records(path, header))
    else:
        assert list(read_records(path, header)) == [(k, v) for _, k, v in operations]


def _model(before: dict[bytes, bytes], operations: list[Operation]) -> dict[bytes, bytes]:
    """Each operation applied in order to a dict of TtlValues."""
    state = dict(before)
    for op, key, value in operations:
        if op == OP_DELETE:
            state.pop(key, None)
        elif op == OP_PUT:
            state[key] = value  # type: ignore[assignment]
        else:
            assert value is not None
            state[key] = value[:8] + state.get(key, b"\0" * 8)[8:] + value[8:]
    return state


@settings(max_examples=100, deadline=None)
@given(before=st.dictionaries(st.binary(max_size=2), ttl_values, max_size=6), operations=operations_st)
def test_fold_is_applying_each_operation_in_order(before: dict[bytes, bytes],
                                                  operations: list[Operation]) -> None:
    named = {k for _, k, _ in operations}
    folded = fold(operations, {k: before.get(k) for k in named})
    after = {k: v for k, v in before.items() if k not in named}
    after.update({k: v for k, v in folded.items() if v is not None})
    assert after == _model(before, operations)


def test_an_append_is_the_value_so_far_then_the_appended_bytes_stamped_with_its_time() -> None:
    ts = (7).to_bytes(8, "big")
    ops: list[Operation] = [(OP_APPEND, b"a", ts + b"xy"), (OP_DELETE, b"b", None),
                            (OP_APPEND, b"b", ts + b"z"), (OP_PUT, b"c", b"\0" * 8 + b"1"),
                            (OP_APPEND, b"c", ts + b"2"), (OP_APPEND, b"c", ts + b"3")]
    assert fold(ops, {b"a": b"\0" * 8 + b"w", b"b": b"\0" * 8 + b"q", b"c": None}) == {
        b"a": ts + b"wxy", b"b": ts + b"z", b"c": ts + b"123"}


def test_a_reader_without_appends_refuses_their_format_by_its_number(
        tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    """What a ttlstate from before appends says of such a changelog (it reads formats 1 and 2)."""
    path = str(tmp_path / "3.changelog")
    write_operations(path, KIND_CHANGELOG, header_json("s", 3, None, None, None),
                     [(OP_APPEND, b"k", b"\0" * 8 + b"v")])
    monkeypatch.setattr(record_file, "READABLE_FORMATS", (FORMAT_VERSION, record_file.SST_MANIFEST_FORMAT))
    with pytest.raises(RecordFileError, match="has format version 3; this ttlstate reads 1, 2"):
        verify_record_file(path, KIND_CHANGELOG)


def test_appends_are_refused_in_a_snapshot_and_in_a_file_of_puts_and_deletes(tmp_path) -> None:  # noqa: ANN001
    appended = str(tmp_path / "1.snapshot")
    write_operations(appended, KIND_SNAPSHOT, header_json("s", 1, None, None, None),
                     [(OP_APPEND, b"k", b"\0" * 8 + b"v")])
    with pytest.raises(RecordFileError, match="has format version 3"):
        verify_record_file(appended, KIND_SNAPSHOT)
    # An append record in a file of format 1 (which never holds one: relabelled here, its
    # checksum made good) is an unknown op.
    path = str(tmp_path / "2.changelog")
    write_operations(path, KIND_CHANGELOG, header_json("s", 2, None, None, None),
                     [(OP_APPEND, b"k", b"\0" * 8 + b"v")])
    with open(path, "rb") as f:
        data = bytearray(f.read())
    data[9:11] = FORMAT_VERSION.to_bytes(2, "big")
    data[-4:] = zlib.crc32(bytes(data[:-4])).to_bytes(4, "big")
    with open(path, "wb") as f:
        f.write(data)
    header = verify_record_file(path, KIND_CHANGELOG)
    with pytest.raises(RecordFileError, match="unknown record op 3"):
        list(read_operations(path, header))
