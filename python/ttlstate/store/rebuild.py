"""Building a version in the local DB from checkpoint files a load fetched and verified.

The plan (checkpoint/restore_plan.py, id_plan.py) names the base (the local DB as it is, a
snapshot, or nothing) and the changelogs after it. An SST snapshot's files are opened as they
are; a record snapshot and the changelogs after it are built into an empty DB by the data
plane in one pass where it can; the rest are replayed one by one. A failure anywhere drops the
local DB: a partially loaded version never serves.
"""

from __future__ import annotations

from dataclasses import dataclass

from ttlstate.checkpoint.errors import CheckpointError
from ttlstate.checkpoint.record_file import (
    KIND_CHANGELOG,
    SST_MANIFEST_FORMAT,
    RecordFileError,
    RecordFileHeader,
)
from ttlstate.checkpoint.restore_plan import RestorePlan
from ttlstate.checkpoint.sst_manifest import SstFile, SstManifest, read_manifest
from ttlstate.faults import crash_point
from ttlstate.store import metric_names as M
from ttlstate.store.batch_times import BatchTimes
from ttlstate.store.context import StoreContext
from ttlstate.store.in_place import in_place_directory
from ttlstate.store.local_db import LocalDb
from ttlstate.store.local_fill import FILLS, FillJob
from ttlstate.store.planes.base import Fetched, KeyHashes
from ttlstate.store.recorded_settings import WrittenWith
from ttlstate.store.restored_keys import RestoredKeys
from ttlstate.store.timeline import Timeline

# Reads of placeholders' metadata at once after a restore in place: the range service's pool
# keeps 8 connections idle (native/src/range_client.cpp), so 8 need no new connection.
METADATA_READS_AT_ONCE = 8


@dataclass
class Checked:
    """What a load's checks of the files it fetched found (checkpoint/lineage.py)."""

    state: str | None  # the state id of the version the files build
    base_trusted: bool  # the plan's base snapshot holds this writer's timeline
    chained: bool  # every changelog continues the state before it


class Rebuilder:
    def __init__(self, ctx: StoreContext, db: LocalDb, timeline: Timeline, times: BatchTimes,
                 written: WrittenWith) -> None:
        self._ctx = ctx
        self._db = db
        self._timeline = timeline
        self._times = times
        self._written = written
        # The manifest and name of the snapshot the load opened in place, while it loads.
        self._in_place: tuple[SstManifest, str] | None = None

    def apply(self, plan: RestorePlan, fetched: list[Fetched], version: int, checked: Checked) -> None:
        """Makes the local DB hold `version`, from `plan`'s files among `fetched`."""
        db = self._db
        wanted = {plan.snapshot, *plan.changelogs}
        rest = [f for f in fetched if f[0] in wanted]
        collecting: KeyHashes | None = None
        self._in_place = None
        try:
            scan_keys = False
            db.kept.forget()
            if not plan.from_local and rest and rest[0][2].format == SST_MANIFEST_FORMAT:
                self._open_sst_snapshot(rest[0], version)
                rest = rest[1:]
                scan_keys = db.plane.key_hashes() is not None  # nothing was built: scan them
            elif not plan.from_local:
                db.open_empty()
                collecting = db.plane.key_hashes()
                if rest:
                    rest = self._build(rest, version, collecting)
            for i, (name, local_path, header) in enumerate(rest):
                # The writer's counts hold for the state it wrote them on: not across a break
                # in the chain (another writer's version below), whose keys are counted here.
                after = rest[i + 1][2] if i + 1 < len(rest) else None
                if not checked.chained:
                    keys_after = internal_after = None
                elif after is not None and after.parent == header.state_id:
                    keys_after, internal_after = after.parent_keys, after.parent_internal_keys
                else:
                    keys_after, internal_after = header.keys, header.internal_keys
                self._replay(name, local_path, header, version, collecting, keys_after, internal_after)
            if collecting is not None:
                db.kept.current = RestoredKeys(db.lineage, version, ready=collecting)
            elif scan_keys:
                db.kept.current = RestoredKeys(db.lineage, version, engine=db.engine,
                                               fresh=db.plane.key_hashes)
        except BaseException as e:
            db.drop()  # never serve a partially loaded version
            if self._in_place is not None and isinstance(e, (RuntimeError, CheckpointError)):
                # RocksDB found a file read in place corrupt, opening it or in a replay's read.
                manifest, name = self._in_place
                damaged = self._ctx.sst.found_damaged(manifest, version, name, str(e))
                if damaged is not None:
                    raise damaged from None
            raise
        db.version = version
        db.state_id = checked.state
        self._timeline.loaded(version, plan.base_version, checked.base_trusted)
        if fetched:
            self._written.check(fetched[-1][2], self._ctx.config.ttl)  # the version's newest file

    def _open_sst_snapshot(self, snapshot: Fetched, version: int) -> None:
        """Opens the local DB on the SST files of `snapshot` (a manifest: sst_manifest.py)."""
        name, local, header = snapshot
        try:
            manifest = read_manifest(local, header)
        except RecordFileError as e:
            raise CheckpointError(self._ctx.store_id, version, name, str(e)) from None
        self._db.drop()
        ctx = self._ctx
        in_place = in_place_directory(ctx.config, ctx.files.location, ctx.store_id)
        ctx.counters[M.SST_FILES_READ_IN_PLACE.name] += ctx.sst.place(manifest, self._db.directory,
                                                                     version, name, in_place)
        if in_place is not None:
            self._in_place = (manifest, name)
        self._db.open()  # RocksDB opens the files, checking their footers and properties
        if in_place is not None and in_place.socket is not None:
            crash_point("in-place-opened")  # tests only: the file system goes away now
            # Each file's index and filter blocks are a round trip to the checkpoint's file
            # system: several at a time now, rather than one at a time by the first lookups.
            self._db.engine.warm_metadata(METADATA_READS_AT_ONCE)
        self._ctx.sst.new_lineage(manifest)
        self._fill_local(version)
        self._db.num_keys = manifest.keys
        self._db.num_internal_keys = header.internal_keys  # None (files from before the count): counted later
        self._times.record(header.version, header.batch_time_ms)

    def _fill_local(self, version: int) -> None:
        """`snapshot.localFill`: the placeholders just opened go back to the local disk in the
        background (local_fill.py), while this DB stays open."""
        ctx, db = self._ctx, self._db
        files = ctx.sst.restored_in_place()
        if not files or not ctx.config.snapshot_local_fill:
            return
        engine = db.engine

        def filled(f: SstFile) -> None:
            ctx.sst.found_whole(f.name)
            with ctx.lock:
                ctx.counters[M.LOCAL_SST_FILES_FILLED.name] += 1
                ctx.counters[M.LOCAL_SST_BYTES_FILLED.name] += f.size

        FILLS.submit(FillJob(ctx.store_id, version, db.directory, files, ctx.config.snapshot_local_max_bytes,
                             lambda: db.engine_or_none is engine and not db.closed, filled,
                             ctx.sst.record_damage))

    def _build(self, fetched: list[Fetched], version: int, collecting: KeyHashes | None) -> list[Fetched]:
        """Builds the empty DB from what the data plane takes in one pass (the snapshot, and
        changelogs after it where it can); returns the files left to replay one by one."""
        store_id = self._ctx.store_id
        built = self._db.plane.build(
            self._db.engine, fetched, self._ctx.files.staging_path(f"restore-{version}.sst"),
            collecting, lambda name, reason: CheckpointError(store_id, version, name, reason))
        if built.used:
            self._db.num_keys, self._db.num_internal_keys = built.num_keys
        for _name, _local, header in built.used:
            self._times.record(header.version, header.batch_time_ms)
            if header.kind == KIND_CHANGELOG:
                self._ctx.counters[M.REPLAYED_CHANGELOGS.name] += 1
        return built.rest

    def _replay(self, name: str, local: str, header: RecordFileHeader, version: int,
                collecting: KeyHashes | None, keys_after: int | None, internal_after: int | None) -> None:
        """`keys_after`: the number of keys once it is applied, when the next changelog (which
        continues it) or its own header (`keys`) recorded it; then no lookups count them, and
        `internal_after` (the internal column families' keys among them) is what the same
        header recorded, or None for files from before that count (which the store then counts
        by a scan when it reports them, `LocalDb.counted_internal_keys`). (With
        the compaction filter that is the writer's count: entries its filter had removed may
        still be here, expired and never read, until this DB's filter removes them and the
        store recounts.)"""
        try:
            delta = self._db.plane.replay_changelog(self._db.engine, local, header, collecting,
                                                    count_keys=keys_after is None)
        except RecordFileError as e:
            raise CheckpointError(self._ctx.store_id, version, name, str(e)) from None
        if keys_after is not None:
            self._db.num_keys, self._db.num_internal_keys = keys_after, internal_after
        else:
            self._db.add_keys(delta)
        self._times.record(header.version, header.batch_time_ms)
        self._ctx.counters[M.REPLAYED_CHANGELOGS.name] += 1
