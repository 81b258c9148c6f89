"""A store opened in place comes back to the local disk (`snapshot.localFill`).

A restore in place (in_place.py) makes the restore's time independent of the state's size, but
leaves every read the block cache misses to the checkpoint's file system: one range request
per block, for as long as the DB reads those files. After a lost executor, the batch after the
restore made 14,642 such reads at 50M keys on HDFS. So after the restore, one thread of the
process copies each placeholder's file to the local disk, the newest first (level 0 and 1: the
keys the batches just wrote), while the store's local SST files fit in `snapshot.localMaxBytes`,
and the native side switches RocksDB's reads of it, of the readers it holds open too, to the
local copy once the copy is whole (mapped_files.h, FillFromSource): the reverse of eviction
(local_cache.py). One file at a time in each worker process: the batches keep the cores.

A copy is switched to only when it has its snapshot's size and checksum, so a fill is also the
whole check of the file (in_place.MappedCheck reads it only on a retry); a copy that differs is
recorded as damage, and the next load passes over every snapshot naming it, as when a restore's
check finds it. An unreachable file system stops the store's fill with a WARN: its files stay
read in place, whose reads fail the task naming the file, as they would without the fill.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from ttlstate.checkpoint.sst_manifest import SstFile
from ttlstate.engine.select import native_module
from ttlstate.faults import crash_point
from ttlstate.store.in_place import MappedFile, whole_file_problem
from ttlstate.store.local_cache import local_sst_bytes, sst_number

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class FillJob:
    """The placeholders one restore in place opened, to fill."""

    store_id: str
    version: int
    db_dir: str
    files: tuple[MappedFile, ...]
    max_bytes: int  # snapshot.localMaxBytes (0: unbounded)
    current: Callable[[], bool]  # whether the DB the restore opened is still open
    filled: Callable[[SstFile], None]  # read from the local disk now: counted, and known whole
    damaged: Callable[[str, str], None]  # (checkpoint file name, what is wrong with it)


class LocalFill:
    """The process's fill thread and its queue of jobs, started with the first job."""

    def __init__(self) -> None:
        self._jobs: queue.Queue[FillJob] = queue.Queue()
        self._mu = threading.Lock()
        self._thread: threading.Thread | None = None

    def submit(self, job: FillJob) -> None:
        with self._mu:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="ttlstate-local-fill", daemon=True)
                self._thread.start()
        self._jobs.put(job)

    def idle(self, timeout_s: float) -> bool:
        """Waits until every job submitted so far is done (tests)."""
        deadline = time.monotonic() + timeout_s
        while self._jobs.unfinished_tasks:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.01)
        return True

    def _run(self) -> None:
        while True:
            job = self._jobs.get()
            try:
                fill(job)
            except Exception:  # never the thread: the next store's job still runs
                log.exception("ttlstate store %s: filling the local disk failed", job.store_id)
            finally:
                self._jobs.task_done()


FILLS = LocalFill()


def fill(job: FillJob) -> None:
    """Fills the job's placeholders, the newest (highest numbered) first, while they fit."""
    native = native_module()
    assert native is not None  # placeholders exist only with it
    started = time.monotonic()
    files = count = 0
    for mapped in sorted(job.files, key=lambda m: -sst_number(m.file.local)):
        f = mapped.file
        if not job.current():
            break
        local = os.path.join(job.db_dir, f.local)
        if job.max_bytes and sum(local_sst_bytes(job.db_dir).values()) + f.size > job.max_bytes:
            continue  # a smaller, older one may fit
        try:
            crash_point("local-fill")  # tests only: the file system goes away now
            got = native.fill_mapped_file(local, mapped.uri, f.crc32)
        except RuntimeError as e:
            log.warning("ttlstate store %s: SST file %s stays read in place, and so do the rest of "
                        "the %d the restore of version %d opened in place: it could not be copied to "
                        "the local disk (snapshot.localFill): %s", job.store_id, mapped.uri,
                        len(job.files), job.version, e)
            break
        if got is None:  # a compaction removed it, or the DB was dropped
            continue
        switched, whole = got
        if switched:
            files, count = files + 1, count + f.size
            job.filled(f)
            continue
        problem = whole_file_problem(whole, f)
        if problem is None:  # (not expected: a whole copy is switched to)
            continue
        job.damaged(f.name, problem)
        log.warning("ttlstate store %s: SST file %s, read in place since the restore of version %d, "
                    "%s; it stays read in place, and the next load passes over every snapshot naming "
                    "it", job.store_id, mapped.uri, job.version, problem)
    if files:
        log.info("ttlstate store %s: %d of the %d SST files the restore of version %d opened in place "
                 "(%d bytes) are read from the local disk again, after %.1f s", job.store_id, files,
                 len(job.files), job.version, count, time.monotonic() - started)
