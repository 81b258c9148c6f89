"""The native data plane: a store version's per-entry work in C++ (native/src/txn.cpp).

Same contract and TTL semantics as the Python reference (`portable.py`); the pending writes,
the TTL checks on every read path, scans, incremental cleanup and the commit's changelog and
apply all run natively. The state server binds a version's transaction to the shim's
connection (`serve_on`), so the shim's per-entry requests never reach Python; `NativeVersion`
is what the control plane and embedded users (and the model tests) call.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from typing import cast

from ttlstate import _native
from ttlstate.checkpoint.record_file import KIND_SNAPSHOT, RecordFileError, RecordFileHeader
from ttlstate.config.store_config import TtlConfig
from ttlstate.engine.base import Engine
from ttlstate.engine.native_engine import NativeEngine
from ttlstate.errors import StoreStateError
from ttlstate.store.planes import free_memory
from ttlstate.store.planes.base import (
    NO_CHANGE,
    Built,
    DataPlane,
    Fetched,
    KeyChange,
    KeyHashes,
    StoreMetrics,
    VersionContext,
    prefix_upper_bound,
)

_SCAN_CHUNK = 1 << 16
# A restore from nothing gathers the changelogs after the snapshot in memory while they take
# less than this; the files after that are replayed onto the built DB one by one.
_RESTORE_GATHER_BYTES = 128 << 20


def _native_engine(engine: Engine) -> NativeEngine:
    if not isinstance(engine, NativeEngine):  # planes/select.py pairs each plane with its engine
        raise TypeError(f"the native data plane needs the native engine, not {engine.kind}")
    return engine


def _own_hashes(hashes: KeyHashes | None) -> _native.KeyHashes | None:
    if hashes is not None and not isinstance(hashes, _native.KeyHashes):  # key_hashes() made them
        raise TypeError(f"the native data plane collects key hashes itself, not {type(hashes).__name__}")
    return hashes


class NativePlane(DataPlane):
    def __init__(self) -> None:
        self._cursor = _native.CleanupCursor()  # incremental cleanup's, across versions and reloads
        self._current: NativeVersion | None = None

    def begin(self, ctx: VersionContext, engine: Engine, version: int, now_ms: int,
              writable: bool, stamp: int) -> NativeVersion:
        if self._current is not None:
            self._current.supersede()
        txn = _native_engine(engine).begin(ctx.store_id, version, now_ms, writable, ctx.ttl,
                                           self._cursor, ctx.log_operations)
        self._current = NativeVersion(ctx, txn)
        return self._current

    def key_hashes(self) -> _native.KeyHashes:
        return _native.KeyHashes()

    def build(self, engine: Engine, fetched: list[Fetched], staging_sst: str,
              collecting: KeyHashes | None, fail: Callable[[str, str], Exception]) -> Built:
        """The snapshot (if any) and the changelogs after it that fit `_RESTORE_GATHER_BYTES`
        in memory, as one SST file."""
        builder = _native_engine(engine).restore_builder()
        snapshot = fetched[0] if fetched[0][2].kind == KIND_SNAPSHOT else None
        changelogs = fetched[1:] if snapshot else fetched
        gathered = 0
        for name, local_path, _header in changelogs:
            if builder.gathered_bytes >= _RESTORE_GATHER_BYTES:
                break
            try:
                builder.add_changelog(local_path)
            except RuntimeError as e:
                raise fail(name, str(e)) from None
            gathered += 1
        used = ([snapshot] if snapshot else []) + changelogs[:gathered]
        if not used:
            return Built([], changelogs, NO_CHANGE)
        blamed = used[0][0] if snapshot else used[-1][0]  # what a failure to build is about
        try:
            snapshot_records, keys, internal = builder.finish(snapshot[1] if snapshot else "", staging_sst,
                                                    _own_hashes(collecting))
        except RuntimeError as e:
            raise fail(blamed, str(e)) from None
        finally:
            if os.path.exists(staging_sst):  # moved into the DB, unless empty or failed
                os.unlink(staging_sst)
            del builder  # what it gathered is freed now
            free_memory.batch_ended()
        if snapshot and snapshot_records != snapshot[2].record_count:
            raise fail(snapshot[0], f"is corrupt ({snapshot_records} records, footer says "
                                    f"{snapshot[2].record_count})")
        return Built(used, changelogs[gathered:], KeyChange(keys, internal))

    def replay_changelog(self, engine: Engine, local_path: str, header: RecordFileHeader,
                         collecting: KeyHashes | None, count_keys: bool = True) -> KeyChange:
        try:
            _count, delta, internal = _native_engine(engine).apply_changelog_file(
                local_path, _own_hashes(collecting), count_keys=count_keys)
        except RuntimeError as e:
            raise RecordFileError(str(e)) from None
        finally:
            free_memory.batch_ended()
        return KeyChange(delta, internal)

    def snapshot_view(self, engine: Engine, ttl: TtlConfig) -> _PinnedView:
        return _PinnedView(_native_engine(engine).snapshot())

    def close(self) -> None:
        if self._current is not None:
            self._current.txn.end("closed")


class _PinnedView:
    """A pinned RocksDB snapshot: written without holding the store, so batches go on."""

    def __init__(self, view: _native.Snapshot) -> None:
        self._view: _native.Snapshot | None = view

    def write(self, path: str, header: bytes, drop_expired: bool, ttl_ms: int, now_ms: int) -> int:
        assert self._view is not None, "written after close"
        _written, dropped = self._view.write_record_file(path, header, drop_expired, ttl_ms, now_ms)
        return int(dropped)

    def close(self) -> None:
        self._view = None  # unpins the RocksDB snapshot


class _BackgroundApply:
    """The batch goes into the local DB on its own thread (the call releases the GIL) while
    the changelog is written and uploaded: the two are independent. When the change in keys
    is `known` without it, the commit returns before the apply ends (the store waits for it
    before the local DB is used again). `done` ends the transaction, which frees the batch's
    writes: once the apply succeeded and the committing thread is finished with them (`result`,
    or `detach` for a commit that returns first: then as soon as the apply ends, on its own
    thread, so a store does not hold its last batch until its next load). Ending is idempotent."""

    def __init__(self, fn: Callable[[], tuple[int, int]], done: Callable[[], None],
                 known: Callable[[], tuple[int, int] | None]) -> None:
        self._future: Future[tuple[int, int]] = Future()
        self._done = done
        self._known = known
        self._lock = threading.Lock()
        self._applied = False
        self._detached = False

        def run() -> None:
            try:
                delta = fn()
            except BaseException as e:  # re-raised by result(), on the thread that waits
                self._future.set_exception(e)
                return
            with self._lock:
                self._applied = True
                end_now = self._detached
            if end_now:
                self._done()
            self._future.set_result(delta)

        threading.Thread(target=run, name="ttlstate-apply", daemon=True).start()

    def result(self) -> KeyChange:
        delta = KeyChange(*self._future.result())
        self._done()
        return delta

    def known_delta(self) -> KeyChange | None:
        known = self._known()
        return None if known is None else KeyChange(*known)

    def detach(self) -> None:
        with self._lock:
            self._detached = True
            end_now = self._applied
        if end_now:  # freeing a large batch's writes takes a while: not on the commit's path
            threading.Thread(target=self._done, name="ttlstate-free", daemon=True).start()

    def abandon(self) -> bool:
        if self._future.exception() is None:  # waits for the apply to end
            self._done()
        return True


class NativeVersion:
    def __init__(self, ctx: VersionContext, txn: _native.Txn) -> None:
        self._ctx = ctx
        self.txn = txn
        self.version: int = txn.version
        self.now_ms: int = txn.now
        self._committed = False  # the transaction ends "committed" only once its apply did

    # -- lifecycle -------------------------------------------------------------------------
    @property
    def writable(self) -> bool:
        return bool(self.txn.writable)

    @property
    def has_committed(self) -> bool:
        return self._committed

    def make_writable(self) -> None:
        with _state_errors():
            self.txn.make_writable()

    def commit(self) -> int:
        with _state_errors():
            self.txn.check_writable()
        version = self._ctx.commit(self)
        self._committed = True
        return version

    def abort(self) -> None:
        """Drop uncommitted writes. Idempotent; a no-op after commit or on a superseded handle."""
        self._end("aborted")

    def release(self) -> None:
        self._end("released")

    def supersede(self) -> None:
        self._end("superseded")

    def _end(self, state: str) -> None:
        # Once committed, the batch's writes may still be going into the local DB on another
        # thread: `start_apply`'s `end` ends the transaction when that is done, no one else.
        if not self._committed:
            self.txn.end(state)

    def advance_now(self, now_ms: int) -> int:
        self.now_ms = int(self.txn.advance_now(int(now_ms)))  # the transaction owns its now
        return self.now_ms

    def serve_on(self, connection: object, handle: int) -> None:
        if isinstance(connection, _native.Connection):
            connection.bind(handle, self.txn)  # its per-entry requests stay native

    # -- writes ----------------------------------------------------------------------------
    def put(self, key: bytes, value: bytes) -> None:
        if value is None:
            raise ValueError("Cannot put a null value")
        with _state_errors():
            self.txn.put(bytes(key), bytes(value))

    def append(self, key: bytes, more: bytes) -> None:
        with _state_errors():
            self.txn.append(bytes(key), bytes(more))

    def put_entry(self, key: bytes, stored: bytes) -> None:
        with _state_errors():
            self.txn.put_entry(bytes(key), bytes(stored))

    def remove(self, key: bytes) -> None:
        with _state_errors():
            self.txn.remove(bytes(key))

    # -- reads -----------------------------------------------------------------------------
    def get(self, key: bytes) -> bytes | None:
        with _state_errors():
            return self.txn.get(bytes(key))

    def get_entry(self, key: bytes) -> tuple[bytes | None, int]:
        with _state_errors():
            return self.txn.get_entry(bytes(key))

    def remove_if_expired(self, key: bytes) -> None:
        with _state_errors():
            self.txn.remove_if_expired(bytes(key))

    def key_exists(self, key: bytes) -> bool:
        return self.get(key) is not None

    def multi_get(self, keys: list[bytes]) -> list[bytes | None]:
        with _state_errors():
            return self.txn.multi_get([bytes(k) for k in keys])

    def iterator(self) -> Iterator[tuple[bytes, bytes]]:
        with _state_errors():
            return _entries(self.txn.scan())  # the view is fixed now, not at the first next()

    def prefix_scan(self, prefix: bytes) -> Iterator[tuple[bytes, bytes]]:
        prefix = bytes(prefix)
        with _state_errors():
            return _entries(self.txn.scan(prefix, prefix_upper_bound(prefix)))

    # -- commit (the data-plane half; the committer holds the store's lock) -----------------
    def incremental_step(self) -> None:
        self.txn.incremental_step()

    def write_changelog(self, path: str, header: bytes) -> None:
        self.txn.write_changelog(path, header)

    def start_apply(self, sst_path: str) -> _BackgroundApply:
        def end() -> None:
            self.txn.end("committed")
            free_memory.batch_ended()

        return _BackgroundApply(lambda: self.txn.apply(sst_path, end=False), end, self.txn.known_delta)

    # -- metrics ---------------------------------------------------------------------------
    @property
    def expired_on_read(self) -> int:
        return int(self.txn.expired_on_read)

    @property
    def removed_incremental(self) -> int:
        return int(self.txn.removed_incremental)

    def metrics(self) -> StoreMetrics:
        return self._ctx.metrics(self.expired_on_read, self.removed_incremental,
                                 int(self.txn.pending_bytes))


@contextmanager
def _state_errors() -> Iterator[None]:
    """The native lifecycle error as the store's own exception type."""
    try:
        yield
    except _native.StateError as e:
        raise StoreStateError(str(e)) from None


def _entries(scan: _native.Scan) -> Iterator[tuple[bytes, bytes]]:
    while True:
        done, chunk = scan.next_chunk(_SCAN_CHUNK)
        yield from cast("list[tuple[bytes, bytes]]", chunk)  # a scan's values are never None
        if done:
            return
