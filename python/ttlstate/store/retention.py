"""Maintenance's cleanup: the checkpoint files no version among the newest N needs.

Which record files go is checkpoint/restore_plan.py's rule (`deletable_files`), counted back only
to snapshots this writer trusts (timeline.py); SST files go once no snapshot left names them and
it has been so for a while (sst_snapshots.py).
"""

from __future__ import annotations

from ttlstate.checkpoint.restore_plan import deletable_files
from ttlstate.store.context import StoreContext
from ttlstate.store.local_db import LocalDb
from ttlstate.store.timeline import Timeline


def clean_up(ctx: StoreContext, db: LocalDb, timeline: Timeline, min_versions_to_retain: int) -> list[str]:
    """Deletes the checkpoint files older than what the newest versions need; returns them."""
    with ctx.lock:
        if db.closed or db.version is None:
            return []
        listing = ctx.files.listing(refresh=True)
        doomed = deletable_files(listing, min_versions_to_retain, db.version, timeline.trusted)
        if doomed:
            ctx.files.delete(doomed)
        gone = set(doomed)
        ssts = ctx.sst.deletable([n for n in listing if n not in gone])
        if ssts:
            ctx.files.delete(ssts)
            ctx.sst.deleted(ssts)
        return doomed + ssts
