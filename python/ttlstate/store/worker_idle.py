"""Whether the worker process is between batches (no store version open on any connection).

The background work that would compete with a batch for the executor's cores waits for a
quiet spell: the allocator's trim (planes/free_memory.py) and the copy of a restore's files to
the local disk (local_fill.py). The worker sets the probe (server/worker.py); elsewhere (a
store used in-process, the tests) the worker counts as idle.
"""

from __future__ import annotations

import time
from collections.abc import Callable

POLL_S = 0.05

_idle: Callable[[], bool] = lambda: True  # noqa: E731


def set_idle_probe(idle: Callable[[], bool]) -> None:
    """How the worker says it is idle: no store version open on any of its connections."""
    global _idle
    _idle = idle


def is_idle() -> bool:
    """The worker's probe; a failure (a connection coming or going while it looked) counts as
    busy, and the next poll asks again: the threads waiting on it must not die of it."""
    try:
        return _idle()
    except Exception:
        return False


def wait_until_quiet(quiet_s: float, max_wait_s: float | None = None) -> bool:
    """Returns once the worker has been idle for `quiet_s` (True), or after `max_wait_s` of
    waiting without that (False; None: no limit)."""
    start = time.monotonic()
    quiet_since: float | None = None
    while True:
        now = time.monotonic()
        if not is_idle():
            quiet_since = None
        elif quiet_since is None:
            quiet_since = now
        if quiet_since is not None and now - quiet_since >= quiet_s:
            return True
        if max_wait_s is not None and now - start >= max_wait_s:
            return False
        time.sleep(POLL_S)
