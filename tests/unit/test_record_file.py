"""The checkpoint record file: round trips, and damage is detected before anything is read."""

from __future__ import annotations

import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ttlstate.checkpoint.record_file import (
    KIND_CHANGELOG,
    KIND_SNAPSHOT,
    RecordFileError,
    read_records,
    verify_record_file,
    write_record_file,
)

records_st = st.lists(st.tuples(st.binary(max_size=40), st.none() | st.binary(max_size=200)),
                      max_size=60)


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
