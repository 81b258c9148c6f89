"""A worker's block cache keeps shards large enough for a big SST's Bloom filter: RocksDB's
own choice (shards from 512 KiB, up to 64) left a 128 MiB cache 2 MiB shards, and a filter
block larger than its shard was evicted after every lookup (found at 34M keys of state)."""

from __future__ import annotations

import pytest

from ttlstate import _native

MIB = 1 << 20


@pytest.mark.parametrize("mib", [16, 31, 32, 63, 64, 100, 128, 256, 1024, 2048, 4096, 1 << 20])
def test_every_shard_holds_at_least_32_mib_or_there_is_one(mib: int) -> None:
    bits = _native.block_cache_shard_bits(mib * MIB)
    assert 0 <= bits <= 6
    assert bits == 0 or (mib * MIB) >> bits >= 32 * MIB
    if bits < 6:  # no more shards than that rule allows
        assert (mib * MIB) >> (bits + 1) < 32 * MIB


def test_the_default_budget_and_the_benchmarks_smaller_one() -> None:
    assert _native.block_cache_shard_bits(256 * MIB) == 3  # 8 shards of 32 MiB (RocksDB: 64 of 4 MiB)
    assert _native.block_cache_shard_bits(128 * MIB) == 2  # 4 of 32 MiB (RocksDB: 64 of 2 MiB)
