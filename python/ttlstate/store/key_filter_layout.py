"""How the shim's key filter (jvm-shim's cache/KeyFilter.scala) lays out its first layer: a
restore keeps the bits of exactly that layer of the keys it loaded (restored_keys.py), so the
shim takes them instead of scanning every key back. Defined here, re-exported by the wire
protocol (server/protocol.py), which generates them for the shim; imports nothing, as the
code generator runs without the package's dependencies."""

from __future__ import annotations

KEY_FILTER_PROBES = 7  # bits a key sets in a layer
KEY_FILTER_BITS_PER_KEY = 10  # the first layer's; each further layer has 2 more (at most 20)
KEY_FILTER_MIN_CAPACITY = 16384  # keys; the first layer holds twice the store's, at least this


def first_layer_bits_log2(num_keys: int) -> int:
    """The bits (log2) of the first layer of the shim's filter of a store of `num_keys` keys
    (KeyFilter.sized: twice the keys, at least the minimum capacity, each with BITS_PER_KEY
    bits, rounded up to a power of two); a cross-language test checks the two agree."""
    bits = max(KEY_FILTER_MIN_CAPACITY, 2 * num_keys) * KEY_FILTER_BITS_PER_KEY
    return max(6, (bits - 1).bit_length())
