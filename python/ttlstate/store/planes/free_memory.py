"""Handing the memory of ended batches back to the OS, when the worker is idle.

A batch's writes are native allocations, freed on whichever thread ends the batch (the apply's,
the commit's, a freeing thread). glibc's allocator keeps freed memory in the arena of the
thread that allocated it, so a worker's RSS climbs to the sum of its largest batches across
arenas and stays there (measured at 5M keys: about 100 MB of a worker's 130 MB). After a batch
ends, a daemon thread trims the allocator (`malloc_trim`) once the worker has had no open store
version for `QUIET_S`: a trim holds each arena's lock while it walks it, so one during a batch
stalled every allocation of the stores still working (measured: the hot-set deduplication
fell to 0.7x of the code before). At most one trim per `MIN_GAP_S`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from ttlstate.engine.select import native_module

QUIET_S = 0.2
MIN_GAP_S = 1.0
_POLL_S = 0.05

_wanted = threading.Event()
_started = False
_start_lock = threading.Lock()
_idle: Callable[[], bool] = lambda: True  # noqa: E731  (the worker sets its own, `set_idle_probe`)


def set_idle_probe(idle: Callable[[], bool]) -> None:
    """How the worker says it is idle: no store version open on any of its connections."""
    global _idle
    _idle = idle


def _probe_idle() -> bool:
    """The worker's probe; a failure (a connection coming or going while it looked) counts as
    busy, and the next poll asks again: the trim thread must not die of it."""
    try:
        return _idle()
    except Exception:
        return False


def _wait_until_quiet() -> None:
    quiet_since: float | None = None
    while True:
        now = time.monotonic()
        if not _probe_idle():
            quiet_since = None
        elif quiet_since is None:
            quiet_since = now
        elif now - quiet_since >= QUIET_S:
            return
        time.sleep(_POLL_S)


def _run() -> None:
    while True:
        _wanted.wait()
        _wanted.clear()
        _wait_until_quiet()
        native = native_module()  # only native stores end batches here: it is loaded
        if native is not None:
            native.release_free_memory()
        time.sleep(MIN_GAP_S)  # requests meanwhile are served by one trim after the gap


def batch_ended() -> None:
    """A batch's native memory was freed: trim once the worker is idle (never on the caller's
    thread)."""
    global _started
    if not _started:
        with _start_lock:
            if not _started:
                threading.Thread(target=_run, name="ttlstate-trim", daemon=True).start()
                _started = True
    _wanted.set()
