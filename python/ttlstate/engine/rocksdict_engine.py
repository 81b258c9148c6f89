"""The portable engine: RocksDB through rocksdict (a pip wheel), without a compaction filter.

rocksdict cannot host a compaction filter (its bindings expose none and hide RocksDB's
symbols), so with this engine expired entries leave the disk only through on-read,
incremental and full-snapshot cleanup.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator

from rocksdict import Options, Rdict, RdictIter, ReadOptions, WriteBatch, WriteOptions

from ttlstate.engine.base import Engine


def _options() -> Options:
    opts = Options(raw_mode=True)
    opts.create_if_missing(True)
    opts.set_max_background_jobs(2)
    return opts


class RocksdictEngine(Engine):
    kind = "rocksdict"
    has_compaction_filter = False

    def __init__(self, path: str) -> None:
        os.makedirs(path, exist_ok=True)
        self._path = path
        self._db = Rdict(path, options=_options())
        # The local DB is a cache rebuilt from the checkpoint, so the WAL buys nothing.
        wo = WriteOptions()
        wo.disable_wal = True  # type: ignore[method-assign, assignment]  # a property; the stub says method
        self._db.set_write_options(wo)

    def get(self, key: bytes) -> bytes | None:
        return self._db.get(key)

    def multi_get(self, keys: list[bytes]) -> list[bytes | None]:
        # rocksdict's stub: a key list of any key type (a list is invariant), any value type
        return self._db.get(keys) if keys else []  # type: ignore[arg-type, return-value]

    def write(self, batch: Iterable[tuple[bytes, bytes | None]]) -> None:
        wb = WriteBatch(raw_mode=True)
        for key, value in batch:
            if value is None:
                wb.delete(key)
            else:
                wb.put(key, value)
        self._db.write(wb)

    def iterate(self, lower: bytes | None = None,
                upper: bytes | None = None) -> Iterator[tuple[bytes, bytes]]:
        # Bounds are applied here, not through rocksdict's ReadOptions: those are encoded
        # with its non-raw key encoding and cut ranges short (found by the model test).
        it = self._db.iter(ReadOptions())  # created now: the view is fixed at the call
        if lower:
            it.seek(lower)
        else:
            it.seek_to_first()
        return _entries(it, upper)

    def compact(self) -> None:
        self._db.compact_range(None, None)

    def memtable_bytes(self) -> int:
        return int(self._db.property_int_value("rocksdb.size-all-mem-tables") or 0)

    def table_reader_bytes(self) -> int:
        return int(self._db.property_int_value("rocksdb.estimate-table-readers-mem") or 0)

    def disk_bytes(self) -> int:
        return int(self._db.property_int_value("rocksdb.live-sst-files-size") or 0)

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None  # type: ignore[assignment]


def _entries(it: RdictIter, upper: bytes | None) -> Iterator[tuple[bytes, bytes]]:
    while it.valid():
        key = it.key()
        if upper is not None and key >= upper:
            return
        yield key, it.value()
        it.next()
