"""Snapshots: the loaded version written to the checkpoint every `snapshotInterval` versions,
by maintenance or (`snapshot.afterCommit`) by a background thread as soon as the commit that
makes one due returns (background_snapshots.py), in one of two layouts, without holding up the
store's batches.

SST layout (the native engine's default): a RocksDB checkpoint of the version, taken with the
store held (hard links: the memtable's flush is its only cost), then, without holding it, the
upload of the SST files the checkpoint does not hold yet and a manifest naming all of them
(sst_snapshots.py). Record layout: one file with every entry, written from the data plane's
view of the DB (on the native plane a pinned RocksDB snapshot, without holding the store).
Either is published under the store's lock, and only if no reload replaced the local DB in
between (a re-run batch may have superseded that version).
"""

from __future__ import annotations

import logging
import os
import secrets
import shutil
import threading
import time

from ttlstate.checkpoint import names
from ttlstate.checkpoint.record_file import header_json
from ttlstate.checkpoint.sst_manifest import write_manifest
from ttlstate.config.keys import SnapshotLayout
from ttlstate.engine.base import Engine
from ttlstate.errors import StoreStateError
from ttlstate.faults import crash_point
from ttlstate.store import metric_names as M
from ttlstate.store.background_snapshots import BACKGROUND
from ttlstate.store.batch_times import BatchTimes
from ttlstate.store.context import StoreContext
from ttlstate.store.in_place import in_place_directory
from ttlstate.store.local_cache import bound_local_files
from ttlstate.store.local_db import LocalDb
from ttlstate.store.planes.base import SnapshotView
from ttlstate.store.recorded_settings import settings_of
from ttlstate.store.sst_snapshots import PreparedUpload
from ttlstate.store.timeline import Timeline

log = logging.getLogger(__name__)


class SnapshotWriter:
    def __init__(self, ctx: StoreContext, db: LocalDb, timeline: Timeline, times: BatchTimes) -> None:
        self._ctx = ctx
        self._db = db
        self._timeline = timeline
        self._times = times
        self._published: str | None = None  # the newest snapshot published, until taken
        self._writing = threading.Lock()  # held while a snapshot is written (see write)

    @property
    def store_id(self) -> str:
        return self._ctx.store_id

    def write_if_due(self) -> str | None:
        """Snapshot the loaded version when `snapshot_interval` versions passed since the last (or
        a repair passed one over); returns the file name published, if any."""
        db = self._db
        with self._ctx.lock:
            db.settle()
            if db.closed or not db.is_open or db.version is None:
                return None
            due = self._due(db.version)
        return self.write() if due else None

    def committed(self, version: int) -> None:
        """After the commit of `version` (the store held): its snapshot starts in the background
        now when one is due and `snapshot.afterCommit` says so (background_snapshots.py)."""
        if self._ctx.config.snapshot_after_commit and not self._ctx.reader and self._due(version):
            BACKGROUND.schedule(self)

    def take_published(self) -> str | None:
        """The newest snapshot published since the last call (by maintenance, a commit or the
        background thread): what maintenance reports to Spark's coordinator."""
        with self._ctx.lock:
            name, self._published = self._published, None
            return name

    def _due(self, version: int) -> bool:
        since = version - self._timeline.newest_trusted(version)
        return self._ctx.snapshot_due or since >= self._ctx.config.snapshot_interval

    def write(self) -> str | None:
        """Write and publish the snapshot of the loaded version; returns its file name (None: it
        was skipped). One at a time per store: a snapshot asked for while another is written (by
        maintenance, a commit or the background thread) is skipped, as the other one publishes.
        Two at once would upload the same new SST files at once, and the first to publish may
        evict a file (`snapshot.localMaxBytes`) that the other is still reading to upload."""
        if not self._writing.acquire(blocking=False):
            log.debug("ttlstate store %s: snapshot skipped: another one is being written", self._ctx.store_id)
            return None
        try:
            return self._write()
        finally:
            self._writing.release()

    def _write(self) -> str | None:
        ctx, db = self._ctx, self._db
        with ctx.lock:
            started = time.monotonic()
            if db.applying is not None:
                db.settle()
                if db.version is None:
                    return None  # the apply failed: the local DB was dropped (see settle)
            version = db.version
            if version is None:
                raise StoreStateError(f"ttlstate store {ctx.store_id}: no version is loaded")
            if ctx.checkpoint_ids and not db.state_id:
                return None  # format 2: an empty state at its first version has no id to name
            name = names.snapshot_name(version, (db.state_id or "") if ctx.checkpoint_ids else "")
            if name in ctx.unusable_snapshots:  # a damaged file a repair passed over: keep it as it is
                log.info("ttlstate store %s: snapshot of version %d waits for the next version: %s is "
                         "the damaged snapshot a load passed over, left for inspection",
                         ctx.store_id, version, ctx.files.describe(name))
                return None
            local = ctx.files.staging_path(f".{name}.{secrets.token_hex(4)}")
            ttl = ctx.config.ttl
            batch_time = self._times.recorded(version)
            drop = ttl.enabled and ttl.full_snapshot and batch_time is not None
            sst_layout = self._layout() is SnapshotLayout.SST
            # An SST snapshot's manifest records the version's keys (sst_manifest.py), its header
            # the internal column families' among them; a record snapshot's build counts both.
            header = header_json(ctx.store_id, version, batch_time, ttl.ttl_ms, ctx.query_id,
                                 state=db.state_id, settings=settings_of(ttl),
                                 internal_keys=db.num_internal_keys if sst_layout else None)
            engine = db.engine
            loaded = db.lineage
            if sst_layout:
                prepared, view = self._checkpoint(local + ".ckpt"), None
            else:
                prepared, view = None, db.plane.snapshot_view(engine, ttl)
        if prepared is not None:
            return self._write_sst(prepared, name, local, header, version, loaded, started)
        assert view is not None
        return self._write_records(view, engine, name, local, header, version, loaded, started,
                                   drop, ttl.ttl_ms or 0, batch_time or 0)

    def _write_records(self, view: SnapshotView, engine: Engine, name: str, local: str, header: bytes,
                       version: int, loaded: int, started: float, drop: bool, ttl_ms: int,
                       batch_time: int) -> str | None:
        """The record layout: the file written from `view` (of `engine`) without holding the
        store, then published."""
        try:
            crash_point("snapshot-before-write")  # tests only
            dropped = view.write(local, header, drop, ttl_ms, batch_time)
        except RuntimeError:
            if os.path.exists(local):
                os.unlink(local)
            with self._ctx.lock:
                if self._db.lineage != loaded or self._db.engine_or_none is not engine:
                    log.info("ttlstate store %s: snapshot of version %d skipped: the local state "
                             "was reloaded while it was being written", self._ctx.store_id, version)
                    return None
            raise
        finally:
            view.close()
        with self._ctx.lock:
            if not self._still_loaded(loaded, local, version, "it was being written"):
                return None
            self._publish(local, name, dropped, started)
        return name

    def _write_sst(self, prepared: PreparedUpload, name: str, local: str, header: bytes,
                   version: int, loaded: int, started: float) -> str | None:
        """The SST layout: uploads the checkpoint's SST files the checkpoint does not hold yet
        and writes the manifest without holding the store, then publishes it if no reload
        replaced the local DB meanwhile."""
        ctx = self._ctx
        try:
            crash_point("snapshot-before-write")  # tests only
            with ctx.lock:
                superseded = self._db.lineage != loaded or self._db.closed
            if superseded:  # uploading its files would only leave orphans
                log.info("ttlstate store %s: snapshot of version %d skipped: the local state was "
                         "reloaded meanwhile", ctx.store_id, version)
                return None
            manifest = ctx.sst.upload(prepared, version, name)
            write_manifest(local, header, manifest)
        except BaseException:
            if os.path.exists(local):
                os.unlink(local)
            raise
        finally:
            shutil.rmtree(prepared.directory, ignore_errors=True)
        with ctx.lock:
            if not self._still_loaded(loaded, local, version, "its files were uploaded"):
                return None
            self._publish(local, name, 0, started)
            ctx.sst.published(name, prepared, manifest)
            self._bound_local_disk()
        return name

    def _bound_local_disk(self) -> None:
        """`snapshot.localMaxBytes`: the files just uploaded may leave the local disk (the store
        held: the local DB is the one the snapshot was taken of)."""
        ctx = self._ctx
        if not ctx.config.snapshot_local_max_bytes:
            return
        place = in_place_directory(ctx.config, ctx.files.location, ctx.store_id)
        if place is None:  # no range service: said once by in_place_directory
            return
        try:
            evicted = bound_local_files(ctx.store_id, self._db.directory, ctx.sst.uploaded_files(), place,
                                        ctx.config.snapshot_local_max_bytes)
        except (OSError, RuntimeError) as e:  # the snapshot stands; the files stay local
            log.warning("ttlstate store %s: SST files could not leave the local disk for "
                        "snapshot.localMaxBytes (the next snapshot tries again): %s", ctx.store_id, e)
            return
        ctx.counters[M.LOCAL_SST_FILES_EVICTED.name] += evicted.files
        ctx.counters[M.LOCAL_SST_BYTES_EVICTED.name] += evicted.freed

    def _still_loaded(self, loaded: int, local: str, version: int, while_: str) -> bool:
        """Whether the local DB a snapshot was taken of is still the loaded one (the store held);
        if not, the snapshot's file is dropped unpublished."""
        if self._db.lineage == loaded and not self._db.closed:
            return True
        os.unlink(local)
        log.info("ttlstate store %s: snapshot of version %d not published: the local state was "
                 "reloaded while %s", self._ctx.store_id, version, while_)
        return False

    def _layout(self) -> SnapshotLayout:
        """SST files where the engine can checkpoint and the config does not say records.
        `cleanup.fullSnapshot` applies to record snapshots only (a rewrite of the state), as
        Flink's full-snapshot cleanup does not apply to incremental checkpoints."""
        if not self._db.engine.can_checkpoint:
            return SnapshotLayout.RECORDS
        return self._ctx.config.snapshot_layout

    def _checkpoint(self, directory: str) -> PreparedUpload:
        """A RocksDB checkpoint of the loaded version, taken with the store held."""
        try:
            self._db.engine.checkpoint(directory)
            return self._ctx.sst.prepare(directory, self._db.num_keys)
        except BaseException:
            shutil.rmtree(directory, ignore_errors=True)
            raise

    def _publish(self, local: str, name: str, dropped: int, started: float) -> None:
        self._ctx.files.publish(local, name)
        self._ctx.snapshot_due = False
        self._published = name
        parsed = names.parse(name)
        if parsed is not None:
            self._timeline.trusted.add(parsed.version)
        self._ctx.counters[M.TTL_DROPPED_FROM_SNAPSHOT.name] += dropped
        self._ctx.counters[M.SNAPSHOT_TIME_MS.name] += int((time.monotonic() - started) * 1000)
