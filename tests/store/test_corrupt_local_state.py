"""A local SST file RocksDB finds corrupt in a batch's reads (the local disk damaged it): the
batch fails with RocksDB's error, and the next load restores from the checkpoint instead of
reading the damage again (native/include/ttlstate/corruptions.h, SstSnapshots.corruption_found)."""

from __future__ import annotations

import os
from collections.abc import Callable

import pytest
from tests.store.test_local_cache import commit, expected, number, state

from ttlstate.store.local_cache import local_sst_bytes
from ttlstate.store.provider import StoreProvider


def test_a_corrupt_local_file_fails_the_batch_and_the_retry_restores(
        make_sst_provider: Callable[..., StoreProvider], caplog: pytest.LogCaptureFixture) -> None:
    p = make_sst_provider(snapshot_interval=1)
    for v in range(3):  # a flush each, nothing read: no data block is cached
        commit(p, v)
    newest = max(local_sst_bytes(p.db_dir), key=number)
    path = os.path.join(p.db_dir, newest)
    with open(path, "r+b") as out:
        out.seek(1000)
        out.write(bytes(4000))
    with pytest.raises(RuntimeError, match="Corruption"):
        state(p, 3)
    assert state(p, 3) == expected(3)  # restored: the checkpoint's copy is whole
    assert f"RocksDB found {path} corrupt" in caplog.text and "restored from the checkpoint" in caplog.text
    assert not p.sst.damaged  # the copy was not blamed
    commit(p, 3)
    assert state(p, 4) == expected(4)
