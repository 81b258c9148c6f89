"""Which batch a stopped query can be rolled back to, and the files that go with the rest.

A version whose files cannot rebuild it (its changelog is damaged or gone, and no snapshot of it
or above is left) stops the query at every restart. Spark's own way out is to re-run batches:
its offset log and commit log say which batch is next, and the sources replay everything after
the last committed offsets. So the query is rolled back to the newest state version every store
can rebuild, V: the batches from V on leave the offset, commit and source logs, and the state
files above V leave every store, so the restarted query re-runs batch V from the committed
offsets of batch V - 1 and writes those versions anew.

Whether a store rebuilds a version is found the only sure way: by loading it, in a temporary
directory, as a restarted query would (store/loader.py, with the repair of damaged snapshots),
so the checkpoint itself is only read.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass, field

from ttlstate.checkpoint import names
from ttlstate.checkpoint.errors import CheckpointError
from ttlstate.checkpoint.identity import store_label
from ttlstate.checkpoint.location import LocalCheckpointLocation
from ttlstate.config.keys import EngineKind
from ttlstate.config.store_config import StoreConfig, TtlConfig
from ttlstate.store.provider import StoreProvider
from ttlstate.ttl.clock import ManualClock

# Spark's logs whose file per batch is named by the batch id, in the order they are moved: a
# rollback cut short leaves a checkpoint Spark resumes (a commit never outlives its offsets).
BATCH_LOGS = ("commits", "offsets")


class CannotRollBack(RuntimeError):
    """No batch the checkpoint still holds can be rebuilt by every store."""


@dataclass(frozen=True)
class Store:
    operator: str
    partition: str
    name: str
    directory: str


@dataclass
class RollbackPlan:
    checkpoint: str
    newest_batch: int  # the newest committed batch
    target_batch: int  # the newest batch every store rebuilds the state after
    why: list[str] = field(default_factory=list)  # what stops each newer version
    moves: list[str] = field(default_factory=list)  # paths relative to the checkpoint

    @property
    def needed(self) -> bool:
        return self.target_batch < self.newest_batch


def committed_batches(checkpoint: str) -> list[int]:
    commits = os.path.join(checkpoint, "commits")
    return sorted(int(n) for n in os.listdir(commits) if n.isdigit()) if os.path.isdir(commits) else []


def state_ids(checkpoint: str, batch: int) -> dict[str, list[list[str]]] | None:
    """Checkpoint format 2: the ids of every store's state after `batch`, by operator and
    partition, as the commit log recorded them (None on format 1)."""
    try:
        with open(os.path.join(checkpoint, "commits", str(batch))) as f:
            f.readline()
            entry = json.loads(f.readline() or "{}")
    except (OSError, ValueError):
        return None
    ids = entry.get("stateUniqueIds")
    return ids if isinstance(ids, dict) and ids else None


def loads(store: Store, version: int, query_id: str | None, ckpt_id: str | None) -> CheckpointError | None:
    """None when `store` rebuilds `version` from its files, else why not."""
    tmp = tempfile.mkdtemp(prefix="ttlstate-rollback-")
    try:
        p = StoreProvider(store_label(store.operator, store.partition, store.name), tmp,
                          LocalCheckpointLocation(store.directory),
                          StoreConfig(ttl=TtlConfig(), engine=EngineKind.ROCKSDICT), ManualClock(0),
                          query_id=query_id, checkpoint_ids=ckpt_id is not None, reader=True)
        try:
            p.get_store(version, read_only=True, ckpt_id=ckpt_id).release()
            return None
        except CheckpointError as e:
            return e
        finally:
            p.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _ckpt_id(ids: dict[str, list[list[str]]] | None, store: Store, version: int) -> str | None:
    """Format 2: which of the ids the commit log recorded for the store's partition is this
    store's (the one whose files of `version` it holds); None on format 1."""
    if ids is None or not store.partition.isdigit():
        return None
    partitions = ids.get(store.operator) or []
    part = int(store.partition)
    recorded = {str(i) for i in partitions[part]} if part < len(partitions) else set()
    held = {f.ckpt_id for f in names.parse_all(os.listdir(store.directory)) if f.version == version}
    mine = sorted(recorded & held)
    return mine[0] if mine else (sorted(recorded)[0] if len(recorded) == 1 else None)


def plan(checkpoint: str, stores: list[Store], query_id: str | None,
         to_batch: int | None = None) -> RollbackPlan:
    """The newest batch (at most `to_batch`) after which every store rebuilds its state, and the
    files that go with the batches after it."""
    batches = committed_batches(checkpoint)
    if not batches:
        raise CannotRollBack(f"{checkpoint} has no committed batch (no {checkpoint}/commits/<batch>)")
    newest = batches[-1]
    if to_batch is not None and to_batch not in batches:
        raise CannotRollBack(f"batch {to_batch} is not a committed batch of {checkpoint} (committed: "
                             f"{batches[0]} to {newest})")
    why: list[str] = []
    for batch in reversed(batches):
        if to_batch is not None and batch > to_batch:
            continue
        ids = state_ids(checkpoint, batch)
        failed = [(s, e) for s in stores
                  if (e := loads(s, batch + 1, query_id, _ckpt_id(ids, s, batch + 1))) is not None]
        if not failed:
            result = RollbackPlan(checkpoint, newest, batch, why)
            result.moves = files_after(checkpoint, batch, stores)
            return result
        why += [f"batch {batch}: {e}" for _s, e in failed]
    raise CannotRollBack(f"no committed batch of {checkpoint} can be rebuilt by every store "
                         f"(the oldest tried: {batches[0]}): " + "; ".join(why[-3:]))


def files_after(checkpoint: str, batch: int, stores: list[Store]) -> list[str]:
    """The files of the batches after `batch`, relative to `checkpoint`: their offset, commit
    and source log entries (with the checksum files a local file system keeps beside them), and
    every store's files of the versions above `batch` + 1."""
    out: list[str] = []

    def of_batches(folder: str) -> None:
        path = os.path.join(checkpoint, folder)
        if not os.path.isdir(path):
            return
        for name in sorted(os.listdir(path)):
            base = name[1:-4] if name.startswith(".") and name.endswith(".crc") else name
            if base.isdigit() and int(base) > batch:
                out.append(os.path.join(folder, name))
            elif base.endswith(".compact") and base[:-8].isdigit() and int(base[:-8]) > batch:
                # A file source's log compacted at a later batch holds the files of the batches
                # before it too: moving it would make the source read them again.
                raise CannotRollBack(
                    f"{os.path.join(path, name)} is the file source's log compacted at batch "
                    f"{base[:-8]}, after batch {batch}: it lists the input files of every batch up to "
                    "it, so rolling back across it would read those files again (or, kept, skip the "
                    "rolled-back ones). Roll back to a batch at or after it (--to-batch), or restart "
                    "the query on a new checkpoint")

    for log in BATCH_LOGS:
        of_batches(log)
    sources = os.path.join(checkpoint, "sources")
    if os.path.isdir(sources):
        for source in sorted(os.listdir(sources)):
            of_batches(os.path.join("sources", source))
    for s in stores:
        for f in names.parse_all(os.listdir(s.directory)):
            if f.version > batch + 1:
                out.append(os.path.relpath(os.path.join(s.directory, f.name), checkpoint))
    return out
