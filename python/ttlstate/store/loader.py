"""Loading exactly one version into the local DB, from the checkpoint (and the local DB where
it is a base of that version).

Checkpoint format 1 names a version by its number: the plan is the newest snapshot at or below
it and the changelogs after it (checkpoint/restore_plan.py), or the changelogs after the local
version. Every file is fetched and verified whole before one record is applied, and the files
are checked to continue each other (checkpoint/lineage.py): a base that holds another
attempt's state is passed over for an older one. Format 2 names a version by its checkpoint id
as well (load_by_id.py). Either way rebuild.py builds the version from the files.
"""

from __future__ import annotations

import logging

from ttlstate.checkpoint import names
from ttlstate.checkpoint.errors import CheckpointError, VersionNotFound
from ttlstate.checkpoint.lineage import Chain, continues, follow
from ttlstate.checkpoint.record_file import KIND_CHANGELOG, KIND_SNAPSHOT
from ttlstate.checkpoint.restore_plan import RestorePlan, plan_from_snapshot, plan_restore
from ttlstate.store.context import StoreContext
from ttlstate.store.load_by_id import IdLoader
from ttlstate.store.local_db import LocalDb
from ttlstate.store.planes.base import Fetched
from ttlstate.store.rebuild import Checked, Rebuilder
from ttlstate.store.repair import Repair, UnusableSnapshot, describe_base
from ttlstate.store.timeline import Timeline

log = logging.getLogger(__name__)


class VersionLoader:
    def __init__(self, ctx: StoreContext, db: LocalDb, timeline: Timeline, rebuild: Rebuilder) -> None:
        self._ctx = ctx
        self._db = db
        self._timeline = timeline
        self._rebuild = rebuild
        self._by_id = IdLoader(ctx, db, timeline, rebuild)

    def load(self, version: int, from_snapshot: int | None, ckpt_id: str | None,
             snapshot_ckpt_id: str | None) -> None:
        """`from_snapshot`: from exactly that snapshot and the changelogs after it, never from
        the local DB. `ckpt_id` (`snapshot_ckpt_id`): format 2's id of `version` (of that
        snapshot's version). Errors name the file by its full path or URI."""
        try:
            if self._ctx.checkpoint_ids and version > 0 and ckpt_id:
                self._by_id.load(version, ckpt_id, from_snapshot, snapshot_ckpt_id)
            else:  # format 1, or a format 1 version a query moving to format 2 builds on
                self._load(version, from_snapshot)
        except CheckpointError as e:
            if e.where is not None:
                raise
            raise e.located(self._ctx.files.describe(e.file_name)) from e.__cause__

    def _load(self, version: int, from_snapshot: int | None) -> None:
        db, files = self._db, self._ctx.files
        db.lineage += 1
        use_local = db.is_open
        skip: set[int] = set()  # snapshots passed over: another attempt's state, or unusable
        repair = Repair(self._ctx, version)
        refreshed = from_snapshot is not None
        while True:
            local = db.version if use_local and db.is_open else None
            if from_snapshot is not None:
                plan = plan_from_snapshot(self._ctx.store_id, files.listing(refresh=True),
                                          from_snapshot, version)
            else:
                try:
                    plan = plan_restore(self._ctx.store_id, files.listing(refresh=refreshed), version,
                                        local, frozenset(skip))
                except VersionNotFound as e:
                    if repair.active:  # nothing older rebuilds it: say why the snapshot did not
                        raise repair.nothing_older(e) from e
                    if refreshed:
                        raise
                    refreshed = True
                    continue
                repair.check_base(plan.base_version, describe_base(self._ctx, plan))
            with files.staged() as fetched:
                try:
                    stale, checked = self._fetch_plan(plan, version, fetched,
                                                      strict=from_snapshot is not None)
                except UnusableSnapshot as e:
                    if from_snapshot is not None or plan.snapshot is None:  # asked for by name
                        raise e.error from None
                    repair.pass_over(plan.snapshot, e.error)
                    skip.add(plan.base_version)
                    continue
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
                    self._rebuild.apply(plan, fetched, version, checked)
                except CheckpointError as e:
                    if from_snapshot is not None or plan.snapshot is None or e.file_name != plan.snapshot:
                        raise  # a changelog, or a snapshot asked for by name: no other base will do
                    repair.pass_over(plan.snapshot, e)
                    skip.add(plan.base_version)
                    continue
                repair.done(describe_base(self._ctx, plan), len(plan.changelogs))
                self._timeline.loaded_lineage((), format1=True)
                return

    def _fetch_plan(self, plan: RestorePlan, version: int, fetched: list[Fetched],
                    strict: bool) -> tuple[str | None, Checked]:
        """Fetch and verify every file of `plan` into `fetched` (whole, and bound to this store
        and version) before one record is applied: a bad file anywhere changes nothing. Returns
        None, or what holds another attempt's state ("local", or "snapshot"): see lineage.py;
        and what the checks found. `strict`: the snapshot was asked for by name
        (snapshotStartBatchId); one of another attempt is an error then, not skipped."""
        files, store_id = self._ctx.files, self._ctx.store_id
        if plan.snapshot:
            try:
                fetched.append((plan.snapshot, *files.fetch_verified(plan.snapshot, KIND_SNAPSHOT, version)))
            except CheckpointError as e:  # damaged or gone: an older base may rebuild the version
                raise UnusableSnapshot(e) from None
        for name in plan.changelogs:
            fetched.append((name, *files.fetch_verified(name, KIND_CHANGELOG, version)))
        changelogs = [h for _n, _p, h in fetched if h.kind == KIND_CHANGELOG]
        base = describe_base(self._ctx, plan)
        if plan.from_local:
            base_state = self._db.state_id
        elif plan.snapshot:
            base_state = fetched[0][2].state
        else:
            base_state = None
        chain = follow(base_state, changelogs)
        if not changelogs and plan.snapshot and base_state is not None:
            # Loading exactly a snapshot's version: the snapshot must hold what that version's
            # changelog (when there is one) wrote.
            name = names.changelog_name(plan.base_version)
            if name in files.listing(refresh=False):
                try:
                    path, header = files.fetch_verified(name, KIND_CHANGELOG, version)
                except CheckpointError as e:  # the snapshot holds the version whole, as Spark reads it
                    log.warning("ttlstate store %s: version %d is loaded from %s alone: %s %s, so "
                                "whether the snapshot holds what that changelog wrote is not checked",
                                store_id, version, base, files.describe(name), e.reason)
                else:
                    fetched.append((name, path, header))
                    if not continues(fetched[0][2], header):
                        chain = Chain((0,), base_state)
        checked = Checked(chain.state, bool(plan.snapshot) and (not chain.breaks or chain.breaks[0] > 0),
                          not chain.breaks)
        if not chain.breaks:
            return None, checked
        first = plan.changelogs[chain.breaks[0]] if changelogs else names.changelog_name(plan.base_version)
        if chain.breaks[0] == 0 and (plan.from_local or plan.snapshot):
            if strict:
                raise CheckpointError(store_id, version, plan.snapshot or first,
                                      f"holds another attempt's state than "
                                      f"{files.describe(first)} continues: replay from "
                                      "another snapshot")
            log.warning("ttlstate store %s: %s holds another attempt's state of version %d than %s "
                        "continues (a re-run batch, a retried task or a second writer); loading "
                        "version %d from an older base instead", store_id, base, plan.base_version,
                        files.describe(first), version)
            return ("local" if plan.from_local else "snapshot"), checked
        for i in chain.breaks:
            log.warning("ttlstate store %s: %s does not continue the state before it (two writers "
                        "committed version %d with different output); loading version %d as "
                        "Spark's commit log reads it, as Spark's own providers do", store_id,
                        files.describe(plan.changelogs[i]), version - len(changelogs) + i, version)
        return None, checked
