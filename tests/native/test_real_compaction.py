"""Real RocksDB compactions with the filter: what survives, byte for byte."""

from __future__ import annotations

import struct

from ttlstate import _native as N

TTL = 1000
T = 1_000_000


def ts(t: int) -> bytes:
    return struct.pack(">q", t)


def var(*items: tuple[int, bytes]) -> bytes:
    return b"".join(struct.pack(">I", 8 + len(p)) + ts(t) + p for t, p in items)


def raw_items(db: N.DB) -> dict[bytes, bytes]:
    it = db.iterator()
    out: dict[bytes, bytes] = {}
    while chunk := it.next_chunk(1 << 16):
        out.update(chunk)
    return out


def test_values_expire_only_after_the_ttl(tmp_path) -> None:  # noqa: ANN001
    db = N.DB(str(tmp_path / "db"), ttl=TTL, query_time_after_num_entries=1)
    old = {b"old%03d" % i: ts(T) + b"payload%d" % i for i in range(200)}
    new = {b"new%03d" % i: ts(T + 5 * TTL) + b"fresh%d" % i for i in range(50)}
    db.write(list(old.items()) + list(new.items()))
    db.set_time(T)
    db.compact()
    assert raw_items(db) == {**old, **new}
    assert db.filter_metrics()["filter_removed"] == 0

    db.set_time(T + TTL)  # old entries reach their expiration timestamp
    db.compact()
    assert raw_items(db) == new  # live entries byte-identical
    m = db.filter_metrics()
    assert m["filter_removed"] == len(old) and m["filter_entries_seen"] >= len(old) + len(new)
    assert db.count_keys() == len(new)
    db.close()


def test_lists_are_rewritten_to_their_live_suffix(tmp_path) -> None:  # noqa: ANN001
    db = N.DB(str(tmp_path / "db"), ttl=TTL, state_type=N.STATE_LIST, timestamp_offset=4,
              variable_length_list=True, query_time_after_num_entries=1)
    db.write([(b"all-old", var((T, b"a"), (T, b"bb")))])
    db.merge(b"half", var((T, b"old-1")))
    db.merge(b"half", var((T, b"old-2")))
    db.merge(b"half", var((T + 5 * TTL, b"live-1")))
    db.merge(b"live", var((T + 5 * TTL, b"x")))
    db.merge(b"live", var((T, b"expired-but-after-a-live-one")))
    db.set_time(T)
    db.compact()
    before = raw_items(db)
    assert before[b"half"] == var((T, b"old-1"), (T, b"old-2"), (T + 5 * TTL, b"live-1"))
    db.set_time(T + TTL)
    db.compact()
    after = raw_items(db)
    assert b"all-old" not in after
    assert after[b"half"] == var((T + 5 * TTL, b"live-1"))
    assert after[b"live"] == before[b"live"]  # prefix-only cleanup
    assert db.filter_metrics()["filter_rewritten"] >= 1
    db.close()


def test_no_filter_without_ttl(tmp_path) -> None:  # noqa: ANN001
    db = N.DB(str(tmp_path / "db"))
    assert not db.has_filter
    db.write([(b"k", ts(0) + b"v")])
    db.set_time(2**62)
    db.compact()
    assert raw_items(db) == {b"k": ts(0) + b"v"}
    db.close()
