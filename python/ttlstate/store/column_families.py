"""The key layout of a store's column families (transformWithState's stores have them: one per
state variable, and Spark's internal ones for timers, TTL indexes and list metadata).

A family's keys are stored behind its name, `[u16 big-endian name length][UTF-8 name]` (the
widths, defined here, are protocol constants, generated for the shim's `KeyCodec.InFamily`), then the key as
the family encodes it. No prefix of one name starts another's, so each family is one contiguous
run of the store's ordered keys: the changelogs, both snapshot layouts and the repair of damaged
files hold families as they hold any key, and a family exists in a version while it holds one."""

from __future__ import annotations

FAMILY_NAME_LENGTH_BYTES = 2  # the width of a family name's length (part of the wire protocol)
FAMILY_NAME_MAX_BYTES = (1 << (8 * FAMILY_NAME_LENGTH_BYTES)) - 1
# The first byte of an internal family's name (Spark's timers, TTL indexes, list metadata:
# `$timers_...`, `$ttl_...`, `$count_...`). The store counts the keys whose byte after the name's
# length is this one apart (native: key_kind.h), so that a store with column families reports
# its user and internal families' keys apart, as Spark's RocksDB provider does.
INTERNAL_FAMILY_MARKER = ord("$")


def family_prefix(name: str) -> bytes:
    """What every stored key of the family `name` starts with."""
    utf8 = name.encode("utf-8")
    if len(utf8) > FAMILY_NAME_MAX_BYTES:
        raise ValueError(f"column family name of {len(utf8)} bytes: at most {FAMILY_NAME_MAX_BYTES}")
    return len(utf8).to_bytes(FAMILY_NAME_LENGTH_BYTES, "big") + utf8


def split_key(stored: bytes) -> tuple[str, bytes]:
    """The family name of a stored key and the family's own key bytes after it."""
    if len(stored) < FAMILY_NAME_LENGTH_BYTES:
        raise ValueError(f"a key of {len(stored)} bytes holds no column family name")
    length = int.from_bytes(stored[:FAMILY_NAME_LENGTH_BYTES], "big")
    end = FAMILY_NAME_LENGTH_BYTES + length
    if len(stored) < end:
        raise ValueError(f"a key of {len(stored)} bytes names a column family of {length} bytes")
    return stored[FAMILY_NAME_LENGTH_BYTES:end].decode("utf-8"), stored[end:]


def is_internal_key(stored: bytes) -> bool:
    """Whether `stored`, a key of a store with column families, is one of an internal family."""
    return (len(stored) > FAMILY_NAME_LENGTH_BYTES
            and stored[FAMILY_NAME_LENGTH_BYTES] == INTERNAL_FAMILY_MARKER)


def family_counts(keys: list[bytes]) -> dict[str, int]:
    """How many of `keys` (stored keys of a store with column families) each family holds."""
    counts: dict[str, int] = {}
    for key in keys:
        name = split_key(key)[0]
        counts[name] = counts.get(name, 0) + 1
    return counts
