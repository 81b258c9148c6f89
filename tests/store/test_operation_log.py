"""A store with column families (transformWithState's) logs every put, delete and append of a
batch in the order made, a key as often as it was written, as Spark's RocksDB provider logs
them (its change feed reports each); a restore folds them into the state the live store has. A
store without families keeps a changelog of each written key once, which any ttlstate reads."""

from __future__ import annotations

import os
from collections.abc import Callable

from ttlstate.checkpoint.record_file import (
    APPENDS_FORMAT,
    FORMAT_VERSION,
    KIND_CHANGELOG,
    OP_APPEND,
    OP_DELETE,
    OP_PUT,
    verify_record_file,
)
from ttlstate.checkpoint.record_reader import read_operations
from ttlstate.config.keys import StateVisibility
from ttlstate.config.store_config import TtlConfig
from ttlstate.store.provider import StoreProvider


def _log(p: StoreProvider, version: int) -> tuple[int, list[tuple[int, bytes, bytes | None]]]:
    """(format, [(op, key, user bytes)]) of the changelog of `version`."""
    path = os.path.join(p.checkpoint.directory, f"{version}.changelog")
    header = verify_record_file(path, KIND_CHANGELOG)
    ops = read_operations(path, header)
    return header.format, [(op, k, None if v is None else v[8:]) for op, k, v in ops]


def _batches(p: StoreProvider) -> None:
    s = p.get_store(0)
    s.put(b"a", b"1")
    s.put(b"a", b"2")
    s.remove(b"b")
    s.append(b"c", b"x")
    s.commit()
    s = p.get_store(1)
    s.append(b"a", b"3")  # onto the committed value
    s.append(b"a", b"4")  # onto this batch's append
    s.remove(b"c")
    s.append(b"c", b"y")  # onto a delete
    s.put(b"d", b"5")
    s.commit()


def test_every_write_is_logged_in_order_and_a_restore_folds_them(
        make_provider: Callable[..., StoreProvider]) -> None:
    p = make_provider(snapshot_interval=100, column_families=True)
    _batches(p)
    assert _log(p, 1) == (APPENDS_FORMAT, [(OP_PUT, b"a", b"1"), (OP_PUT, b"a", b"2"),
                                           (OP_DELETE, b"b", None), (OP_APPEND, b"c", b"x")])
    assert _log(p, 2) == (APPENDS_FORMAT, [(OP_APPEND, b"a", b"3"), (OP_APPEND, b"a", b"4"),
                                           (OP_DELETE, b"c", None), (OP_APPEND, b"c", b"y"),
                                           (OP_PUT, b"d", b"5")])
    live = p.get_store(2)
    expected = [(b"a", b"234"), (b"c", b"y"), (b"d", b"5")]
    assert list(live.iterator()) == expected and p.num_keys == 3
    live.abort()
    # From an empty local directory: version 2 built from both changelogs; version 1 built from
    # the first, then version 2 replayed onto it.
    for versions in [(2,), (1, 2)]:
        restored = make_provider(snapshot_interval=100, column_families=True)
        for version in versions:
            state = expected if version == 2 else [(b"a", b"2"), (b"c", b"x")]
            s = restored.get_store(version)
            assert list(s.iterator()) == state and restored.num_keys == len(state)
            s.abort()


def test_a_store_without_families_logs_each_written_key_once_in_the_format_any_ttlstate_reads(
        make_provider: Callable[..., StoreProvider]) -> None:
    p = make_provider(snapshot_interval=100)
    _batches(p)
    fmt, records = _log(p, 2)
    assert fmt == FORMAT_VERSION
    assert sorted(records) == [(OP_PUT, b"a", b"234"), (OP_PUT, b"c", b"y"), (OP_PUT, b"d", b"5")]
    restored = make_provider(snapshot_interval=100)
    s = restored.get_store(2)
    assert list(s.iterator()) == [(b"a", b"234"), (b"c", b"y"), (b"d", b"5")]
    s.abort()


def test_an_append_to_a_value_a_replay_would_not_find_is_logged_whole(
        make_provider: Callable[..., StoreProvider]) -> None:
    """With TTL, under ReturnExpiredIfNotCleanedUp, a read returns an expired value and deletes it:
    an append to what it returned is logged as a put of the whole value (an append would
    apply to the delete before it)."""
    ttl = TtlConfig(ttl_ms=100, visibility=StateVisibility.RETURN_EXPIRED_IF_NOT_CLEANED_UP)
    p = make_provider(ttl=ttl, snapshot_interval=100, column_families=True)
    s = p.get_store(0)
    s.put(b"a", b"1")
    s.commit()
    s = p.get_store(1, now_ms=1200)
    s.append(b"a", b"2")
    s.commit()
    assert _log(p, 2) == (FORMAT_VERSION, [(OP_DELETE, b"a", None), (OP_PUT, b"a", b"12")])
    restored = make_provider(ttl=ttl, snapshot_interval=100, column_families=True)
    s = restored.get_store(2, now_ms=1200)
    assert s.get(b"a") == b"12"
    s.abort()
