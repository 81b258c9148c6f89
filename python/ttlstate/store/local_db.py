"""The local RocksDB of one store: the one committed version it holds, and its lifecycle.

The local DB is a cache of the checkpoint: it holds exactly one committed version (`version`),
and is dropped whenever it cannot be trusted to (a failed load or commit, a vanished
directory); the next load rebuilds it from the checkpoint files. A commit may return before
its batch is applied here (committer.py): `settle` waits for that apply before anything uses
the DB again.

`lineage` changes with every load, the only way to a version other than by this store's own
commits (a dropped local DB is always reloaded before it serves), so a cache of its keys held
elsewhere (the shim's key filter) knows when it went stale. It starts at random: a restarted
server never repeats an earlier provider's value.
"""

from __future__ import annotations

import logging
import secrets
import shutil

from ttlstate.config.store_config import TtlConfig
from ttlstate.engine.base import Engine, FilterSettings
from ttlstate.engine.select import open_engine
from ttlstate.store.compaction import FilterUpkeep
from ttlstate.store.context import StoreContext
from ttlstate.store.in_place import forget_placed
from ttlstate.store.planes.base import DataPlane, KeyChange, PendingApply
from ttlstate.store.planes.select import for_engine
from ttlstate.store.restored_keys import KeptHashes

log = logging.getLogger(__name__)


def filter_settings(ttl: TtlConfig) -> FilterSettings | None:
    """What the compaction filter is opened with; None: no filter."""
    if not ttl.enabled or ttl.compaction_filter is None:
        return None
    cf = ttl.compaction_filter
    return FilterSettings(ttl_ms=ttl.ttl_ms or 0,
                          query_time_after_num_entries=cf.query_time_after_num_entries,
                          periodic_compaction_seconds=cf.periodic_compaction_ms // 1000)


class LocalDb:
    def __init__(self, ctx: StoreContext, directory: str) -> None:
        self._ctx = ctx
        self.directory = directory
        self._engine: Engine | None = None
        self._plane: DataPlane | None = None  # chosen with the first engine, kept for good
        self.version: int | None = None  # the committed version the DB holds
        # The state id (see checkpoint/lineage.py) of that version, None if unknown; the next
        # changelog records it as its parent.
        self.state_id: str | None = None
        # The version an empty store was opened at (Spark's loadEmpty: `ttlstate migrate`, state
        # rewriting): nothing below it is in this checkpoint, so its commit is snapshotted at
        # once, as the only file that can rebuild it.
        self.empty_at: int | None = None
        self.num_keys = 0
        # Of them, the keys of internal column families (column_families.is_internal_key),
        # kept beside num_keys by every path that keeps it; None when not known (a load from
        # checkpoint files older than the count): `counted_internal_keys` counts them then.
        self.num_internal_keys: int | None = 0
        self.lineage = secrets.randbits(62)
        # Moves on with every version handed out and at close: a version loaded before is
        # superseded (planes/base.py: VersionContext.stamp).
        self.stamp = 0
        self.closed = False
        # The last commit's batch, still going into the DB after the commit returned, and its
        # version; waited for (`settle`) before anything uses the DB again.
        self.applying: tuple[PendingApply, int] | None = None
        # The key filter hashes of every key of a version a load built the DB from nothing for,
        # until the shim takes them for its filter, or the DB moves to another lineage.
        self.kept = KeptHashes(ctx.store_id)
        self.upkeep = FilterUpkeep(ctx.counters)

    @property
    def is_open(self) -> bool:
        return self._engine is not None

    @property
    def engine(self) -> Engine:
        if self._engine is None:
            raise self._ctx.not_loaded()
        return self._engine

    @property
    def engine_or_none(self) -> Engine | None:
        return self._engine

    @property
    def plane(self) -> DataPlane:
        if self._plane is None:
            raise self._ctx.not_loaded()
        return self._plane

    @property
    def has_plane(self) -> bool:
        return self._plane is not None

    def open(self) -> None:
        """Opens the engine on the DB directory (empty, or holding a snapshot's files)."""
        self._engine = open_engine(self._ctx.config.engine, self.directory,
                                   filter_settings(self._ctx.config.ttl),
                                   mapped_reads=self._ctx.config.snapshot_read_in_place)
        if self._plane is None:
            self._plane = for_engine(self._engine, self._ctx.lock)
        self.upkeep.reset(self._engine)

    def open_empty(self) -> None:
        self.drop()
        self.open()
        self._ctx.sst.new_lineage()
        self.num_keys = 0
        self.num_internal_keys = 0

    def drop(self) -> None:
        """Discards the DB (only the checkpoint counts), waiting for an apply still writing to it."""
        pending, self.applying = self.applying, None
        if pending is not None:
            pending[0].abandon()  # waits: the apply writes to the DB about to be closed
        self.kept.forget()
        if self._engine is not None:
            try:
                self._engine.close()
            except Exception as e:  # the local copy is being discarded; only the checkpoint counts
                log.warning("ttlstate store %s: closing the discarded local DB failed: %s",
                            self._ctx.store_id, e)
            self._engine = None
        self.version = None
        self.state_id = None
        self.empty_at = None
        forget_placed(self.directory)
        shutil.rmtree(self.directory, ignore_errors=True)

    def settle(self) -> None:
        """Waits for the last commit's apply if it is still running. One that failed leaves the
        DB unknown: it is dropped, and the next load rebuilds the version from the checkpoint,
        which holds its changelog already."""
        pending, self.applying = self.applying, None
        if pending is None:
            return
        applying, version = pending
        try:
            applying.result()
        except Exception as e:
            log.warning("ttlstate store %s: applying committed version %d to the local DB failed "
                        "(%s); the next load rebuilds it from the checkpoint", self._ctx.store_id,
                        version, e)
            self.drop()
            return
        self.applied(version)

    def applied(self, version: int) -> None:
        """What follows a commit's apply: the compaction filter's upkeep (compaction.py)."""
        keys = self.upkeep.after_apply(self.engine, self._ctx.config.ttl, version)
        if keys is not None:
            self.num_keys, self.num_internal_keys = keys

    def add_keys(self, change: KeyChange) -> None:
        self.num_keys += change.keys
        if self.num_internal_keys is not None:
            self.num_internal_keys += change.internal

    def counted_internal_keys(self) -> int:
        """The internal column families' keys of the loaded version: counted by a scan of the
        local DB (once) when the files it was loaded from did not record them."""
        if self.num_internal_keys is None:
            self.settle()
            self.num_keys, self.num_internal_keys = self.engine.count_key_kinds()
        return self.num_internal_keys

    def close(self) -> None:
        self.settle()
        self.kept.forget()
        self.closed = True
        self.stamp += 1
        if self._plane is not None:
            self._plane.close()
        if self._engine is not None:
            self._engine.close()
            self._engine = None
