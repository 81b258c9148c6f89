"""How a replay applies a changelog's operations: a key's records fold in file order, put ->
its value, delete -> none, append -> the value so far followed by the appended user bytes,
stamped with the append's time. The reference of the native data plane's changelog_fold.h."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from ttlstate.checkpoint.record_file import Operation
from ttlstate.checkpoint.record_format import OP_APPEND
from ttlstate.ttl.ttl_value import TIMESTAMP_SIZE


def apply_append(base: bytes | None, appended: bytes) -> bytes:
    """The TtlValue an append record (`appended`: a TtlValue of the appended user bytes) leaves
    on a key whose TtlValue was `base` (None: absent): base's user bytes, then the appended
    ones, stamped with the append's time."""
    return appended[:TIMESTAMP_SIZE] + (base[TIMESTAMP_SIZE:] if base is not None else b"") + \
        appended[TIMESTAMP_SIZE:]


def fold(operations: Iterable[Operation], before: Mapping[bytes, bytes | None]) -> dict[bytes, bytes | None]:
    """What applying `operations` in order leaves of each key they name (None: deleted), each
    append onto the key's value so far (`before`: the values before the first, for every key)."""
    final: dict[bytes, bytes | None] = {}
    for op, key, value in operations:
        if op == OP_APPEND:
            assert value is not None
            final[key] = apply_append(final[key] if key in final else before[key], value)
        else:
            final[key] = value
    return final
