"""One version of one store on the native data plane: a handle on a `_native.Txn`.

Same contract and TTL semantics as the Python reference (`state_store.StateStore`); the
pending writes, the TTL checks on every read path, scans, incremental cleanup and the
commit's changelog and apply all run in C++ (native/src/txn.cpp). The state server binds the
transaction to the shim's connection, so the shim's per-entry requests never reach Python;
this class is what the control plane and embedded users (and the model tests) call.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from ttlstate import _native
from ttlstate.store.state_store import StoreMetrics, StoreStateError

if TYPE_CHECKING:
    from ttlstate.store.provider import StoreProvider

_SCAN_CHUNK = 1 << 16


class NativeStateStore:
    def __init__(self, provider: StoreProvider, txn: _native.Txn) -> None:
        self._p = provider
        self.txn = txn
        self.version: int = txn.version
        self.now_ms: int = txn.now

    # -- lifecycle -------------------------------------------------------------------------
    @property
    def writable(self) -> bool:
        return bool(self.txn.writable)

    @property
    def has_committed(self) -> bool:
        return self.txn.state == "committed"

    def make_writable(self) -> None:
        with _state_errors():
            self.txn.make_writable()

    def commit(self) -> int:
        with _state_errors():
            self.txn.check_writable()
        return self._p.commit_store(self)

    def abort(self) -> None:
        """Drop uncommitted writes. Idempotent; a no-op after commit or on a superseded handle."""
        self.txn.end("aborted")

    def release(self) -> None:
        self.txn.end("released")

    def supersede(self) -> None:
        self.txn.end("superseded")

    # -- writes ----------------------------------------------------------------------------
    def put(self, key: bytes, value: bytes) -> None:
        if value is None:
            raise ValueError("Cannot put a null value")
        with _state_errors():
            self.txn.put(bytes(key), bytes(value))

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
        from ttlstate.store.state_store import prefix_upper_bound

        prefix = bytes(prefix)
        with _state_errors():
            return _entries(self.txn.scan(prefix, prefix_upper_bound(prefix)))

    # -- metrics ---------------------------------------------------------------------------
    @property
    def expired_on_read(self) -> int:
        return int(self.txn.expired_on_read)

    @property
    def removed_incremental(self) -> int:
        return int(self.txn.removed_incremental)

    def metrics(self) -> StoreMetrics:
        return self._p.store_metrics(self.expired_on_read, self.removed_incremental,
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
        yield from chunk
        if done:
            return
