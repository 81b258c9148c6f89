"""One store's metrics as Spark asks for them at each version: the counters the store's parts
accumulated since the last report (Spark sums what each batch reports), the local DB's sizes,
and the version's own TTL counts."""

from __future__ import annotations

from ttlstate.config.keys import EngineKind
from ttlstate.store import metric_names as M
from ttlstate.store.context import StoreContext
from ttlstate.store.in_place import take_sst_reads
from ttlstate.store.local_db import LocalDb
from ttlstate.store.planes.base import StoreMetrics


class MetricsReport:
    def __init__(self, ctx: StoreContext, db: LocalDb) -> None:
        self._ctx = ctx
        self._db = db

    def drain(self) -> dict[str, int]:
        """Every metric: the counters since the last report (then reset), and the DB's sizes."""
        with self._ctx.lock:
            out = {m.name: 0 for m in M.ALL_METRICS}
            out.update(self._ctx.counters)
            self._ctx.counters.clear()
            reads = take_sst_reads(self._db.directory)
            out[M.IN_PLACE_RANGE_READS.name] = reads.in_place
            out[M.IN_PLACE_RANGE_READ_BYTES.name] = reads.in_place_bytes
            out[M.IN_PLACE_LOCAL_READS.name] = reads.local
            out[M.IN_PLACE_LOCAL_READ_BYTES.name] = reads.local_bytes
            engine = self._db.engine_or_none
            if engine is not None:
                sst = engine.disk_bytes()
                out[M.ROCKSDB_SST_FILE_SIZE.name] = sst
                out[M.STATE_BYTES.name] = sst + engine.memtable_bytes()
                fallback = self._ctx.config.engine is EngineKind.AUTO and engine.kind != "native"
                out[M.ENGINE_FALLBACK.name] = int(fallback)
            return out

    def for_version(self, expired_on_read: int, removed_incremental: int, pending_bytes: int
                    ) -> StoreMetrics:
        """A store version's metrics, for either data plane: the store's counters since the
        last report, the version's own, and their TTL total."""
        custom = self.drain()
        custom[M.TTL_EXPIRED_ON_READ.name] = expired_on_read
        custom[M.TTL_REMOVED_INCREMENTAL.name] = removed_incremental
        custom[M.TTL_EXPIRED_TOTAL.name] = (expired_on_read + removed_incremental
                                            + custom.get(M.TTL_REMOVED_BY_FILTER.name, 0))
        custom[M.NUM_REMOVED_STATE_ROWS.name] = custom[M.TTL_EXPIRED_TOTAL.name]
        return StoreMetrics(self.num_rows(custom), self.memory_bytes(pending_bytes), custom)

    def num_rows(self, custom: dict[str, int]) -> int:
        """Spark's `numRowsTotal`: every key, or for a store with column families its user
        families' keys, the internal ones' going into `custom` (as Spark's RocksDB provider
        counts them)."""
        if not self._ctx.column_families:
            return self._db.num_keys
        with self._ctx.lock:
            internal = self._db.counted_internal_keys()
            custom[M.INTERNAL_FAMILY_KEYS.name] = internal
            return self._db.num_keys - internal

    def memory_bytes(self, pending_bytes: int) -> int:
        """Spark's `memoryUsedBytes`, as its RocksDB provider counts it for one store: memtables
        and SST readers outside the block cache, plus the batch's pending writes. The block cache
        is shared by a worker's stores (`memory.maxBytes`), so no store's share of it is counted."""
        with self._ctx.lock:
            engine = self._db.engine_or_none
            if engine is None:
                return pending_bytes
            return engine.memtable_bytes() + engine.table_reader_bytes() + pending_bytes
