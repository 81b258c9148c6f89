"""SST files read where they lie in a `file:` checkpoint (`snapshot.readInPlace`).

A restore from an SST snapshot links each of its files into the empty local DB directory as a
symbolic link to the checkpoint's file, so RocksDB opens them there and reads only the blocks
it needs: nothing is copied, and the restore's time does not grow with the state. The
checkpoint's files stay as they are:
- RocksDB never writes to an SST file it has finished, and removes one a compaction made
  obsolete by unlinking its name: the link goes, the checkpoint's file stays.
- Removing the local DB directory (shutil.rmtree) removes the links, never what they point to.
- A RocksDB checkpoint of the local DB (a snapshot) hard-links the links, so the next snapshot
  names the same uploaded files and uploads only what the DB wrote since.
- Retention keeps every SST file a snapshot names (sst_snapshots.py), and a snapshot of this
  DB names every file it still reads.

A copying restore checks each file whole (size and checksum) before the DB opens it. In place,
the size is checked at the restore and the checksum in the background after it (`InPlaceCheck`),
while RocksDB checks the checksum of each block it reads. A file found damaged either way makes
the next load pass over every snapshot naming it (repair.py), as the copying restore would at
once; the load that retries the restore's own version waits for the check, so a retried task
repairs instead of reading the damage again.
"""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass

from ttlstate.checkpoint.location import CheckpointLocation, LocalCheckpointLocation
from ttlstate.checkpoint.sst_manifest import SstFile, file_crc32
from ttlstate.config.store_config import StoreConfig
from ttlstate.faults import crash_point

log = logging.getLogger(__name__)


def in_place_directory(config: StoreConfig, location: CheckpointLocation, store_id: str) -> str | None:
    """The checkpoint folder whose SST files a restore reads in place, or None: copy them."""
    if not config.snapshot_read_in_place:
        return None
    if isinstance(location, LocalCheckpointLocation):
        return location.directory
    _say_not_applying(store_id, location)
    return None


_told: set[str] = set()


def _say_not_applying(store_id: str, location: CheckpointLocation) -> None:
    """Once per process and checkpoint folder: the key is on, and does not apply here."""
    where = location.describe("")
    if where in _told:
        return
    _told.add(where)
    log.info("ttlstate store %s: snapshot.readInPlace applies where the state server reads the "
             "checkpoint itself (file: with checkpoint.localFiles); %s is read through Hadoop, so "
             "restores copy the SST files", store_id, where)


@dataclass(frozen=True)
class LinkedFile:
    source: str  # the checkpoint's file
    file: SstFile


def link_in_place(source: str, local: str, f: SstFile) -> bool:
    """Links `local` to the checkpoint's `source` when it has the size the manifest recorded;
    False when it has another (the caller copies it, which truncates appended bytes or names
    the damage). FileNotFoundError when it is missing."""
    if os.stat(source).st_size != f.size:
        return False
    os.symlink(source, local)
    return True


class InPlaceCheck:
    """The whole checksum of each file a restore linked, read in a background thread."""

    def __init__(self, store_id: str, version: int, files: list[LinkedFile]) -> None:
        self.version = version
        self.names = frozenset(linked.file.name for linked in files)
        self._store_id = store_id
        self._files = files
        self._done = threading.Event()
        self.damaged: dict[str, str] = {}  # checkpoint file name -> what is wrong with it
        self._thread = threading.Thread(target=self._run, name=f"ttlstate-in-place-check-{store_id}",
                                        daemon=True)
        self._thread.start()

    @property
    def done(self) -> bool:
        return self._done.is_set()

    def wait(self) -> None:
        self._done.wait()

    def _run(self) -> None:
        try:
            crash_point("in-place-check")  # tests only: a check still running when a retry comes
            for linked in self._files:
                problem = _check(linked)
                if problem is not None:
                    self.damaged[linked.file.name] = problem
                    log.warning("ttlstate store %s: SST file %s, read in place since the restore of "
                                "version %d, %s; the next load passes over every snapshot naming it",
                                self._store_id, linked.source, self.version, problem)
        finally:
            self._done.set()


def _check(linked: LinkedFile) -> str | None:
    f = linked.file
    try:
        size = os.path.getsize(linked.source)
        crc = file_crc32(linked.source)  # zlib.crc32 releases the GIL on its 1 MiB chunks
    except OSError as e:
        return f"cannot be read ({e})"
    if size != f.size:
        return f"has {size} bytes where its snapshot recorded {f.size}: truncated or replaced"
    if crc != f.crc32:
        return "has other bytes than its snapshot recorded (checksum mismatch): corrupt or replaced"
    return None
