"""The portable data plane: the Python reference implementation (any engine; rocksdict's only).

One version of one store, as a task sees it: reads, buffered writes, commit or abort.

Uncommitted writes live in an overlay dict (key -> stored value, or None for a delete), so
`abort()` leaves no trace and commit applies them as one atomic write batch. Reads see the
overlay first, then the engine. TTL is applied on every read path (Flink's
`getWrappedWithTtlCheckAndUpdate`): an expired entry is deleted in this write store and
returned only under ReturnExpiredIfNotCleanedUp; an unexpired one is refreshed by point reads
under OnReadAndWrite. Iteration hides and deletes expired entries but never refreshes them:
in Spark, iteration is the operator's own eviction or timeout scan, not a user access, and
refreshing there would keep every key alive forever.
"""

from __future__ import annotations

import heapq
import threading
from collections.abc import Callable, Iterable, Iterator

from ttlstate.checkpoint.record_file import (
    KIND_CHANGELOG,
    KIND_SNAPSHOT,
    OP_APPEND,
    OP_DELETE,
    OP_PUT,
    Operation,
    RecordFileError,
    RecordFileHeader,
    write_operations,
    write_records,
)
from ttlstate.checkpoint.record_reader import read_operations, read_records
from ttlstate.config.store_config import TtlConfig
from ttlstate.engine.base import Engine
from ttlstate.errors import StoreStateError
from ttlstate.store.column_families import is_internal_key
from ttlstate.store.planes.base import (
    Built,
    DataPlane,
    Fetched,
    KeyChange,
    KeyHashes,
    StoreMetrics,
    VersionContext,
    prefix_upper_bound,
)
from ttlstate.store.planes.portable_apply import DeferredApply, apply_counted, replay_counted
from ttlstate.ttl import ttl_value
from ttlstate.ttl.expiry import is_expired

_MISSING = object()
_APPLY_CHUNK = 10_000


class PortablePlane(DataPlane):
    """`lock`: the store's; a snapshot is written under it (the engine has no pinned views)."""

    def __init__(self, lock: threading.RLock) -> None:
        self._lock = lock
        self.cursor: bytes | None = None  # incremental cleanup's, across versions and reloads

    def begin(self, ctx: VersionContext, engine: Engine, version: int, now_ms: int,
              writable: bool, stamp: int) -> PortableVersion:
        return PortableVersion(ctx, self, version, now_ms, writable, stamp)

    def key_hashes(self) -> KeyHashes | None:
        return None

    def build(self, engine: Engine, fetched: list[Fetched], staging_sst: str,
              collecting: KeyHashes | None, fail: Callable[[str, str], Exception]) -> Built:
        """Only the snapshot, written in chunks; the changelogs are replayed one by one."""
        if not fetched or fetched[0][2].kind != KIND_SNAPSHOT:
            return Built([], fetched, KeyChange(0, 0))
        name, local_path, header = fetched[0]
        internal = 0
        try:
            batch: list[tuple[bytes, bytes | None]] = []
            for record in read_records(local_path, header):
                batch.append(record)
                internal += is_internal_key(record[0])
                if len(batch) >= _APPLY_CHUNK:
                    engine.write(batch)
                    batch.clear()
            engine.write(batch)
        except RecordFileError as e:
            raise fail(name, str(e)) from None
        return Built([fetched[0]], fetched[1:], KeyChange(header.record_count, internal))

    def replay_changelog(self, engine: Engine, local_path: str, header: RecordFileHeader,
                         collecting: KeyHashes | None, count_keys: bool = True) -> KeyChange:
        return replay_counted(engine, list(read_operations(local_path, header)))

    def snapshot_view(self, engine: Engine, ttl: TtlConfig) -> _LockedView:
        return _LockedView(engine, self._lock)

    def close(self) -> None:
        return None  # versions check the store's stamp, which closing moves on


class _LockedView:
    """The engine's entries as they are while it is open: the engine pins no views, so the view
    holds the store's (re-entrant) lock from its creation, under the store's lock, to its
    close, and nothing changes the DB while the snapshot is written."""

    def __init__(self, engine: Engine, lock: threading.RLock) -> None:
        self._engine = engine
        self._lock: threading.RLock | None = lock
        lock.acquire()

    def write(self, path: str, header: bytes, drop_expired: bool, ttl_ms: int, now_ms: int) -> int:
        dropped = 0

        def entries() -> Iterable[tuple[bytes, bytes | None]]:
            nonlocal dropped
            for key, raw in self._engine.iterate():
                if drop_expired and is_expired(ttl_value.timestamp(raw), ttl_ms, now_ms):
                    dropped += 1
                    continue
                yield key, raw

        write_records(path, KIND_SNAPSHOT, header, entries())
        return dropped

    def close(self) -> None:
        if self._lock is not None:
            self._lock.release()
            self._lock = None


class PortableVersion:
    def __init__(self, ctx: VersionContext, plane: PortablePlane, version: int, now_ms: int,
                 writable: bool, stamp: int) -> None:
        self._ctx = ctx
        self._plane = plane
        self.version = version
        self.now_ms = now_ms
        self.writable = writable
        self._stamp = stamp
        self._pending: dict[bytes, bytes | None] = {}
        self._pending_bytes = 0
        # Every write in order, when the changelog logs operations (a store with column families).
        self._log: list[Operation] | None = [] if ctx.log_operations else None
        self._state = "open"
        self.expired_on_read = 0
        self.removed_incremental = 0
        ttl = ctx.ttl
        self._ttl_ms = ttl.ttl_ms
        self._return_expired = ttl.return_expired
        self._refresh_on_read = ttl.update_on_read
        self._per_record_cleanup = ttl.enabled and ttl.incremental is not None and ttl.incremental.per_record

    # -- lifecycle -------------------------------------------------------------------------
    @property
    def has_committed(self) -> bool:
        return self._state == "committed"

    def _check_open(self) -> None:
        if self._state != "open":
            raise StoreStateError(f"ttlstate store {self._ctx.store_id} version {self.version} is "
                                  f"{self._state}; no further operations are allowed")
        if self._stamp != self._ctx.stamp():
            raise StoreStateError(f"ttlstate store {self._ctx.store_id} version {self.version}: this "
                                  "handle was superseded by a later get_store (or the provider closed)")

    def _check_writable(self) -> None:
        self._check_open()
        if not self.writable:
            raise StoreStateError(f"ttlstate store {self._ctx.store_id} version {self.version} is read-only")

    def make_writable(self) -> None:
        self._check_open()
        self.writable = True

    def commit(self) -> int:
        self._check_writable()
        new_version = self._ctx.commit(self)
        self._state = "committed"
        return new_version

    def abort(self) -> None:
        """Drop uncommitted writes. Idempotent; a no-op after commit or on a superseded handle."""
        if self._state == "open":
            self._pending.clear()
            self._log = None if self._log is None else []
            self._state = "aborted"

    def release(self) -> None:
        """End a read-only use. Idempotent."""
        if self._state == "open":
            self._pending.clear()
            self._state = "released"

    @property
    def pending(self) -> dict[bytes, bytes | None]:
        return self._pending

    # -- writes ----------------------------------------------------------------------------
    def _write(self, key: bytes, stored: bytes | None, logged: Operation | None = None) -> None:
        """`logged`: what the operation log records instead of this put (an append)."""
        self._pending[key] = stored
        self._pending_bytes += len(key) + (len(stored) if stored is not None else 0)
        if self._log is not None:
            self._log.append(logged or ((OP_DELETE, key, None) if stored is None else (OP_PUT, key, stored)))

    def put(self, key: bytes, value: bytes) -> None:
        self._check_writable()
        if value is None:
            raise ValueError("Cannot put a null value")
        if self._per_record_cleanup:
            self.incremental_step()
        self._write(bytes(key), ttl_value.encode(self.now_ms, bytes(value)))

    def append(self, key: bytes, more: bytes) -> None:
        key, more = bytes(key), bytes(more)
        current = self.get(key)
        self._check_writable()
        if self._per_record_cleanup:
            self.incremental_step()
        stored = ttl_value.encode(self.now_ms, (current or b"") + more)
        logged = (OP_APPEND, key, ttl_value.encode(self.now_ms, more)) \
            if self._log is not None and self._replay_finds(key, current) else None
        self._write(key, stored, logged)

    def _replay_finds(self, key: bytes, current: bytes | None) -> bool:
        """Whether a replay of the operation log finds `current` (None: empty) as the key's value:
        it reads the key's last logged put or delete, else the committed DB (with TTL, the live
        DB may have dropped an expired entry a replay finds: only a whole value is safe then)."""
        if key not in self._pending:
            return self._ttl_ms is None
        raw = self._pending[key]
        return (b"" if raw is None else raw[ttl_value.TIMESTAMP_SIZE:]) == (current or b"")

    def put_entry(self, key: bytes, stored: bytes) -> None:
        self._check_writable()
        self._write(bytes(key), ttl_value.encode(*ttl_value.decode(bytes(stored))))

    def remove(self, key: bytes) -> None:
        self._check_writable()
        if self._per_record_cleanup:
            self.incremental_step()
        self._write(bytes(key), None)

    def delete_expired(self, key: bytes) -> None:
        """Incremental cleanup's delete: counted apart from user removes."""
        self._write(key, None)
        self.removed_incremental += 1

    # -- reads -----------------------------------------------------------------------------
    def _raw(self, key: bytes) -> bytes | None:
        raw = self._pending.get(key, _MISSING)
        return self._ctx.engine().get(key) if raw is _MISSING else raw  # type: ignore[return-value]

    def _visible(self, key: bytes, raw: bytes, refresh: bool) -> bytes | None:
        """Apply TTL to a stored value: the user bytes, or None if hidden as expired."""
        if self._ttl_ms is None:
            return raw[ttl_value.TIMESTAMP_SIZE:]
        ts = ttl_value.timestamp(raw)
        if is_expired(ts, self._ttl_ms, self.now_ms):
            self.expired_on_read += 1
            if self.writable:
                self._write(key, None)
            return raw[ttl_value.TIMESTAMP_SIZE:] if self._return_expired else None
        if refresh and self._refresh_on_read and self.writable and ts != self.now_ms:
            self._write(key, ttl_value.with_timestamp(raw, self.now_ms))
        return raw[ttl_value.TIMESTAMP_SIZE:]

    def get(self, key: bytes) -> bytes | None:
        return self.get_entry(key)[0]

    def get_entry(self, key: bytes) -> tuple[bytes | None, int]:
        """`get`, and the entry's last-access timestamp after the read (0 if absent): what the
        shim's cross-batch cache keeps to apply TTL itself in later batches."""
        self._check_open()
        if self._per_record_cleanup and self.writable:
            self.incremental_step()
        key = bytes(key)
        raw = self._raw(key)
        if raw is None:
            return None, 0
        value = self._visible(key, raw, refresh=True)
        if value is None:
            return None, 0
        stored = self._pending.get(key, raw) or raw
        return value, ttl_value.timestamp(stored)

    def remove_if_expired(self, key: bytes) -> None:
        """The shim's cache found `key` expired: delete it if it is stored and expired now,
        counted as expired on read (as a read here would have done)."""
        self._check_writable()
        key = bytes(key)
        if key in self._pending or self._ttl_ms is None:
            return
        raw = self._ctx.engine().get(key)
        if raw is not None and is_expired(ttl_value.timestamp(raw), self._ttl_ms, self.now_ms):
            self.expired_on_read += 1
            self._write(key, None)

    def key_exists(self, key: bytes) -> bool:
        return self.get(key) is not None

    def multi_get(self, keys: list[bytes]) -> list[bytes | None]:
        self._check_open()
        if self._per_record_cleanup and self.writable:
            self.incremental_step()
        keys = [bytes(k) for k in keys]
        missing = [k for k in keys if k not in self._pending]
        from_db = dict(zip(missing, self._ctx.engine().multi_get(missing), strict=True))
        out: list[bytes | None] = []
        for k in keys:
            raw = self._pending[k] if k in self._pending else from_db[k]
            out.append(None if raw is None else self._visible(k, raw, refresh=True))
        return out

    def iterator(self) -> Iterator[tuple[bytes, bytes]]:
        return self._scan(None, None)

    def prefix_scan(self, prefix: bytes) -> Iterator[tuple[bytes, bytes]]:
        prefix = bytes(prefix)
        return self._scan(prefix, prefix_upper_bound(prefix))

    def _scan(self, lower: bytes | None, upper: bytes | None) -> Iterator[tuple[bytes, bytes]]:
        """Merge a copy of the overlay with a point-in-time engine iterator.

        Both sides are fixed when the scan starts, so puts and removes made while iterating
        (Spark's eviction does this) cannot disturb it."""
        self._check_open()
        overlay = sorted(
            (k, v) for k, v in self._pending.items()
            if (lower is None or k >= lower) and (upper is None or k < upper))
        db = self._ctx.engine().iterate(lower, upper)
        return self._visible_entries(_merge(overlay, db))

    def _visible_entries(self, entries: Iterator[tuple[bytes, bytes | None]]
                         ) -> Iterator[tuple[bytes, bytes]]:
        for key, raw in entries:
            if raw is None:
                continue
            value = self._visible(key, raw, refresh=False)
            if value is not None:
                yield key, value

    def supersede(self) -> None:
        return None  # the store's stamp moved on: `_check_open` refuses from now on

    def advance_now(self, now_ms: int) -> int:
        self.now_ms = max(int(self.now_ms), int(now_ms))
        return self.now_ms

    def serve_on(self, connection: object, handle: int) -> None:
        return None  # the Python loop serves this version's requests

    # -- commit (the data-plane half; the committer holds the store's lock) -----------------
    def incremental_step(self) -> None:
        """Check the next `size` committed entries after the cursor; delete the expired ones."""
        ttl = self._ctx.ttl
        if ttl.ttl_ms is None or ttl.incremental is None or not self.writable:
            return
        checked = 0
        last: bytes | None = None
        for key, raw in self._ctx.engine().iterate(self._plane.cursor, None):
            checked += 1
            last = key
            if key not in self._pending and is_expired(ttl_value.timestamp(raw), ttl.ttl_ms,
                                                        self.now_ms):
                self.delete_expired(key)
            if checked >= ttl.incremental.size:
                break
        if last is None or checked < ttl.incremental.size:
            self._plane.cursor = None  # reached the end: wrap around
        else:
            self._plane.cursor = last + b"\x00"

    def write_changelog(self, path: str, header: bytes) -> None:
        if self._log is not None:
            write_operations(path, KIND_CHANGELOG, header, self._log)
        else:
            write_records(path, KIND_CHANGELOG, header, list(self._pending.items()))

    def start_apply(self, sst_path: str) -> DeferredApply:
        records = list(self._pending.items())
        return DeferredApply(lambda: apply_counted(self._ctx.engine(), records))

    # -- metrics ---------------------------------------------------------------------------
    def metrics(self) -> StoreMetrics:
        return self._ctx.metrics(self.expired_on_read, self.removed_incremental, self._pending_bytes)


def _merge(overlay: list[tuple[bytes, bytes | None]],
           db: Iterator[tuple[bytes, bytes]]) -> Iterator[tuple[bytes, bytes | None]]:
    """Sorted union by key; on equal keys the overlay (newer) wins."""
    tagged_overlay = ((k, 0, v) for k, v in overlay)
    tagged_db = ((k, 1, v) for k, v in db)
    last: bytes | None = None
    for key, _src, value in heapq.merge(tagged_overlay, tagged_db, key=lambda t: (t[0], t[1])):
        if key == last:
            continue
        last = key
        yield key, value
