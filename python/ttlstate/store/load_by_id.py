"""Checkpoint format 2's load: exactly the version Spark's commit log names by its checkpoint id.

Each changelog of format 2 records its lineage, the (version, id) pairs it was built on down to
a snapshot or the empty state, so the plan (checkpoint/id_plan.py) follows that lineage instead
of taking the newest files by version; every file is then checked to hold the id its name says
and to continue the one before it, so a file of another lineage or attempt is refused.
"""

from __future__ import annotations

from ttlstate.checkpoint import names
from ttlstate.checkpoint.errors import CheckpointError, VersionNotFound
from ttlstate.checkpoint.id_plan import EMPTY, FORMAT1, plan_by_id
from ttlstate.checkpoint.record_file import KIND_CHANGELOG, KIND_SNAPSHOT
from ttlstate.checkpoint.restore_plan import RestorePlan
from ttlstate.store.context import StoreContext
from ttlstate.store.local_db import LocalDb
from ttlstate.store.planes.base import Fetched
from ttlstate.store.rebuild import Checked, Rebuilder
from ttlstate.store.repair import Repair, UnusableSnapshot, describe_base
from ttlstate.store.timeline import Lineage, Timeline


class IdLoader:
    def __init__(self, ctx: StoreContext, db: LocalDb, timeline: Timeline, rebuild: Rebuilder) -> None:
        self._ctx = ctx
        self._db = db
        self._timeline = timeline
        self._rebuild = rebuild

    def load(self, version: int, ckpt_id: str, from_snapshot: int | None, snapshot_id: str | None) -> None:
        db, files = self._db, self._ctx.files
        db.lineage += 1
        refreshed = False
        repair = Repair(self._ctx, version)
        while True:
            listing = [n for n in files.listing(refresh=refreshed) if n not in repair.passed_over]
            local = ((db.version, db.state_id)
                     if db.is_open and db.version is not None and db.state_id and from_snapshot is None
                     else None)
            plan: RestorePlan | None = None
            with files.staged() as fetched:
                try:
                    lineage = self._fetch_lineage(version, ckpt_id, from_snapshot, listing, fetched)
                    if from_snapshot is None:
                        lineage = self._below_missing(version, lineage, listing, fetched, repair, refreshed,
                                                      local)
                    wanted_snapshot = None if from_snapshot is None else (from_snapshot, snapshot_id)
                    plan = plan_by_id(self._ctx.store_id, listing, version, ckpt_id, lineage, local,
                                      wanted_snapshot)
                    repair.check_base(plan.base_version, describe_base(self._ctx, plan))
                    if plan.snapshot:
                        try:
                            fetched.append((plan.snapshot, *files.fetch_verified(
                                plan.snapshot, KIND_SNAPSHOT, version)))
                        except CheckpointError as e:  # damaged or gone: an older base may do
                            raise UnusableSnapshot(e) from None
                    have = {name for name, _p, _h in fetched}
                    for name in plan.changelogs:
                        if name not in have:
                            fetched.append((name, *files.fetch_verified(name, KIND_CHANGELOG, version)))
                    fetched.sort(key=lambda f: (f[2].version, f[2].kind == KIND_CHANGELOG))
                except UnusableSnapshot as e:
                    if from_snapshot is not None or plan is None or plan.snapshot is None:
                        raise e.error from None  # asked for by name: no other base will do
                    repair.pass_over(plan.snapshot, e.error)
                    continue
                except VersionNotFound as e:
                    if refreshed:
                        if repair.active:  # nothing older rebuilds it: say why the snapshot did not
                            raise repair.nothing_older(e) from e
                        raise
                    refreshed = True
                    continue
                self._verify_ids(plan, fetched, version)  # refuses files that do not chain
                try:
                    self._rebuild.apply(plan, fetched, version, Checked(ckpt_id, bool(plan.snapshot), True))
                except CheckpointError as e:
                    if from_snapshot is not None or plan.snapshot is None or e.file_name != plan.snapshot:
                        raise
                    repair.pass_over(plan.snapshot, e)
                    continue
                repair.done(describe_base(self._ctx, plan), len(plan.changelogs))
                self._timeline.loaded_lineage(lineage, format1=False)
                return

    def _below_missing(self, version: int, lineage: Lineage, listing: list[str], fetched: list[Fetched],
                       repair: Repair, refreshed: bool, local: tuple[int, str] | None) -> Lineage:
        """`lineage`, followed on below its last element while that is a snapshot the checkpoint
        does not hold (any more) or that a repair passed over: the changelog of that version
        records the lineage it was built on, down to an older snapshot or the empty state. A
        snapshot missing from a cached `listing` (not `refreshed`) may be another writer's new
        one: VersionNotFound then, so the load lists again first. The local DB holding exactly
        that version is a base as good (`local`)."""
        files, present = self._ctx.files, set(listing)
        have = {name for name, _p, _h in fetched}
        while lineage and lineage[-1][1] not in (EMPTY, FORMAT1):
            k, kid = lineage[-1]
            snapshot = names.snapshot_name(k, kid)
            if snapshot in present or local == (k, kid):
                break
            if snapshot not in repair.passed_over:
                if not refreshed:
                    raise VersionNotFound(self._ctx.store_id, version, snapshot, "is missing")
                repair.pass_over(snapshot, VersionNotFound(self._ctx.store_id, version, snapshot,
                                                           "is missing"))
            below = names.changelog_name(k, kid)
            if below not in have:
                fetched.append((below, *files.fetch_verified(below, KIND_CHANGELOG, version)))
                have.add(below)
            older = next(h for n, _p, h in fetched if n == below).lineage
            if not older:
                break
            lineage = lineage + older
        return lineage

    def _fetch_lineage(self, version: int, ckpt_id: str, from_snapshot: int | None,
                       listing: list[str], fetched: list[Fetched]) -> Lineage:
        """The lineage `version`'s changelog records (fetched into `fetched`), followed on down
        to `from_snapshot` if it ends at a newer snapshot; () when `version` is a snapshot's."""
        files = self._ctx.files
        if from_snapshot == version or (
                from_snapshot is None and names.snapshot_name(version, ckpt_id) in listing):
            return ()
        top = names.changelog_name(version, ckpt_id)
        fetched.append((top, *files.fetch_verified(top, KIND_CHANGELOG, version)))
        lineage: Lineage = fetched[0][2].lineage or ()
        while (from_snapshot is not None and lineage and lineage[-1][0] > from_snapshot
               and lineage[-1][1] != EMPTY):
            # The lineage ends at a newer snapshot than the one asked for: follow it on.
            older = names.changelog_name(*lineage[-1])
            fetched.append((older, *files.fetch_verified(older, KIND_CHANGELOG, version)))
            if not fetched[-1][2].lineage:
                break
            lineage = lineage + fetched[-1][2].lineage
        return lineage

    def _verify_ids(self, plan: RestorePlan, fetched: list[Fetched], version: int) -> None:
        """Every file of a format 2 plan holds the id its name says, and each changelog continues
        the one before it: a file of another lineage or attempt is refused, naming both."""
        store_id, files = self._ctx.store_id, self._ctx.files
        previous: tuple[str, str | None]
        if plan.from_local:
            previous = (f"the local state of version {plan.base_version}", self._db.state_id)
        else:
            previous = ("the empty state", None)
        for name, _path, header in fetched:
            parsed = names.parse(name)
            named = parsed.ckpt_id if parsed else None
            if not named:  # a format 1 file below a query's move to format 2
                previous = (files.describe(name),
                            header.state if header.kind == KIND_SNAPSHOT else header.fingerprint)
                continue
            if header.kind == KIND_SNAPSHOT:
                if header.state not in (None, named):
                    raise CheckpointError(store_id, version, name,
                                          f"holds the state of checkpoint id {header.state}, not {named}")
                previous = (files.describe(name), named)
                continue
            if header.ckpt_id not in (None, named):
                raise CheckpointError(store_id, version, name,
                                      f"holds checkpoint id {header.ckpt_id}, not {named}")
            if header.parent != previous[1] and not (previous[1] == EMPTY and header.parent is None):
                raise CheckpointError(store_id, version, name,
                                      f"continues the state of checkpoint id {header.parent}, but "
                                      f"{previous[0]} holds {previous[1] or 'the empty state'}: the "
                                      "files belong to different lineages or attempts")
            previous = (files.describe(name), named)
