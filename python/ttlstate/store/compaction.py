"""The compaction filter's upkeep after each commit: `compactEvery` compactions, and recounting
the store's keys when the filter removed some.

The filter deletes expired entries inside RocksDB, behind the store's back, so the key count
the store keeps (Spark's `numRowsTotal`) is only exact after a recount once it did; the engine
reports how many entries it removed, and the store compares that with what it counted.
"""

from __future__ import annotations

from collections import Counter

from ttlstate.config.store_config import TtlConfig
from ttlstate.engine.base import Engine
from ttlstate.store import metric_names as M

_REMOVED = "filter_removed"  # the engine's counter of entries its compaction filter removed


class FilterUpkeep:
    """One local DB's: `reset` whenever a new engine is opened."""

    def __init__(self, counters: Counter[str]) -> None:
        self._counters = counters
        self._counted = 0

    def reset(self, engine: Engine) -> None:
        self._counted = engine.metrics().get(_REMOVED, 0)

    @staticmethod
    def compaction_due(engine: Engine, ttl: TtlConfig, version: int) -> bool:
        cf = ttl.compaction_filter
        return (ttl.enabled and cf is not None and cf.compact_every_commits > 0
                and engine.has_compaction_filter and version % cf.compact_every_commits == 0)

    def uncounted(self, engine: Engine) -> bool:
        """Whether the filter removed entries since the last count."""
        return engine.metrics().get(_REMOVED, 0) != self._counted

    def after_apply(self, engine: Engine, ttl: TtlConfig, version: int) -> tuple[int, int] | None:
        """What follows a commit's apply: `compactEvery`'s full compaction (the filter over
        everything, memtable included) when due; then the store's key count (all, internal
        column families') if the filter removed entries (None: unchanged)."""
        if self.compaction_due(engine, ttl, version):
            engine.compact()
        removed = engine.metrics().get(_REMOVED, 0)
        if removed == self._counted:
            return None
        self._counters[M.TTL_REMOVED_BY_FILTER.name] += removed - self._counted
        self._counted = removed
        return engine.count_key_kinds()
