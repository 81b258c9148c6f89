"""A store's versions: the front the state server calls, wiring the parts that do the work.

This is the control plane of a store: which files rebuild which version, when to snapshot,
what to delete. The per-entry work (a batch's reads and writes, the changelog, applying it,
writing a snapshot, restoring one) is the data plane's (store/planes/): native when the engine
offers it, the Python reference implementation otherwise; the control plane never asks which.

The local DB (local_db.py) holds exactly one committed version; every other version is
rebuilt from the checkpoint (loader.py, load_by_id.py, rebuild.py: newest snapshot <= v, then
changelogs), so a store that moves to another executor, or whose local directory vanished,
loses nothing. Each commit (committer.py) publishes the batch's puts and removes as the
changelog of the new version before it returns; maintenance writes snapshots (snapshots.py)
and deletes files no longer needed (retention.py). The parts share a `StoreContext`
(context.py); a store version reaches back only through its `VersionContext`.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator

from ttlstate.checkpoint import names
from ttlstate.checkpoint.errors import VersionNotFound
from ttlstate.checkpoint.location import CheckpointLocation
from ttlstate.checkpoint.record_file import Operation
from ttlstate.config.store_config import StoreConfig
from ttlstate.engine.base import Engine
from ttlstate.errors import StoreStateError
from ttlstate.store import change_feed, retention
from ttlstate.store.batch_times import BatchTimes
from ttlstate.store.committer import Committer
from ttlstate.store.context import StoreContext
from ttlstate.store.in_place import in_place_directory
from ttlstate.store.loader import VersionLoader
from ttlstate.store.local_db import LocalDb
from ttlstate.store.metrics import MetricsReport
from ttlstate.store.planes.base import DataPlane, PendingApply, StoreMetrics, StoreVersion, VersionContext
from ttlstate.store.rebuild import Rebuilder
from ttlstate.store.recorded_settings import WrittenWith
from ttlstate.store.restored_keys import Kept, RestoredKeys
from ttlstate.store.snapshots import SnapshotWriter
from ttlstate.store.sst_snapshots import SstSnapshots
from ttlstate.store.store_files import StoreFiles
from ttlstate.store.timeline import Timeline
from ttlstate.ttl.clock import Clock, WallClock

log = logging.getLogger(__name__)


class StoreProvider:
    def __init__(self, store_id: str, local_dir: str, checkpoint: CheckpointLocation,
                 config: StoreConfig, clock: Clock | None = None, query_id: str | None = None,
                 checkpoint_ids: bool = False, reader: bool = False, column_families: bool = False) -> None:
        self.store_id = store_id
        self.query_id = query_id
        self.checkpoint = checkpoint
        self.files = StoreFiles(store_id, query_id, checkpoint, os.path.join(local_dir, "staging"))
        self.sst = SstSnapshots(self.files)
        ctx = StoreContext(store_id, query_id, config, self.files, self.sst, checkpoint_ids, reader,
                           column_families)
        self._ctx = ctx
        self._db = LocalDb(ctx, os.path.join(local_dir, "db"))
        self._timeline = Timeline()
        self._times = BatchTimes(store_id, clock or WallClock())
        self._written = WrittenWith(store_id, query_id, reader)
        rebuild = Rebuilder(ctx, self._db, self._timeline, self._times, self._written)
        self._loader = VersionLoader(ctx, self._db, self._timeline, rebuild)
        self._snapshots = SnapshotWriter(ctx, self._db, self._timeline, self._times)
        self._committer = Committer(ctx, self._db, self._timeline, self._times, self._snapshots)
        self._metrics = MetricsReport(ctx, self._db)

    # -- what the server and tests read -------------------------------------------------------
    @property
    def config(self) -> StoreConfig:
        return self._ctx.config

    @property
    def reader(self) -> bool:
        return self._ctx.reader

    @property
    def checkpoint_ids(self) -> bool:
        return self._ctx.checkpoint_ids

    @property
    def clock(self) -> Clock:
        return self._times.clock

    @property
    def engine(self) -> Engine:
        return self._db.engine

    @property
    def plane(self) -> DataPlane:
        return self._db.plane

    @property
    def local_version(self) -> int | None:
        return self._db.version

    @property
    def num_keys(self) -> int:
        return self._db.num_keys

    @property
    def lineage(self) -> int:
        """The local DB's lineage (local_db.py): the shim's key filter and cache follow it."""
        return self._db.lineage

    @property
    def current_stamp(self) -> int:
        return self._db.stamp

    @property
    def last_commit_ids(self) -> tuple[str | None, str | None]:
        """(new id, base id) of the last commit on checkpoint format 2 (Spark's
        StateStoreCheckpointInfo); (None, None) on format 1."""
        return self._timeline.last_commit_ids

    @property
    def applying(self) -> PendingApply | None:
        """The last commit's apply, if it may still be running (committer.py)."""
        return None if self._db.applying is None else self._db.applying[0]

    @property
    def restored_keys(self) -> RestoredKeys | None:
        return self._db.kept.current

    @property
    def db_dir(self) -> str:
        return self._db.directory

    def recorded_time_ms(self, version: int) -> int | None:
        """The time the checkpoint recorded for `version` (the store time of the batch that
        wrote it), once it was loaded or committed here; None if unknown."""
        with self._ctx.lock:
            return self._times.recorded(version)

    # -- a batch's version ------------------------------------------------------------------
    def get_store(self, version: int, *, now_ms: int | None = None, read_only: bool = False,
                  empty: bool = False, from_snapshot: int | None = None, watermark_ms: int = 0,
                  previous_batch_ms: int | None = None, ckpt_id: str | None = None,
                  snapshot_ckpt_id: str | None = None) -> StoreVersion:
        """Exactly `version`, as a write store (or read-only), at the time the time source gives
        for a batch of timestamp `now_ms`, event-time watermark `watermark_ms` and previous
        batch timestamp `previous_batch_ms` (the offset log's; None: the provider's clock).

        `empty`: an empty store at `version` (nothing is read; its commit makes version + 1),
        Spark's loadEmpty. `from_snapshot`: rebuild `version` from exactly that snapshot and the
        changelogs after it, never from the local DB (the state data source's
        snapshotStartBatchId). `ckpt_id` (and `snapshot_ckpt_id`): on checkpoint format 2, the
        id Spark's commit log recorded for `version` (and for that snapshot's version)."""
        if version < 0:
            raise VersionNotFound(self.store_id, version, names.changelog_name(version),
                                  "cannot be loaded: versions are >= 0")
        ctx, db = self._ctx, self._db
        with ctx.lock:
            if db.closed:
                raise StoreStateError(f"ttlstate store {self.store_id}: provider is closed")
            db.settle()
            if db.is_open and not os.path.isdir(db.directory):
                log.warning("ttlstate store %s: local state directory vanished; restoring "
                            "from the checkpoint", self.store_id)
                db.drop()
            if db.is_open and ctx.sst.corruption_found(
                    db.directory, lambda: in_place_directory(ctx.config, ctx.files.location, ctx.store_id)):
                log.warning("ttlstate store %s: restoring version %d from the checkpoint: the local "
                            "state read a corrupt file (above)", self.store_id, version)
                db.drop()
            if db.is_open and ctx.sst.damage_found(version, db.version):
                log.warning("ttlstate store %s: the local state reads a checkpoint file found "
                            "damaged (above); restoring version %d without it", self.store_id, version)
                db.drop()
            if empty:
                self._open_empty(version)
            elif (from_snapshot is not None or not db.is_open or db.version != version
                  or (ctx.checkpoint_ids and version > 0 and ckpt_id != db.state_id)):
                self._loader.load(version, from_snapshot, ckpt_id, snapshot_ckpt_id)
                ctx.sst.corruption_handled(db.directory)
            now = self._times.now(ctx.config.ttl, version, now_ms, watermark_ms, previous_batch_ms)
            if ctx.reader:  # as the query saw it: the recorded TTL, at the time of that batch
                ctx.config = self._written.reader_config(ctx.config)
                written_at = self._times.recorded(version)
                now = written_at if written_at is not None else now
            db.engine.set_time(now)
            db.stamp += 1
            version_ctx = VersionContext(self.store_id, ctx.config.ttl, lambda: db.engine,
                                         lambda: db.stamp, self._committer.commit,
                                         self._metrics.for_version, ctx.column_families)
            return db.plane.begin(version_ctx, db.engine, version, now, not read_only, db.stamp)

    def _open_empty(self, version: int) -> None:
        """Spark's loadEmpty: an empty local DB at `version`, whose keys are all known (none)."""
        db = self._db
        db.lineage += 1
        db.open_empty()
        db.version = version
        db.empty_at = version
        self._timeline.opened_empty()
        self._times.forget(version)
        empty_hashes = db.plane.key_hashes()
        db.kept.forget()
        if empty_hashes is not None:
            db.kept.current = RestoredKeys(db.lineage, version, ready=empty_hashes)

    def upgrade(self, store: StoreVersion) -> StoreVersion:
        """Turn a read store into the write store of the same version, in place."""
        with self._ctx.lock:
            store.make_writable()
            return store

    def commit_store(self, store: StoreVersion) -> int:
        """Commits `store`'s batch (what its `commit` does); returns the new version."""
        return self._committer.commit(store)

    # -- the shim's key filter after a restore (restored_keys.py) ------------------------------
    def keep_restored_key_hashes(self, wanted: bool) -> Kept:
        """After get_store: whether the key filter hashes of every key of the version it just
        loaded are kept for `take_key_filter_bits` (NONE, READY, or SCANNING: the scan starts
        now, ask at the next loads). Only when `wanted` and get_store built the local DB for
        this version from nothing, with a data plane that has them (the native one); when not
        wanted they are dropped."""
        with self._ctx.lock:
            db = self._db
            # The shim keeps no filter of a store past keyFilter.maxKeys: it would never take them
            wanted = wanted and db.num_keys <= self.config.key_filter_max_keys
            return db.kept.keep(wanted, db.lineage, db.version, db.num_keys)

    def take_key_filter_bits(self, lineage: int, version: int, bits_log2: int, probes: int) -> bytes | None:
        """Once: the bits of a key filter layer of 2^bits_log2 bits holding every key of
        `version` of local DB lineage `lineage`, which a load built from nothing (see
        `keep_restored_key_hashes`), set as the shim's filter sets them; empty while their scan
        still runs (ask again later); None if they are not kept (another version or lineage,
        taken, or their scan failed)."""
        with self._ctx.lock:
            if lineage != self._db.lineage:
                return None
            restored = self._db.kept.take(lineage, version)
            if restored is False:
                return None
            if restored is True:
                return b""  # the scan still runs
        return self._db.kept.bits(restored, bits_log2, probes)

    # -- maintenance --------------------------------------------------------------------------
    def do_snapshot_maintenance(self) -> str | None:
        """Snapshot the loaded version when `snapshot_interval` versions passed since the last (or
        a repair passed one over); returns the file name of the newest snapshot published since
        the last call, if any (this one, or one a commit started: `snapshot.afterCommit`)."""
        self._snapshots.write_if_due()
        return self._snapshots.take_published()

    def write_snapshot(self) -> str | None:
        """Write and publish the snapshot of the loaded version; returns its file name (None:
        skipped, see snapshots.py)."""
        return self._snapshots.write()

    def do_cleanup_maintenance(self, min_versions_to_retain: int) -> list[str]:
        """Delete checkpoint files older than what the newest N versions need."""
        return retention.clean_up(self._ctx, self._db, self._timeline, min_versions_to_retain)

    def changelog_records(self, version: int, end: tuple[int, str] | None = None, family: str | None = None
                          ) -> Iterator[Operation]:
        """The records of the changelog of `version` with their ops (the state data source's
        change feed), those of the column family `family` only when one is named."""
        return change_feed.changelog_records(self._ctx, version, end, family)

    # -- metrics ------------------------------------------------------------------------------
    def drain_metrics(self) -> dict[str, int]:
        """Counters accumulated since the last report (Spark sums what each batch reports)."""
        return self._metrics.drain()

    def store_metrics(self, expired_on_read: int, removed_incremental: int, pending_bytes: int
                      ) -> StoreMetrics:
        return self._metrics.for_version(expired_on_read, removed_incremental, pending_bytes)

    def memory_bytes(self, pending_bytes: int) -> int:
        return self._metrics.memory_bytes(pending_bytes)

    def close(self) -> None:
        with self._ctx.lock:
            self._db.close()
