"""Replaying a changelog file natively (in key-ordered chunks, written through the memtable or
bulk-loaded as an SST file) is the same as applying its records one by one in file order: the
last record of a key wins, and the reported change in the number of keys is exact."""

from __future__ import annotations

import os
import tempfile

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ttlstate.checkpoint.record_file import KIND_CHANGELOG, write_record_file
from ttlstate.config.keys import EngineKind
from ttlstate.engine.select import open_engine

keys = st.binary(min_size=0, max_size=3)
records = st.lists(st.tuples(keys, st.one_of(st.none(), st.binary(max_size=4))), max_size=40)


@pytest.mark.parametrize("ingest_min_keys", [0, 1 << 30], ids=["sst-ingest", "memtable"])
@settings(max_examples=60, deadline=None)
@given(before=st.dictionaries(keys, st.binary(max_size=4), max_size=20), changelog=records)
def test_replay_equals_applying_in_file_order(ingest_min_keys: int, before: dict[bytes, bytes],
                                              changelog: list[tuple[bytes, bytes | None]]) -> None:
    with tempfile.TemporaryDirectory() as d:
        engine = open_engine(EngineKind.NATIVE, os.path.join(d, "db"), None)
        try:
            engine.write(list(before.items()))
            path = os.path.join(d, "1.changelog")
            write_record_file(path, KIND_CHANGELOG, "op=0,part=0,store=default", 1, None, changelog)
            count, delta = engine.apply_changelog_file(  # type: ignore[attr-defined]
                path, ingest_min_keys=ingest_min_keys)
            model = dict(before)
            for key, value in changelog:
                if value is None:
                    model.pop(key, None)
                else:
                    model[key] = value
            assert count == len(changelog)
            assert delta == len(model) - len(before)
            assert dict(engine.iterate()) == model
            assert sorted(os.listdir(d)) == ["1.changelog", "db"]  # no SST file left behind
        finally:
            engine.close()
