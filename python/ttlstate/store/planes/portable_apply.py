"""The portable data plane's writes into its engine, each with the exact change in keys: a
commit's batch (after its changelog is published) and a replayed changelog."""

from __future__ import annotations

from collections.abc import Callable

from ttlstate.checkpoint.changelog_fold import fold
from ttlstate.checkpoint.record_file import Operation, Record
from ttlstate.engine.base import Engine
from ttlstate.store.column_families import is_internal_key
from ttlstate.store.planes.base import KeyChange


def apply_counted(engine: Engine, records: list[Record]) -> KeyChange:
    """Write records to the engine; returns the change in the number of keys (and of internal
    families' keys)."""
    keys = [k for k, _ in records]
    before = dict(zip(keys, engine.multi_get(keys), strict=True))
    final: dict[bytes, bytes | None] = {}
    for k, v in records:
        final[k] = v
    return _write_counted(engine, before, final, records)


def replay_counted(engine: Engine, operations: list[Operation]) -> KeyChange:
    """Apply a changelog's operations to the engine, each key's folded in order (an append onto
    the key's value so far); returns the change in the number of keys (and of internal ones)."""
    keys = list(dict.fromkeys(k for _, k, _ in operations))
    before = dict(zip(keys, engine.multi_get(keys), strict=True))
    final = fold(operations, before)
    return _write_counted(engine, before, final, list(final.items()))


def _write_counted(engine: Engine, before: dict[bytes, bytes | None], final: dict[bytes, bytes | None],
                   records: list[Record]) -> KeyChange:
    delta = internal = 0
    for k, v in final.items():
        change = int(v is not None) - int(before[k] is not None)
        delta += change
        internal += change if change and is_internal_key(k) else 0
    engine.write(records)
    return KeyChange(delta, internal)


class DeferredApply:
    """The portable commit applies its batch after the changelog is published, on the
    committing thread."""

    def __init__(self, apply: Callable[[], KeyChange]) -> None:
        self._apply = apply
        self._started = False

    def result(self) -> KeyChange:
        self._started = True
        return self._apply()

    def known_delta(self) -> KeyChange | None:
        return None  # applied on the committing thread: the commit waits for it anyway

    def detach(self) -> None:
        raise AssertionError("a portable commit never returns before its apply")

    def abandon(self) -> bool:
        return self._started
