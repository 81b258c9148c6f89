"""A store's versions: the local RocksDB cache, the checkpoint files, and maintenance.

This is the control plane of a store: which files rebuild which version, when to snapshot,
what to delete. The per-entry work (a batch's reads and writes, the changelog, applying it,
writing a snapshot, restoring one) is the data plane's (store/planes/): native when the engine
offers it, the Python reference implementation otherwise; this module never asks which.

The local engine holds exactly one committed version (`local_version`); every other version
is rebuilt from the checkpoint (newest snapshot <= v, then changelogs), so a store that moves
to another executor, or whose local directory vanished, loses nothing. Each commit writes the
batch's puts and removes as the changelog of the new version and publishes it before
`commit()` returns; maintenance writes snapshots and deletes files no longer needed.
"""

from __future__ import annotations

import logging
import os
import secrets
import shutil
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import replace

from ttlstate.checkpoint import names
from ttlstate.checkpoint.errors import CheckpointError, SnapshotFilesUnusable, VersionNotFound
from ttlstate.checkpoint.id_plan import EMPTY, FORMAT1, plan_by_id
from ttlstate.checkpoint.lineage import Chain, continues, follow
from ttlstate.checkpoint.location import CheckpointLocation
from ttlstate.checkpoint.record_file import (
    KIND_CHANGELOG,
    KIND_SNAPSHOT,
    SST_MANIFEST_FORMAT,
    RecordFileError,
    RecordFileHeader,
    file_fingerprint,
    header_json,
    read_records,
)
from ttlstate.checkpoint.restore_plan import (
    RestorePlan,
    deletable_files,
    plan_from_snapshot,
    plan_restore,
)
from ttlstate.checkpoint.sst_manifest import read_manifest, write_manifest
from ttlstate.config.keys import EngineKind, SnapshotLayout, TimeSource
from ttlstate.config.store_config import StoreConfig, TtlConfig
from ttlstate.engine.base import Engine, FilterSettings
from ttlstate.engine.select import open_engine
from ttlstate.errors import StoreStateError
from ttlstate.faults import crash_point
from ttlstate.store import metric_names as M
from ttlstate.store import planes
from ttlstate.store.planes.base import (
    DataPlane,
    Fetched,
    KeyHashes,
    PendingApply,
    StoreMetrics,
    StoreVersion,
)
from ttlstate.store.recorded_settings import recorded_ttl, settings_of, warn_if_changed
from ttlstate.store.restored_keys import NONE, SCANNING, RestoredKeys
from ttlstate.store.sst_snapshots import PreparedUpload, SstSnapshots
from ttlstate.store.store_files import StoreFiles
from ttlstate.ttl.clock import BatchClock, Clock, WallClock, store_time

log = logging.getLogger(__name__)


class StoreProvider:
    def __init__(self, store_id: str, local_dir: str, checkpoint: CheckpointLocation,
                 config: StoreConfig, clock: Clock | None = None, query_id: str | None = None,
                 checkpoint_ids: bool = False, reader: bool = False) -> None:
        self.store_id = store_id
        # Serves the state data source (no streaming query): a version reads as the query saw
        # it, with the TTL the checkpoint recorded and at the time of the batch that wrote it.
        self.reader = reader
        self._written_with: TtlConfig | None = None  # of the newest file the last load read
        # Checkpoint format 2: versions are loaded by (version, checkpoint id), every commit
        # gets a new id and writes `<v>_<id>.*` files (see checkpoint/id_plan.py).
        self.checkpoint_ids = checkpoint_ids
        self._v2_lineage: tuple[tuple[int, str], ...] = ()  # of the local version, newest first
        self._state_format1 = False  # the local version's state id is a format 1 fingerprint
        # (new id, base id) of the last commit, format 2 (Spark's StateStoreCheckpointInfo)
        self.last_commit_ids: tuple[str | None, str | None] = (None, None)
        self.query_id = query_id  # written into every file; a file of another query is refused
        self.config = config
        self.checkpoint = checkpoint
        self.clock = clock or WallClock()
        self._local_dir = local_dir
        self._db_dir = os.path.join(local_dir, "db")
        self.files = StoreFiles(store_id, query_id, checkpoint, os.path.join(local_dir, "staging"))
        self.sst = SstSnapshots(self.files)
        self._lock = threading.RLock()
        self._engine: Engine | None = None
        self._local_version: int | None = None
        # The state id (see checkpoint/lineage.py) of the local version, None if unknown; the
        # next changelog records it as its parent. `_loaded_state`: the same, of a load in
        # progress.
        self._state_id: str | None = None
        self._loaded_state: str | None = None
        # Snapshots known to hold this writer's timeline (it wrote them, or a load checked them
        # against the changelog after them): the only ones retention counts back to, and those
        # files older than them are deleted for. A snapshot of another attempt is never trusted,
        # so the changelogs that rebuild the versions it claims to hold are never deleted.
        self._trusted_snapshots: set[int] = set()
        self._loaded_base_trusted = False
        # Whether every changelog of the load in progress continues the state before it: only
        # then is a changelog's own count of keys (`keys`) that of the state the load builds.
        self._loaded_chained = True
        # The version an empty store was opened at (Spark's loadEmpty: `ttlstate migrate`, state
        # rewriting): nothing below it is in this checkpoint, so its commit is snapshotted at
        # once, as the only file that can rebuild it.
        self._empty_at: int | None = None
        self._batch_times: dict[int, int | None] = {}
        self._stamp = 0
        self._closed = False
        self.num_keys = 0
        self._plane: DataPlane | None = None  # chosen with the first engine, kept for good
        self._unreported: Counter[str] = Counter()
        self._filter_removed_counted = 0
        self._warned_no_watermark = False
        # Changes at every `_load`, the only way to a version other than by this provider's own
        # commits (a dropped local DB is always reloaded before it serves), so a cache of its
        # keys held elsewhere (the shim's key filter) knows when it went stale. Random start: a
        # restarted server never repeats an earlier provider's value.
        self.lineage = secrets.randbits(62)
        # The key filter hashes of every key of the version a load built the local DB from
        # nothing for (where the data plane has them), until the shim takes them for its
        # filter (restored_keys.py), or the local DB moves to another lineage.
        self._restored: RestoredKeys | None = None
        self._collecting: KeyHashes | None = None  # while a restore runs
        # The last commit's batch, still going into the local DB after the commit returned, and
        # its version (see commit_store); waited for before anything uses the local DB again.
        self._applying: tuple[PendingApply, int] | None = None

    # -- engine ---------------------------------------------------------------------------
    @property
    def engine(self) -> Engine:
        if self._engine is None:
            raise StoreStateError(f"ttlstate store {self.store_id}: no version is loaded")
        return self._engine

    @property
    def current_stamp(self) -> int:
        return self._stamp

    @property
    def local_version(self) -> int | None:
        return self._local_version

    def _filter_settings(self) -> FilterSettings | None:
        ttl = self.config.ttl
        if not ttl.enabled or ttl.compaction_filter is None:
            return None
        cf = ttl.compaction_filter
        return FilterSettings(ttl_ms=ttl.ttl_ms or 0,
                              query_time_after_num_entries=cf.query_time_after_num_entries,
                              periodic_compaction_seconds=cf.periodic_compaction_ms // 1000)

    @property
    def plane(self) -> DataPlane:
        if self._plane is None:
            raise StoreStateError(f"ttlstate store {self.store_id}: no version is loaded")
        return self._plane

    def _open_empty(self) -> None:
        self._drop_local()
        self._open_engine()
        self.sst.new_lineage()
        self.num_keys = 0

    def _open_engine(self) -> None:
        self._engine = open_engine(self.config.engine, self._db_dir, self._filter_settings())
        if self._plane is None:
            self._plane = planes.for_engine(self._engine, self._lock)
        self._filter_removed_counted = self._engine.metrics().get("filter_removed", 0)

    def _open_sst_snapshot(self, snapshot: Fetched, version: int) -> None:
        """Opens the local DB on the SST files of `snapshot` (a manifest: sst_manifest.py)."""
        name, local, header = snapshot
        try:
            manifest = read_manifest(local, header)
        except RecordFileError as e:
            raise CheckpointError(self.store_id, version, name, str(e)) from None
        self._drop_local()
        self.sst.place(manifest, self._db_dir, version, name)
        self._open_engine()
        self.sst.new_lineage(manifest)
        self.num_keys = manifest.keys
        self._batch_times[header.version] = header.batch_time_ms

    def _drop_local(self) -> None:
        pending, self._applying = self._applying, None
        if pending is not None:
            pending[0].abandon()  # waits: the apply writes to the DB about to be closed
        self._forget_restored()
        if self._engine is not None:
            try:
                self._engine.close()
            except Exception as e:  # the local copy is being discarded; only the checkpoint counts
                log.warning("ttlstate store %s: closing the discarded local DB failed: %s", self.store_id, e)
            self._engine = None
        self._local_version = None
        self._state_id = None
        self._empty_at = None
        shutil.rmtree(self._db_dir, ignore_errors=True)

    # -- versions -------------------------------------------------------------------------
    def _now(self, version: int, now_ms: int | None, watermark_ms: int,
             previous_batch_ms: int | None) -> int:
        """The store's time for the batch that loads `version` (ttl/clock.py), from the offset
        log's values for it and the time recorded for `version` (the batch before's)."""
        if now_ms is None:
            return self.clock.now_ms()
        ttl = self.config.ttl
        if (ttl.time_source is TimeSource.WATERMARK and watermark_ms <= 0 and version >= 2
                and not self._warned_no_watermark):
            self._warned_no_watermark = True
            log.warning("ttlstate store %s: timeSource=watermark, but batch %d has no event-time "
                        "watermark yet: TTL counts its batch timestamp until there is one. A query "
                        "without withWatermark never gets one (ttlstate's SQL extension, which "
                        "configure installs, refuses such a query at start)", self.store_id, version)
        return store_time(ttl.time_source, BatchClock(now_ms, watermark_ms, previous_batch_ms),
                          self._batch_times.get(version), ttl.clock_max_gap_ms, self.clock)

    def recorded_time_ms(self, version: int) -> int | None:
        """The time the checkpoint recorded for `version` (the store time of the batch that
        wrote it), once it was loaded or committed here; None if unknown."""
        with self._lock:
            return self._batch_times.get(version)

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
        with self._lock:
            if self._closed:
                raise StoreStateError(f"ttlstate store {self.store_id}: provider is closed")
            self._settle()
            if self._engine is not None and not os.path.isdir(self._db_dir):
                log.warning("ttlstate store %s: local state directory vanished; restoring "
                            "from the checkpoint", self.store_id)
                self._drop_local()
            if empty:
                self.lineage += 1
                self._open_empty()
                self._local_version = version
                self._empty_at = version
                self._v2_lineage = ()
                self._trusted_snapshots.clear()
                self._batch_times.pop(version, None)
                empty_hashes = self.plane.key_hashes()
                self._forget_restored()
                if empty_hashes is not None:
                    self._restored = RestoredKeys(self.lineage, version, ready=empty_hashes)
            elif (from_snapshot is not None or self._engine is None or self._local_version != version
                  or (self.checkpoint_ids and version > 0 and ckpt_id != self._state_id)):
                try:
                    if self.checkpoint_ids and version > 0 and ckpt_id:
                        self._load_by_id(version, ckpt_id, from_snapshot, snapshot_ckpt_id)
                    else:  # format 1, or a format 1 version a query moving to format 2 builds on
                        self._load(version, from_snapshot)
                except CheckpointError as e:
                    if e.where is not None:
                        raise
                    raise e.located(self.files.describe(e.file_name)) from e.__cause__
            now = self._now(version, now_ms, watermark_ms, previous_batch_ms)
            if self.reader:
                now = self._as_the_query_saw_it(version, now)
            self.engine.set_time(now)
            self._stamp += 1
            return self.plane.begin(self, self.engine, version, now, not read_only, self._stamp)

    def keep_restored_key_hashes(self, wanted: bool) -> int:
        """After get_store: whether the key filter hashes of every key of the version it just
        loaded are kept for `take_key_filter_bits` (restored_keys.py: NONE, READY, or SCANNING:
        the scan starts now, ask at the next loads). Only when `wanted` and get_store built the
        local DB for this version from nothing, with a data plane that has them (the native
        one); when not wanted they are dropped."""
        with self._lock:
            r = self._restored
            if r is None or self._local_version is None or not r.describes(self.lineage, self._local_version):
                return NONE
            if not wanted:
                self._forget_restored()
                return NONE
            r.start()
            return r.state

    def take_key_filter_bits(self, lineage: int, version: int, bits_log2: int, probes: int) -> bytes | None:
        """Once: the bits of a key filter layer of 2^bits_log2 bits holding every key of
        `version` of local DB lineage `lineage`, which a load built from nothing (see
        `keep_restored_key_hashes`), set as the shim's filter sets them; empty while their scan
        still runs (ask again later); None if they are not kept (another version or lineage,
        taken, or their scan failed)."""
        with self._lock:
            r = self._restored
            if r is None or not r.describes(lineage, version) or lineage != self.lineage:
                return None
            if not r.done:
                return b""
            self._restored = None
        if r.state != SCANNING:
            return r.bloom_words(bits_log2, probes)
        try:
            return r.bloom_words(bits_log2, probes)
        except (OSError, RuntimeError) as e:
            log.warning("ttlstate store %s: scanning the keys of restored version %d for the key "
                        "filter failed (%s); the shim scans them itself", self.store_id, version, e)
            return None

    def _forget_restored(self) -> None:
        """Drops the kept hashes. A scan still running stops when its DB closes, or ends on its
        own and is ignored: nothing waits for it."""
        self._restored = None

    def upgrade(self, store: StoreVersion) -> StoreVersion:
        """Turn a read store into the write store of the same version, in place."""
        with self._lock:
            store.make_writable()
            return store

    def _load(self, version: int, from_snapshot: int | None = None) -> None:
        self.lineage += 1
        use_local = self._engine is not None
        skip: set[int] = set()
        unusable: SnapshotFilesUnusable | None = None  # the last snapshot passed over, if any
        refreshed = from_snapshot is not None
        while True:
            local = self._local_version if use_local and self._engine is not None else None
            if from_snapshot is not None:
                plan = plan_from_snapshot(self.store_id, self.files.listing(refresh=True), from_snapshot,
                                          version)
            else:
                try:
                    plan = plan_restore(self.store_id, self.files.listing(refresh=refreshed), version,
                                        local, frozenset(skip))
                except VersionNotFound as e:
                    if unusable is not None:  # nothing older rebuilds it: say why the snapshot did not
                        raise unusable from e
                    if refreshed:
                        raise
                    refreshed = True
                    continue
            with self.files.staged() as fetched:
                try:
                    stale = self._fetch_plan(plan, version, fetched, strict=from_snapshot is not None)
                except VersionNotFound:
                    if refreshed:  # a file listed a moment ago is gone: list again, once
                        raise
                    refreshed = True
                    continue
                if stale == "local":
                    use_local = False
                    continue
                if stale is not None:
                    skip.add(plan.base_version)
                    continue
                try:
                    self._apply_plan(plan, fetched, version)
                except SnapshotFilesUnusable as e:
                    if from_snapshot is not None:  # asked for by name: no other base will do
                        raise
                    log.warning("%s; loading version %d from an older base instead", e, version)
                    skip.add(plan.base_version)
                    unusable = e
                    continue
                self._v2_lineage, self._state_format1 = (), True
                return

    def _load_by_id(self, version: int, ckpt_id: str, from_snapshot: int | None,
                    snapshot_id: str | None) -> None:
        """Checkpoint format 2: exactly the version Spark's commit log names by its id."""
        self.lineage += 1
        refreshed = False
        while True:
            files = self.files.listing(refresh=refreshed)
            local = ((self._local_version, self._state_id)
                     if self._engine is not None and self._state_id and from_snapshot is None else None)
            with self.files.staged() as fetched:
                try:
                    lineage: tuple[tuple[int, str], ...] = ()
                    if from_snapshot == version or (
                            from_snapshot is None and names.snapshot_name(version, ckpt_id) in files):
                        top = None
                    else:
                        top = names.changelog_name(version, ckpt_id)
                        fetched.append((top, *self.files.fetch_verified(top, KIND_CHANGELOG, version)))
                        lineage = fetched[0][2].lineage or ()
                    while (from_snapshot is not None and lineage and lineage[-1][0] > from_snapshot
                           and lineage[-1][1] != EMPTY):
                        # The lineage ends at a newer snapshot than the one asked for: follow it on.
                        older = names.changelog_name(*lineage[-1])
                        fetched.append((older, *self.files.fetch_verified(older, KIND_CHANGELOG, version)))
                        if not fetched[-1][2].lineage:
                            break
                        lineage = lineage + fetched[-1][2].lineage
                    wanted_snapshot = None if from_snapshot is None else (from_snapshot, snapshot_id)
                    plan = plan_by_id(self.store_id, files, version, ckpt_id, lineage, local,
                                      wanted_snapshot)
                    if plan.snapshot:
                        fetched.append((plan.snapshot, *self.files.fetch_verified(
                            plan.snapshot, KIND_SNAPSHOT, version)))
                    have = {name for name, _p, _h in fetched}
                    for name in plan.changelogs:
                        if name not in have:
                            fetched.append((name, *self.files.fetch_verified(name, KIND_CHANGELOG, version)))
                    fetched.sort(key=lambda f: (f[2].version, f[2].kind == KIND_CHANGELOG))
                except VersionNotFound:
                    if refreshed:
                        raise
                    refreshed = True
                    continue
                self._verify_ids(plan, fetched, version)
                self._loaded_chained = True  # _verify_ids refuses files that do not chain
                self._loaded_state = ckpt_id
                self._loaded_base_trusted = bool(plan.snapshot)
                self._apply_plan(plan, fetched, version)
                self._v2_lineage, self._state_format1 = lineage, False
                return

    def _verify_ids(self, plan: RestorePlan, fetched: list[Fetched],
                    version: int) -> None:
        """Every file of a format 2 plan holds the id its name says, and each changelog continues
        the one before it: a file of another lineage or attempt is refused, naming both."""
        previous: tuple[str, str | None]
        if plan.from_local:
            previous = (f"the local state of version {plan.base_version}", self._state_id)
        else:
            previous = ("the empty state", None)
        for name, _path, header in fetched:
            parsed = names.parse(name)
            named = parsed.ckpt_id if parsed else None
            if not named:  # a format 1 file below a query's move to format 2
                previous = (self.files.describe(name),
                            header.state if header.kind == KIND_SNAPSHOT else header.fingerprint)
                continue
            if header.kind == KIND_SNAPSHOT:
                if header.state not in (None, named):
                    raise CheckpointError(self.store_id, version, name,
                                          f"holds the state of checkpoint id {header.state}, not {named}")
                previous = (self.files.describe(name), named)
                continue
            if header.ckpt_id not in (None, named):
                raise CheckpointError(self.store_id, version, name,
                                      f"holds checkpoint id {header.ckpt_id}, not {named}")
            if header.parent != previous[1] and not (previous[1] == EMPTY and header.parent is None):
                raise CheckpointError(self.store_id, version, name,
                                      f"continues the state of checkpoint id {header.parent}, but "
                                      f"{previous[0]} holds {previous[1] or 'the empty state'}: the "
                                      "files belong to different lineages or attempts")
            previous = (self.files.describe(name), named)

    def _fetch_plan(self, plan: RestorePlan, version: int,
                    fetched: list[Fetched], strict: bool) -> str | None:
        """Fetch and verify every file of `plan` into `fetched` (whole, and bound to this store
        and version) before one record is applied: a bad file anywhere changes nothing. Returns
        None, or what holds another attempt's state ("local", or "snapshot"): see lineage.py.
        `strict`: the snapshot was asked for by name (snapshotStartBatchId); one of another
        attempt is an error then, not skipped."""
        if plan.snapshot:
            fetched.append((plan.snapshot, *self.files.fetch_verified(plan.snapshot, KIND_SNAPSHOT, version)))
        for name in plan.changelogs:
            fetched.append((name, *self.files.fetch_verified(name, KIND_CHANGELOG, version)))
        changelogs = [h for _n, _p, h in fetched if h.kind == KIND_CHANGELOG]
        if plan.from_local:
            base_state, base = self._state_id, f"the local state of version {plan.base_version}"
        elif plan.snapshot:
            base_state, base = fetched[0][2].state, self.files.describe(plan.snapshot)
        else:
            base_state, base = None, "empty state"
        chain = follow(base_state, changelogs)
        if not changelogs and plan.snapshot and base_state is not None:
            # Loading exactly a snapshot's version: the snapshot must hold what that version's
            # changelog (when there is one) wrote.
            name = names.changelog_name(plan.base_version)
            if name in self.files.listing(refresh=False):
                path, header = self.files.fetch_verified(name, KIND_CHANGELOG, version)
                fetched.append((name, path, header))
                if not continues(fetched[0][2], header):
                    chain = Chain((0,), base_state)
        self._loaded_base_trusted = bool(plan.snapshot) and (not chain.breaks or chain.breaks[0] > 0)
        self._loaded_chained = not chain.breaks
        if not chain.breaks:
            self._loaded_state = chain.state
            return None
        first = plan.changelogs[chain.breaks[0]] if changelogs else names.changelog_name(plan.base_version)
        if chain.breaks[0] == 0 and (plan.from_local or plan.snapshot):
            what = "local" if plan.from_local else "snapshot"
            message = (f"ttlstate store {self.store_id}: {base} holds another attempt's state of "
                       f"version {plan.base_version} than {self.files.describe(first)} "
                       f"continues (a re-run batch, a retried task or a second writer)")
            if strict:
                raise CheckpointError(self.store_id, version, plan.snapshot or first,
                                      f"holds another attempt's state than "
                                      f"{self.files.describe(first)} continues: replay from "
                                      "another snapshot")
            log.warning("%s; loading version %d from an older base instead", message, version)
            return what
        for i in chain.breaks:
            log.warning("ttlstate store %s: %s does not continue the state before it (two writers "
                        "committed version %d with different output); loading version %d as "
                        "Spark's commit log reads it, as Spark's own providers do", self.store_id,
                        self.files.describe(plan.changelogs[i]), version - len(changelogs) + i,
                        version)
        self._loaded_state = chain.state
        return None

    def _apply_plan(self, plan: RestorePlan, fetched: list[Fetched],
                    version: int) -> None:
        wanted = {plan.snapshot, *plan.changelogs}
        rest = [f for f in fetched if f[0] in wanted]
        try:
            scan_keys = False
            self._forget_restored()
            if not plan.from_local and rest and rest[0][2].format == SST_MANIFEST_FORMAT:
                self._open_sst_snapshot(rest[0], version)
                rest = rest[1:]
                scan_keys = self.plane.key_hashes() is not None  # nothing was built: scan them
            elif not plan.from_local:
                self._open_empty()
                self._collecting = self.plane.key_hashes()
                if rest:
                    rest = self._build(rest, version)
            for i, (name, local_path, header) in enumerate(rest):
                # The writer's counts hold for the state it wrote them on: not across a break
                # in the chain (another writer's version below), whose keys are counted here.
                after = rest[i + 1][2] if i + 1 < len(rest) else None
                if not self._loaded_chained:
                    keys_after = None
                elif after is not None and after.parent == header.state_id:
                    keys_after = after.parent_keys
                else:
                    keys_after = header.keys
                self._replay_changelog(name, local_path, header, version, keys_after=keys_after)
            if self._collecting is not None:
                self._restored = RestoredKeys(self.lineage, version, ready=self._collecting)
            elif scan_keys:
                self._restored = RestoredKeys(self.lineage, version, engine=self.engine,
                                              fresh=self.plane.key_hashes)
        except BaseException:
            self._drop_local()  # never serve a partially loaded version
            raise
        finally:
            self._collecting = None
        self._local_version = version
        self._state_id = self._loaded_state
        self._trusted_snapshots = {v for v in self._trusted_snapshots if v <= version}
        if self._loaded_base_trusted:
            self._trusted_snapshots.add(plan.base_version)
        if fetched:
            self._check_settings(fetched[-1][2])  # the newest file of the version

    def changelog_records(self, version: int, end: tuple[int, str] | None = None
                          ) -> Iterator[tuple[bytes, bytes | None]]:
        """The records of the changelog of `version` in file order, after verifying the whole
        file and that it is this store's (the state data source's change feed). `end`: on
        checkpoint format 2, the (version, id) whose lineage names the changelog to read."""
        with self._lock:
            name = names.changelog_name(version, self._id_on_lineage(version, end) if end else "")
            local, header = self.files.fetch_verified(name, KIND_CHANGELOG, version)
        try:
            yield from read_records(local, header)
        finally:
            os.unlink(local)

    def _id_on_lineage(self, version: int, end: tuple[int, str]) -> str:
        """Format 2: the checkpoint id of `version` on the lineage of `end` (version, id)."""
        at, at_id = end
        while at > version:
            name = names.changelog_name(at, at_id)
            local, header = self.files.fetch_verified(name, KIND_CHANGELOG, version)
            os.unlink(local)
            older = [(v, i) for v, i in header.lineage or () if i != EMPTY]
            for v, i in older:
                if v == version:
                    return i
            if not older:
                break
            at, at_id = older[-1]
        if at == version:
            return at_id
        raise VersionNotFound(self.store_id, version, names.changelog_name(version, "<id>"),
                              f"is not on the lineage of version {end[0]} ({end[1]})")

    def _check_settings(self, newest: RecordFileHeader) -> None:
        self._written_with = recorded_ttl(newest.settings, newest.ttl_ms, self.config.ttl)
        if not self.reader:
            warn_if_changed(self.store_id, self.query_id, newest.settings, self.config.ttl)

    def _as_the_query_saw_it(self, version: int, now: int) -> int:
        """A state reader's version: the TTL its files recorded (off with reader.includeExpired)
        and the time of the batch that wrote it; returns that time."""
        ttl = self._written_with or self.config.ttl
        if self.config.reader_include_expired:
            ttl = ttl.disabled()
        self.config = replace(self.config, ttl=ttl)
        written_at = self._batch_times.get(version)
        return written_at if written_at is not None else now

    def _build(self, fetched: list[Fetched], version: int) -> list[Fetched]:
        """Builds the empty DB from what the data plane takes in one pass (the snapshot, and
        changelogs after it where it can); returns the files left to replay one by one."""
        built = self.plane.build(
            self.engine, fetched, self.files.staging_path(f"restore-{version}.sst"),
            self._collecting, lambda name, reason: CheckpointError(self.store_id, version, name, reason))
        if built.used:
            self.num_keys = built.num_keys
        for _name, _local, header in built.used:
            self._batch_times[header.version] = header.batch_time_ms
            if header.kind == KIND_CHANGELOG:
                self._unreported[M.REPLAYED_CHANGELOGS.name] += 1
        return built.rest

    def _replay_changelog(self, name: str, local: str, header: RecordFileHeader, version: int,
                          keys_after: int | None = None) -> None:
        """`keys_after`: the number of keys once it is applied, when the next changelog (which
        continues it) or its own header (`keys`) recorded it; then no lookups count them. (With
        the compaction filter that is the writer's count: entries its filter had removed may
        still be here, expired and never read, until this DB's filter removes them and the
        store recounts.)"""
        try:
            delta = self.plane.replay_changelog(self.engine, local, header, self._collecting,
                                                count_keys=keys_after is None)
        except RecordFileError as e:
            raise CheckpointError(self.store_id, version, name, str(e)) from None
        self.num_keys = keys_after if keys_after is not None else self.num_keys + delta
        self._batch_times[header.version] = header.batch_time_ms
        self._unreported[M.REPLAYED_CHANGELOGS.name] += 1

    # -- commit ---------------------------------------------------------------------------
    def commit_store(self, store: StoreVersion) -> int:
        with self._lock:
            self._settle()
            if store.version != self._local_version:
                raise StoreStateError(f"ttlstate store {self.store_id}: cannot commit version "
                                      f"{store.version + 1}; the local state moved to "
                                      f"{self._local_version}")
            started = time.monotonic()
            new_version = store.version + 1
            new_id = str(uuid.uuid4()) if self.checkpoint_ids else ""
            name = names.changelog_name(new_version, new_id)
            local = self.files.staging_path(name)
            inc = self.config.ttl.incremental
            periodic_cleanup = self.config.ttl.enabled and inc is not None and not inc.per_record
            lineage: dict[str, object] = {"parent": self._state_id, "parent_keys": self.num_keys,
                                          "settings": settings_of(self.config.ttl)}
            v2_lineage = self._commit_lineage(store.version) if new_id else None
            if new_id:
                lineage.update(ckpt_id=new_id, lineage=v2_lineage)
            if periodic_cleanup:
                store.incremental_step()
            # The native plane applies the batch to the local DB while the changelog is written
            # and uploaded (an upload is a round trip to the checkpoint's file system): the two
            # are independent (both only read the batch's writes), so a failed changelog write
            # or upload then discards the local DB, as a failed apply does. The store's lock,
            # held throughout, keeps every other use of this transaction out meanwhile. A large
            # batch is bulk-loaded through an SST file written in the staging directory. Once
            # the changelog is published the version is committed: when the change in keys is
            # known without the apply's lookups, the commit returns without waiting for the
            # apply, and `_settle` waits for it before anything uses the local DB again; unless
            # the commit's metrics need the applied DB (a `compactEvery` compaction is due, or
            # the compaction filter removed keys to recount). The portable plane applies after
            # the upload, on this thread.
            # A known change in keys also goes into the changelog's header (`keys`), so a load
            # that ends with this changelog need not look its keys up to count them.
            applying = store.start_apply(local + ".sst")
            try:
                count_now = self._compaction_due(new_version) or self._filter_removed_uncounted()
                delta = None if count_now else applying.known_delta()
                header = header_json(self.store_id, new_version, store.now_ms, self.config.ttl.ttl_ms,
                                     self.query_id, **lineage,
                                     keys=None if delta is None else self.num_keys + delta)
                store.write_changelog(local, header)
                state_id = new_id or file_fingerprint(local)
                crash_point("commit-before-upload")  # tests only; inert unless TTLSTATE_FAULTS is set
                self._publish_changelog(local, name, new_version)
                if delta is None:
                    delta = applying.result()
                else:
                    applying.detach()
                    self._applying = (applying, new_version)
            except BaseException:
                if applying.abandon():
                    self._drop_local()
                raise
            self.num_keys += delta
            base_id = None if self._state_format1 else self._state_id  # Spark's id of the base
            self.last_commit_ids = (new_id, base_id) if new_id else (None, None)
            self._local_version = new_version
            self._state_id = state_id
            self._state_format1 = not new_id
            if v2_lineage is not None:
                self._v2_lineage = tuple(v2_lineage)
            self._trusted_snapshots = {v for v in self._trusted_snapshots if v < new_version}
            self._batch_times[new_version] = store.now_ms
            if self._applying is None:
                self._applied(new_version)
            if self._empty_at is not None and self._empty_at == store.version and store.version > 0:
                self.write_snapshot()
            self._empty_at = None
            self._unreported[M.COMMIT_TIME_MS.name] += int((time.monotonic() - started) * 1000)
            return new_version

    def _settle(self) -> None:
        """Waits for the last commit's apply if it is still running (see commit_store). One that
        failed leaves the local DB unknown: it is dropped, and the next load rebuilds the version
        from the checkpoint, which holds its changelog already."""
        pending, self._applying = self._applying, None
        if pending is None:
            return
        applying, version = pending
        try:
            applying.result()
        except Exception as e:
            log.warning("ttlstate store %s: applying committed version %d to the local DB failed "
                        "(%s); the next load rebuilds it from the checkpoint", self.store_id,
                        version, e)
            self._drop_local()
            return
        self._applied(version)

    def _applied(self, version: int) -> None:
        """What follows a commit's apply: maintenance of the local DB that reads what it holds."""
        self._maybe_compact(version)
        self._recount_if_filter_removed()

    def _commit_lineage(self, version: int) -> list[tuple[int, str]]:
        """Format 2: the lineage a commit on `version` records, newest first, down to the first
        snapshot this writer trusts, or to the empty state."""
        if self._state_format1 and self._state_id:
            full = [(version, FORMAT1)]  # built on format 1 files: found by version alone
        else:
            full = [(version, self._state_id or EMPTY), *self._v2_lineage]
        for i, (k, kid) in enumerate(full):
            if kid == EMPTY or k in self._trusted_snapshots:
                return full[: i + 1]
        return full

    def _publish_changelog(self, local: str, name: str, new_version: int) -> None:
        self.files.publish(local, name)
        # Files of other attempts of this or later versions stay: they may be another
        # writer's committed versions, and lineage (checkpoint/lineage.py) keeps a load from
        # mixing them in.
        crash_point("commit-after-upload")

    def _compaction_due(self, version: int) -> bool:
        cf = self.config.ttl.compaction_filter
        return (self.config.ttl.enabled and cf is not None and cf.compact_every_commits > 0
                and self.engine.has_compaction_filter and version % cf.compact_every_commits == 0)

    def _maybe_compact(self, version: int) -> None:
        """`compactEvery`: a full compaction runs the filter over everything, memtable included."""
        if self._compaction_due(version):
            self.engine.compact()

    def _filter_removed_uncounted(self) -> bool:
        return self.engine.metrics().get("filter_removed", 0) != self._filter_removed_counted

    def _recount_if_filter_removed(self) -> None:
        """The compaction filter deletes behind our back; recount keys when it did."""
        removed = self.engine.metrics().get("filter_removed", 0)
        if removed != self._filter_removed_counted:
            self._unreported[M.TTL_REMOVED_BY_FILTER.name] += removed - self._filter_removed_counted
            self._filter_removed_counted = removed
            self.num_keys = self.engine.count_keys()

    # -- maintenance ----------------------------------------------------------------------
    def do_snapshot_maintenance(self) -> None:
        """Snapshot the loaded version when `snapshot_interval` versions passed since the last."""
        with self._lock:
            self._settle()
            if self._closed or self._engine is None or self._local_version is None:
                return
            version = self._local_version
            last = max((v for v in self._trusted_snapshots if v <= version), default=0)
            due = version - last >= self.config.snapshot_interval
        if due:
            self.write_snapshot()

    def write_snapshot(self) -> str | None:
        """Write and publish the snapshot of the loaded version; returns its file name.

        The file is written from the data plane's view of the DB (on the native plane a pinned
        RocksDB snapshot, without holding the store, so the store's next batch loads, writes and
        commits meanwhile); the upload then happens under the store's lock, and only if no
        reload replaced the local DB in between (a re-run batch may have superseded that
        version). None: it was skipped.
        """
        with self._lock:
            started = time.monotonic()
            if self._applying is not None:
                self._settle()
                if self._local_version is None:
                    return None  # the apply failed: the local DB was dropped (see _settle)
            version = self._local_version
            if version is None:
                raise StoreStateError(f"ttlstate store {self.store_id}: no version is loaded")
            if self.checkpoint_ids and not self._state_id:
                return None  # format 2: an empty state at its first version has no id to name
            name = names.snapshot_name(version, (self._state_id or "") if self.checkpoint_ids else "")
            local = self.files.staging_path(f".{name}.{secrets.token_hex(4)}")
            ttl = self.config.ttl
            batch_time = self._batch_times.get(version)
            drop = ttl.enabled and ttl.full_snapshot and batch_time is not None
            lineage = {"state": self._state_id, "settings": settings_of(ttl)}
            header = header_json(self.store_id, version, batch_time, ttl.ttl_ms, self.query_id,
                                 **lineage)
            engine = self.engine
            loaded = self.lineage
            if self._snapshot_layout() is SnapshotLayout.SST:
                prepared = self._checkpoint(local + ".ckpt")
                view = None
            else:
                prepared, view = None, self.plane.snapshot_view(engine, ttl)
        if prepared is not None:
            return self._write_sst_snapshot(prepared, name, local, header, version, loaded, started)
        assert view is not None
        try:
            crash_point("snapshot-before-write")  # tests only
            dropped_n = view.write(local, header, drop, ttl.ttl_ms or 0, batch_time or 0)
        except RuntimeError:
            if os.path.exists(local):
                os.unlink(local)
            with self._lock:
                if self.lineage != loaded or self._engine is not engine:
                    log.info("ttlstate store %s: snapshot of version %d skipped: the local state "
                             "was reloaded while it was being written", self.store_id, version)
                    return None
            raise
        finally:
            view.close()
        with self._lock:
            if not self._still_loaded(loaded, local, version, "it was being written"):
                return None
            self._publish_snapshot(local, name, dropped_n, started)
        return name

    def _still_loaded(self, loaded: int, local: str, version: int, while_: str) -> bool:
        """Whether the local DB a snapshot was taken of is still the loaded one (the store held);
        if not, the snapshot's file is dropped unpublished."""
        if self.lineage == loaded and not self._closed:
            return True
        os.unlink(local)
        log.info("ttlstate store %s: snapshot of version %d not published: the local state was "
                 "reloaded while %s", self.store_id, version, while_)
        return False

    def _snapshot_layout(self) -> SnapshotLayout:
        """SST files where the engine can checkpoint and the config does not say records.
        `cleanup.fullSnapshot` applies to record snapshots only (a rewrite of the state), as
        Flink's full-snapshot cleanup does not apply to incremental checkpoints."""
        if not self.engine.can_checkpoint:
            return SnapshotLayout.RECORDS
        return self.config.snapshot_layout

    def _checkpoint(self, directory: str) -> PreparedUpload:
        """A RocksDB checkpoint of the loaded version, taken with the store held (hard links: the
        memtable's flush is its only cost)."""
        try:
            self.engine.checkpoint(directory)
            return self.sst.prepare(directory, self.num_keys)
        except BaseException:
            shutil.rmtree(directory, ignore_errors=True)
            raise

    def _write_sst_snapshot(self, prepared: PreparedUpload, name: str, local: str, header: bytes,
                            version: int, loaded: int, started: float) -> str | None:
        """The SST layout of write_snapshot: uploads the checkpoint's SST files the checkpoint
        does not hold yet and writes the manifest without holding the store, then publishes it
        if no reload replaced the local DB meanwhile."""
        try:
            crash_point("snapshot-before-write")  # tests only
            with self._lock:
                superseded = self.lineage != loaded or self._closed
            if superseded:  # uploading its files would only leave orphans
                log.info("ttlstate store %s: snapshot of version %d skipped: the local state was "
                         "reloaded meanwhile", self.store_id, version)
                return None
            manifest = self.sst.upload(prepared)
            write_manifest(local, header, manifest)
        except BaseException:
            if os.path.exists(local):
                os.unlink(local)
            raise
        finally:
            shutil.rmtree(prepared.directory, ignore_errors=True)
        with self._lock:
            if not self._still_loaded(loaded, local, version, "its files were uploaded"):
                return None
            self._publish_snapshot(local, name, 0, started)
            self.sst.published(name, prepared, manifest)
        return name

    def _publish_snapshot(self, local: str, name: str, dropped: int, started: float) -> None:
        self.files.publish(local, name)
        parsed = names.parse(name)
        if parsed is not None:
            self._trusted_snapshots.add(parsed.version)
        self._unreported[M.TTL_DROPPED_FROM_SNAPSHOT.name] += dropped
        self._unreported[M.SNAPSHOT_TIME_MS.name] += int((time.monotonic() - started) * 1000)

    def do_cleanup_maintenance(self, min_versions_to_retain: int) -> list[str]:
        """Delete checkpoint files older than what the newest N versions need."""
        with self._lock:
            if self._closed or self._local_version is None:
                return []
            listing = self.files.listing(refresh=True)
            doomed = deletable_files(listing, min_versions_to_retain, self._local_version,
                                     self._trusted_snapshots)
            if doomed:
                self.files.delete(doomed)
            gone = set(doomed)
            ssts = self.sst.deletable([n for n in listing if n not in gone])
            if ssts:
                self.files.delete(ssts)
                self.sst.deleted(ssts)
            return doomed + ssts

    def drain_metrics(self) -> dict[str, int]:
        """Counters accumulated since the last report (Spark sums what each batch reports)."""
        with self._lock:
            out = {m.name: 0 for m in M.ALL_METRICS}
            out.update(self._unreported)
            self._unreported.clear()
            if self._engine is not None:
                sst = self._engine.disk_bytes()
                out[M.ROCKSDB_SST_FILE_SIZE.name] = sst
                out[M.STATE_BYTES.name] = sst + self._engine.memtable_bytes()
                fallback = self.config.engine is EngineKind.AUTO and self._engine.kind != "native"
                out[M.ENGINE_FALLBACK.name] = int(fallback)
            return out

    def store_metrics(self, expired_on_read: int, removed_incremental: int, pending_bytes: int
                      ) -> StoreMetrics:
        """A store version's metrics, for either data plane: the provider's counters since the
        last report, the version's own, and their TTL total."""
        custom = self.drain_metrics()
        custom[M.TTL_EXPIRED_ON_READ.name] = expired_on_read
        custom[M.TTL_REMOVED_INCREMENTAL.name] = removed_incremental
        custom[M.TTL_EXPIRED_TOTAL.name] = (expired_on_read + removed_incremental
                                            + custom.get(M.TTL_REMOVED_BY_FILTER.name, 0))
        custom[M.NUM_REMOVED_STATE_ROWS.name] = custom[M.TTL_EXPIRED_TOTAL.name]
        return StoreMetrics(self.num_keys, self.memory_bytes(pending_bytes), custom)

    def memory_bytes(self, pending_bytes: int) -> int:
        """Spark's `memoryUsedBytes`, as its RocksDB provider counts it for one store: memtables
        and SST readers outside the block cache, plus the batch's pending writes. The block cache
        is shared by a worker's stores (`memory.maxBytes`), so no store's share of it is counted."""
        with self._lock:
            if self._engine is None:
                return pending_bytes
            return self._engine.memtable_bytes() + self._engine.table_reader_bytes() + pending_bytes

    def close(self) -> None:
        with self._lock:
            self._settle()
            self._forget_restored()
            self._closed = True
            self._stamp += 1
            if self._plane is not None:
                self._plane.close()
            if self._engine is not None:
                self._engine.close()
                self._engine = None

