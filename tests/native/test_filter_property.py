"""After a full compaction, survivors are exactly the entries Flink's rule calls unexpired."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ttlstate import _native as N
from ttlstate.ttl.expiry import is_expired

INT64 = st.integers(-(2**63), 2**63 - 1)


@settings(max_examples=40, deadline=None)
@given(entries=st.dictionaries(st.binary(min_size=1, max_size=12), st.tuples(INT64, st.binary(max_size=20)),
                               max_size=60),
       ttl=st.integers(1, 2**63 - 1), now=INT64)
def test_survivors_match_the_python_model(tmp_path_factory: pytest.TempPathFactory, entries: dict,
                                          ttl: int, now: int) -> None:
    db = N.DB(str(tmp_path_factory.mktemp("db")), ttl=ttl, query_time_after_num_entries=1)
    db.write([(k, struct.pack(">q", t) + v) for k, (t, v) in entries.items()])
    db.set_time(now)
    db.compact()
    it = db.iterator()
    survivors: dict[bytes, bytes] = {}
    while chunk := it.next_chunk(1 << 16):
        survivors.update(chunk)
    expected = {k: struct.pack(">q", t) + v for k, (t, v) in entries.items() if not is_expired(t, ttl, now)}
    db.close()
    assert survivors == expected
