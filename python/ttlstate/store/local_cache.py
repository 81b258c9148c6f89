"""The executor's local disk as a bounded cache of a store's SST files (`snapshot.localMaxBytes`,
with `snapshot.readInPlace`), so a store may be larger than the disk.

A restore in place takes no local disk (its files are links or placeholders: in_place.py); what
fills the disk is what the local DB writes itself: flushes and compactions. Once a snapshot has
uploaded such a file the checkpoint holds a copy, so the file can become a placeholder of that
copy: the native side switches RocksDB's open readers of it over to the copy and frees its
blocks (mapped_files.h, EvictToSource). Whatever a snapshot names stays in the checkpoint while
a version needs it, and each later snapshot of this DB names every file the DB still reads, so
an evicted file's copy outlives its use (the same rule as a restored file's). A copy found
damaged by a batch's read is read whole by the next load and passed over
(SstSnapshots.corruption_found).

Which files go: the oldest first (lowest file number). RocksDB's older files have settled into
its deeper levels, which a lookup reaches only for keys the newer levels lack; the newest
(level 0, the last flushes) hold the keys the batches just wrote.
"""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass

from ttlstate.checkpoint.sst_manifest import SstFile
from ttlstate.engine.select import native_module
from ttlstate.store.in_place import InPlace, is_placed

log = logging.getLogger(__name__)

_LOCAL_SST = re.compile(r"^(\d+)\.sst$")


@dataclass(frozen=True)
class Evicted:
    files: int = 0
    freed: int = 0  # bytes of local disk
    local: int = 0  # bytes of SST files left on the local disk


def sst_number(name: str) -> int:
    """A local SST file's number (`000123.sst`: 123): RocksDB numbers its files as it writes
    them, so the lower, the older."""
    return int(name.split(".")[0])


def local_sst_bytes(db_dir: str) -> dict[str, int]:
    """The local DB's SST files that take local disk (not links, not placeholders): name ->
    bytes of disk they take."""
    out: dict[str, int] = {}
    for name in os.listdir(db_dir):
        if _LOCAL_SST.match(name) is None:
            continue
        path = os.path.join(db_dir, name)
        try:
            st = os.lstat(path)
            if st.st_blocks and not is_placed(path):
                out[name] = st.st_blocks * 512
        except FileNotFoundError:  # a compaction removed it meanwhile
            continue
    return out


def bound_local_files(store_id: str, db_dir: str, uploaded: dict[str, SstFile], place: InPlace,
                      max_bytes: int) -> Evicted:
    """After a snapshot was published (the store held): while the local SST files take more
    than `max_bytes`, the oldest uploaded ones (`uploaded`: by local name) are read from their
    copies in `place` from now on and freed locally."""
    native = native_module()
    assert native is not None  # SST snapshots, read in place: the native engine's
    local = local_sst_bytes(db_dir)
    total = sum(local.values())
    files = freed = 0
    for name in sorted(local, key=sst_number):
        if total <= max_bytes:
            break
        f = uploaded.get(name)
        if f is None:  # written since the snapshot: the next one uploads it
            continue
        path = os.path.join(db_dir, name)
        got = native.evict_mapped_file(path, place.socket or "", place.source(f.name), f.size)
        if got:
            files, freed, total = files + 1, freed + got, total - local[name]
    if total > max_bytes:
        log.debug("ttlstate store %s: %d bytes of SST files stay on the local disk, over "
                 "snapshot.localMaxBytes (%d): they are not uploaded yet (the next snapshot "
                 "uploads them)", store_id, total, max_bytes)
    return Evicted(files, freed, total)
