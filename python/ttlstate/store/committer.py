"""A commit: the batch's changelog published in the checkpoint, and the batch applied to the
local DB, which may finish after the commit returned.

The native plane applies the batch to the local DB while the changelog is written and uploaded
(an upload is a round trip to the checkpoint's file system): the two are independent (both only
read the batch's writes), so a failed changelog write or upload then discards the local DB, as a
failed apply does. The store's lock, held throughout, keeps every other use of this transaction
out meanwhile. A large batch is bulk-loaded through an SST file written in the staging
directory. Once the changelog is published the version is committed: when the change in keys is
known without the apply's lookups, the commit returns without waiting for the apply, and
`LocalDb.settle` waits for it before anything uses the local DB again; unless the commit's
metrics need the applied DB (a `compactEvery` compaction is due, or the compaction filter
removed keys to recount). The portable plane applies after the upload, on this thread. A known
change in keys also goes into the changelog's header (`keys`), so a load that ends with this
changelog need not look its keys up to count them; the internal column families' share of it
goes beside it (`internalKeys`), when the local DB knows its own.
"""

from __future__ import annotations

import time
import uuid

from ttlstate.checkpoint import names
from ttlstate.checkpoint.record_file import file_fingerprint, header_json
from ttlstate.errors import StoreStateError
from ttlstate.faults import crash_point
from ttlstate.store import metric_names as M
from ttlstate.store.batch_times import BatchTimes
from ttlstate.store.context import StoreContext
from ttlstate.store.local_db import LocalDb
from ttlstate.store.planes.base import KeyChange, PendingApply, StoreVersion
from ttlstate.store.recorded_settings import settings_of
from ttlstate.store.snapshots import SnapshotWriter
from ttlstate.store.timeline import Timeline


class Committer:
    def __init__(self, ctx: StoreContext, db: LocalDb, timeline: Timeline, times: BatchTimes,
                 snapshots: SnapshotWriter) -> None:
        self._ctx = ctx
        self._db = db
        self._timeline = timeline
        self._times = times
        self._snapshots = snapshots

    def commit(self, store: StoreVersion) -> int:
        """Commits `store`'s batch as the next version; returns it."""
        ctx, db = self._ctx, self._db
        with ctx.lock:
            db.settle()
            if store.version != db.version:
                raise StoreStateError(f"ttlstate store {ctx.store_id}: cannot commit version "
                                      f"{store.version + 1}; the local state moved to {db.version}")
            started = time.monotonic()
            new_version = store.version + 1
            new_id = str(uuid.uuid4()) if ctx.checkpoint_ids else ""
            ttl = ctx.config.ttl
            v2_lineage = self._timeline.commit_lineage(store.version, db.state_id) if new_id else None
            if ttl.enabled and ttl.incremental is not None and not ttl.incremental.per_record:
                store.incremental_step()
            local = ctx.files.staging_path(names.changelog_name(new_version, new_id))
            applying = store.start_apply(local + ".sst")
            try:
                known, state_id = self._publish(store, applying, local, new_id, v2_lineage)
                if known is None:
                    delta = applying.result()
                else:  # the commit returns before the apply ends: the next use of the DB waits
                    delta = known
                    applying.detach()
                    db.applying = (applying, new_version)
            except BaseException:
                if applying.abandon():
                    db.drop()
                raise
            self._committed(store, delta, state_id, new_id, v2_lineage)
            ctx.counters[M.COMMIT_TIME_MS.name] += int((time.monotonic() - started) * 1000)
            return new_version

    def _publish(self, store: StoreVersion, applying: PendingApply, local: str, new_id: str,
                 v2_lineage: list[tuple[int, str]] | None) -> tuple[KeyChange | None, str]:
        """Writes the batch's changelog at `local` and publishes it: the version is committed
        then. Returns the change in keys if known without the apply (which then goes on after
        the commit returns), and the new version's state id."""
        ctx, db = self._ctx, self._db
        new_version = store.version + 1
        ttl, engine = ctx.config.ttl, db.engine
        count_now = db.upkeep.compaction_due(engine, ttl, new_version) or db.upkeep.uncounted(engine)
        delta = None if count_now else applying.known_delta()
        internal = db.num_internal_keys
        internal_after = None if delta is None or internal is None else internal + delta.internal
        header = header_json(ctx.store_id, new_version, store.now_ms, ttl.ttl_ms, ctx.query_id,
                             parent=db.state_id, settings=settings_of(ttl), ckpt_id=new_id or None,
                             lineage=v2_lineage, parent_keys=db.num_keys,
                             keys=None if delta is None else db.num_keys + delta.keys,
                             parent_internal_keys=internal,
                             internal_keys=internal_after)
        store.write_changelog(local, header)
        state_id = new_id or file_fingerprint(local)
        crash_point("commit-before-upload")  # tests only; inert unless TTLSTATE_FAULTS is set
        # Files of other attempts of this or later versions stay: they may be another writer's
        # committed versions, and lineage (checkpoint/lineage.py) keeps a load from mixing them in.
        ctx.files.publish(local, names.changelog_name(new_version, new_id))
        crash_point("commit-after-upload")
        return delta, state_id

    def _committed(self, store: StoreVersion, delta: KeyChange, state_id: str, new_id: str,
                   v2_lineage: list[tuple[int, str]] | None) -> None:
        """The local DB, the timeline and the batch times move to the committed version (its
        change in keys: `delta`)."""
        db, new_version = self._db, store.version + 1
        db.add_keys(delta)
        self._timeline.committed(new_version, new_id, db.state_id, v2_lineage)
        db.version = new_version
        db.state_id = state_id
        self._times.record(new_version, store.now_ms)
        if db.applying is None:
            db.applied(new_version)
        if db.empty_at is not None and db.empty_at == store.version and store.version > 0:
            self._snapshots.write()
        db.empty_at = None
        self._snapshots.committed(new_version)
