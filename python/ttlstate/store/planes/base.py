"""What the control plane (store/) asks of a data plane, and the types both share.

A data plane does a store's per-entry work: one version's reads and buffered writes (a
`StoreVersion`), its changelog and its application to the local DB at commit, rebuilding a
DB from checkpoint files, and writing a snapshot file. Both planes implement all of it, so
the control plane never asks which one it has. A version gets what it needs of its store in a
`VersionContext` (its TTL, the store's stamp, the way to commit and to report metrics), never
the store itself.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol

from ttlstate.checkpoint.record_file import RecordFileHeader
from ttlstate.config.store_config import TtlConfig
from ttlstate.engine.base import Engine

# (checkpoint file name, local path, verified header) of a file a load fetched
Fetched = tuple[str, str, RecordFileHeader]


class KeyChange(NamedTuple):
    """A number of keys, or a change in it: all of them, and of them the keys of internal column
    families (column_families.is_internal_key; a store without families ignores that count)."""

    keys: int
    internal: int


NO_CHANGE = KeyChange(0, 0)


@dataclass
class StoreMetrics:
    num_keys: int
    memory_bytes: int
    custom: dict[str, int] = field(default_factory=dict)


def prefix_upper_bound(prefix: bytes) -> bytes | None:
    """The smallest key greater than every key starting with `prefix` (None: no bound)."""
    stripped = prefix.rstrip(b"\xff")
    if not stripped:
        return None
    return stripped[:-1] + bytes((stripped[-1] + 1,))


class KeyHashes(Protocol):
    """The key filter hashes of the keys a DB build put (the shim fills its filter from them)."""

    def settle(self, bits_log2: int, probes: int) -> None: ...

    def bloom_words(self, bits_log2: int, probes: int) -> bytes: ...


class PendingApply(Protocol):
    """A commit's batch on its way into the local DB (possibly on another thread)."""

    def result(self) -> KeyChange:
        """Waits; the change in the number of keys. Raises what the apply raised."""

    def known_delta(self) -> KeyChange | None:
        """The change in the number of keys, when it is known without waiting for the apply
        (every written key's presence in the DB is known); None otherwise. Not None only where
        the apply runs on its own thread, so the commit may return before it ends."""

    def detach(self) -> None:
        """The commit returns before the apply ends (`known_delta` was not None) and is finished
        with the batch's writes: they are freed as soon as the apply ends."""

    def abandon(self) -> bool:
        """The commit failed elsewhere: waits for the apply to end; True if the local DB may
        now hold part of the batch (it must then be dropped and reloaded)."""


class StoreVersion(Protocol):
    """One version of one store, as a task sees it (Spark's StateStore): reads with TTL applied,
    buffered writes, then commit, abort or release."""

    version: int
    now_ms: int

    @property
    def writable(self) -> bool: ...
    @property
    def has_committed(self) -> bool: ...
    @property
    def expired_on_read(self) -> int: ...
    @property
    def removed_incremental(self) -> int: ...

    def make_writable(self) -> None: ...
    def commit(self) -> int: ...
    def abort(self) -> None: ...
    def release(self) -> None: ...
    def supersede(self) -> None:
        """A later load of the store replaced this version: it takes no further operation."""

    def put(self, key: bytes, value: bytes) -> None: ...
    def append(self, key: bytes, more: bytes) -> None:
        """The key's value (read as `get` reads it; none: empty) followed by `more` (a column
        family's ListState merge), logged as an append when the changelog logs operations."""
    def put_entry(self, key: bytes, stored: bytes) -> None:
        """A put of a whole TtlValue (`stored`), its timestamp kept as given, of a key the
        committed store lacks (a store loaded empty that `ttlstate repartition` fills)."""
    def remove(self, key: bytes) -> None: ...
    def remove_if_expired(self, key: bytes) -> None: ...
    def get(self, key: bytes) -> bytes | None: ...
    def get_entry(self, key: bytes) -> tuple[bytes | None, int]: ...
    def key_exists(self, key: bytes) -> bool: ...
    def multi_get(self, keys: list[bytes]) -> list[bytes | None]: ...
    def iterator(self) -> Iterator[tuple[bytes, bytes]]: ...
    def prefix_scan(self, prefix: bytes) -> Iterator[tuple[bytes, bytes]]: ...
    def metrics(self) -> StoreMetrics: ...

    def advance_now(self, now_ms: int) -> int:
        """Moves now forward to `now_ms` (never back); returns the now TTL uses from here on."""

    def serve_on(self, connection: object, handle: int) -> None:
        """Lets the native connection loop answer this version's per-entry requests itself
        (a no-op where the plane has no native loop)."""

    # The commit's data-plane half, called by the committer under the store's lock.
    def incremental_step(self) -> None:
        """Incremental cleanup's next step, run once per commit (`incremental.perRecord=false`)."""

    def write_changelog(self, path: str, header: bytes) -> None:
        """The batch's puts and removes as a changelog file with this header (JSON)."""

    def start_apply(self, sst_path: str) -> PendingApply:
        """Starts applying the batch to the local DB (`sst_path`: where a bulk load may stage)."""


@dataclass(frozen=True)
class VersionContext:
    """What a store version needs of its store, fixed when the version is loaded."""

    store_id: str
    ttl: TtlConfig  # the TTL this version reads and writes with
    # The local DB now (raises when none is loaded: a failed commit dropped it).
    engine: Callable[[], Engine]
    # The store's stamp now: it moves on when a later load or the store's close supersedes
    # every version loaded before.
    stamp: Callable[[], int]
    # The control plane's half of the commit (committer.py): returns the new version.
    commit: Callable[[StoreVersion], int]
    # The version's metrics from its own counts (expired on read, removed incrementally,
    # pending bytes) and the store's.
    metrics: Callable[[int, int, int], StoreMetrics]
    # The changelog logs every put, delete and append in the order made (a store with column
    # families), not each written key once.
    log_operations: bool = False


class SnapshotView(Protocol):
    """A consistent view of the local DB to write a snapshot file from."""

    def write(self, path: str, header: bytes, drop_expired: bool, ttl_ms: int, now_ms: int) -> int:
        """Writes the snapshot file; returns the entries left out as expired."""

    def close(self) -> None:
        """Releases the view (and whatever it pins)."""


@dataclass
class Built:
    """What a DB build from checkpoint files did: the files it used, those left to replay one
    by one, and the number of keys it put."""

    used: list[Fetched]
    rest: list[Fetched]
    num_keys: KeyChange


class DataPlane(ABC):
    """One store's data plane; it lives as long as the store, across reloads of the DB."""

    @abstractmethod
    def begin(self, ctx: VersionContext, engine: Engine, version: int, now_ms: int,
              writable: bool, stamp: int) -> StoreVersion:
        """The version the store just loaded, for a task (`stamp`: the store's stamp now)."""

    @abstractmethod
    def key_hashes(self) -> KeyHashes | None:
        """A new collector of key filter hashes for a DB build; None if this plane has none."""

    @abstractmethod
    def build(self, engine: Engine, fetched: list[Fetched], staging_sst: str,
              collecting: KeyHashes | None, fail: Callable[[str, str], Exception]) -> Built:
        """Builds an empty DB from the snapshot `fetched` starts with (if any) and as many of
        the changelogs after it as it can in one pass; `fail(file name, reason)` makes the
        error to raise for a bad file. The rest are left to `replay_changelog`."""

    @abstractmethod
    def replay_changelog(self, engine: Engine, local_path: str, header: RecordFileHeader,
                         collecting: KeyHashes | None, count_keys: bool = True) -> KeyChange:
        """Applies a changelog to the DB; returns the change in the number of keys (without
        `count_keys` a plane may skip the lookups that take and return no change: the caller knows the
        count from the next changelog's header). A bad file raises RecordFileError."""

    @abstractmethod
    def snapshot_view(self, engine: Engine, ttl: TtlConfig) -> SnapshotView:
        """A view of the DB as it is now, to write a snapshot from (closed in any case)."""

    @abstractmethod
    def close(self) -> None:
        """The store closes: ends its current version."""
