"""Passing over a damaged or missing snapshot while loading a version (auto snapshot repair).

A snapshot only shortens a load: the changelogs before it rebuild the same version. So when the
snapshot a plan starts from cannot be used (its file is damaged or gone, an SST manifest is
damaged, an SST file it names is missing or altered), the load passes it over and rebuilds the
version from the newest intact older base and the changelogs since, as Spark's providers do
since 4.2 (its `AutoSnapshotLoader`, counted in `numSnapshotsAutoRepaired`). A repair replays at
most `repair.maxChangelogReplay` changelogs. What no older file replaces (a damaged changelog of
the versions to rebuild) still fails the load, naming the file. Nothing is ever overwritten or
deleted here: the damaged file stays for the operator, and the repaired version's next snapshot
(snapshots.py) takes its place as the newest base.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from ttlstate.checkpoint.errors import CheckpointError
from ttlstate.checkpoint.restore_plan import RestorePlan
from ttlstate.config import keys as K
from ttlstate.store import metric_names as M
from ttlstate.store.context import StoreContext

log = logging.getLogger(__name__)


class UnusableSnapshot(Exception):
    """The plan's snapshot could not be used: `error` says which file and why."""

    def __init__(self, error: CheckpointError) -> None:
        super().__init__(str(error))
        self.error = error


@dataclass
class Repair:
    """One load's passing over of unusable snapshots: which, why, and how far back it may go."""

    ctx: StoreContext
    version: int
    passed_over: dict[str, CheckpointError] = field(default_factory=dict)  # snapshot name -> why

    @property
    def max_replay(self) -> int:
        return self.ctx.config.repair_max_replay

    @property
    def active(self) -> bool:
        return bool(self.passed_over)

    def pass_over(self, snapshot: str, error: CheckpointError) -> None:
        """Records that `snapshot` is unusable (`error` names it and why), or raises `error` when
        repair is off."""
        located = self._located(error)
        if self.max_replay == 0:
            raise CheckpointError(located.store_id, self.version, located.file_name,
                                  f"{located.reason} (repair is off: {K.REPAIR_MAX_REPLAY.key}=0)",
                                  located.where) from None
        log.warning("ttlstate store %s: snapshot %s %s: passing it over, version %d is rebuilt from an "
                    "older snapshot and the changelogs since", self.ctx.store_id,
                    located.where or snapshot, located.reason, self.version)
        self.passed_over[snapshot] = located
        self.ctx.unusable_snapshots.add(snapshot)

    def check_base(self, base_version: int, base: str) -> None:
        """Refuses a repair that would replay more changelogs than the bound allows, naming the
        newest unusable snapshot and the key."""
        if not self.passed_over or self.version - base_version <= self.max_replay:
            return
        newest = self._newest()
        raise CheckpointError(
            newest.store_id, self.version, newest.file_name,
            f"{newest.reason}, and repairing it would rebuild version {self.version} from {base}, "
            f"replaying {self.version - base_version} changelogs: more than "
            f"{K.REPAIR_MAX_REPLAY.key}={self.max_replay} allows. Raise it to repair the store, or roll "
            "the stopped query back to a version that loads (`ttlstate rollback`)", newest.where)

    def nothing_older(self, cause: CheckpointError) -> CheckpointError:
        """The error of a repair that found no older base: the unusable snapshot, and why nothing
        older rebuilds the version (`cause`, e.g. a changelog retention deleted)."""
        newest = self._newest()
        return CheckpointError(
            newest.store_id, self.version, newest.file_name,
            f"{newest.reason}, and no older snapshot rebuilds version {self.version} instead: "
            f"{self._located(cause).where or cause.file_name} {cause.reason}", newest.where)

    def done(self, base: str, replayed: int) -> None:
        """The load succeeded: counts and logs the repair, if there was one."""
        if not self.passed_over:
            return
        self.ctx.counters[M.SNAPSHOTS_AUTO_REPAIRED.name] += 1
        self.ctx.snapshot_due = True
        log.warning("ttlstate store %s: repaired: version %d rebuilt from %s and %d changelogs, passing "
                    "over %s; its next snapshot replaces them as the newest base", self.ctx.store_id,
                    self.version, base, replayed,
                    ", ".join(e.where or n for n, e in self.passed_over.items()))

    def _newest(self) -> CheckpointError:
        return list(self.passed_over.values())[0]

    def _located(self, error: CheckpointError) -> CheckpointError:
        return error if error.where else error.located(self.ctx.files.describe(error.file_name))


def describe_base(ctx: StoreContext, plan: RestorePlan) -> str:
    """What `plan` starts from, for messages."""
    if plan.from_local:
        return f"the local state of version {plan.base_version}"
    return ctx.files.describe(plan.snapshot) if plan.snapshot else "the empty state"
