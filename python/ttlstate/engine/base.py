"""The engine interface: the few RocksDB operations the store needs, nothing more.

It is small on purpose so that an engine is a thin adapter: `native` (our pybind11 binding
with the TTL compaction filter) and `rocksdict` (pure pip install, no filter) implement it.
Keys and values are opaque bytes; values are TtlValues when TTL is on.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from ttlstate.store.column_families import is_internal_key


@dataclass(frozen=True)
class FilterSettings:
    """What the compaction filter needs; `None` instead of this means no filter."""

    ttl_ms: int
    query_time_after_num_entries: int = 1000
    periodic_compaction_seconds: int = 30 * 86_400
    timestamp_offset: int = 0


class Engine(ABC):
    """One RocksDB instance in one local directory."""

    kind: str = "abstract"
    has_compaction_filter: bool = False
    # True: stores run on the native data plane (NativeEngine's begin/snapshot/ingest...);
    # False: on the Python reference implementation (store/planes/portable.py).
    native_data_plane: bool = False

    @abstractmethod
    def get(self, key: bytes) -> bytes | None: ...

    def multi_get(self, keys: list[bytes]) -> list[bytes | None]:
        return [self.get(k) for k in keys]

    @abstractmethod
    def write(self, batch: Iterable[tuple[bytes, bytes | None]]) -> None:
        """Apply puts (value) and deletes (None) atomically, in order."""

    @abstractmethod
    def iterate(self, lower: bytes | None = None,
                upper: bytes | None = None) -> Iterator[tuple[bytes, bytes]]:
        """Ascending (key, value) in [lower, upper), as of the moment of the call."""

    @abstractmethod
    def compact(self) -> None:
        """Compact the whole key range (runs the compaction filter, if any, on everything)."""

    # True: `checkpoint` works, so snapshots can be the DB's own SST files (sst_manifest.py).
    can_checkpoint: bool = False

    def checkpoint(self, directory: str) -> None:
        """A RocksDB checkpoint of the DB in `directory` (hard links to its SST files)."""
        raise NotImplementedError(f"the {self.kind} engine cannot write RocksDB checkpoints")

    def add_key_hashes(self, hashes: object) -> int:
        """Adds every stored key to the data plane's `hashes` (planes/base.py: KeyHashes);
        returns the number of keys. Only engines whose plane collects key hashes have it."""
        raise NotImplementedError(f"the {self.kind} engine collects no key hashes")

    def warm_metadata(self, threads: int) -> None:
        """Reads every SST file's index and filter blocks into the block cache, `threads` at once
        (after a restore whose files are read remotely). No-op where reads are local anyway."""
        return None

    def set_time(self, now_ms: int) -> None:
        """Tell the compaction filter what time it is (the batch time). No-op without filter."""
        return None

    @abstractmethod
    def disk_bytes(self) -> int:
        """Bytes of the live SST files (what compaction reclaims)."""

    def memtable_bytes(self) -> int:
        """Bytes of the memtables (writes not yet flushed to SST files)."""
        return 0

    def table_reader_bytes(self) -> int:
        """Memory of open SST readers outside the block cache (index and filter blocks)."""
        return 0

    def count_keys(self) -> int:
        return sum(1 for _ in self.iterate())

    def count_key_kinds(self) -> tuple[int, int]:
        """By a scan: (keys, of them the keys of internal column families (is_internal_key))."""
        keys = internal = 0
        for key, _value in self.iterate():
            keys += 1
            internal += is_internal_key(key)
        return keys, internal

    def metrics(self) -> dict[str, int]:
        """Engine counters; the native engine reports its compaction filter's here."""
        return {}

    @abstractmethod
    def close(self) -> None: ...

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
