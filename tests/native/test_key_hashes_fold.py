"""Kept key hashes settled on one filter layer give that layer and every smaller one exactly as
the hash pairs did (the pairs' bits are checked against the shim's filter in the Spark tier:
tests/spark/test_key_filter.py)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ttlstate import _native as N


@settings(max_examples=60, deadline=None)
@given(keys=st.lists(st.binary(max_size=40), max_size=400), split=st.integers(0, 400),
       settled_log2=st.integers(6, 14), probes=st.integers(1, 9))
def test_a_settled_layer_folds_to_the_bits_the_pairs_give(keys: list[bytes], split: int, settled_log2: int,
                                                         probes: int) -> None:
    """Keys added before `settle` (converted) and after it (set directly), every layer from 2^6
    bits (one word, smaller than a 512-bit block) to the settled one."""
    pairs, settled = N.KeyHashes(), N.KeyHashes()
    for i, k in enumerate(keys):
        if i == split:
            settled.settle(settled_log2, probes)
        pairs.add(k)
        settled.add(k)
    settled.settle(settled_log2, probes)  # again, the same layer: nothing changes
    assert len(settled) == len(pairs) == len(keys)
    for log2 in range(6, settled_log2 + 1):
        assert settled.bloom_words(log2, probes) == pairs.bloom_words(log2, probes), log2


def test_a_settled_layer_refuses_a_larger_one_or_other_probes() -> None:
    h = N.KeyHashes()
    h.add(b"k")
    h.settle(10, 7)
    assert len(h.bloom_words(10, 7)) == 128
    with pytest.raises(ValueError, match="settled on a layer of 2\\^10 bits and 7 probes"):
        h.bloom_words(11, 7)
    with pytest.raises(ValueError, match="no layer of 2\\^10 bits and 3 probes"):
        h.bloom_words(10, 3)
    with pytest.raises(ValueError, match="already settled on another layer"):
        h.settle(12, 7)
    with pytest.raises(ValueError, match="allowed 2\\^6..2\\^36 bits"):
        N.KeyHashes().settle(5, 7)

