"""Snapshots started by the commit that makes them due (`snapshot.afterCommit`), not by Spark's
maintenance, which runs only every `maintenanceInterval` (60 s by default): a restore then
replays only the changelogs committed while the last snapshot was written, instead of up to a
maintenance interval's worth.

One daemon thread per state server worker process writes them, one at a time, so the
snapshots of many stores never take more than one core from the batches beside them. A store
is queued at most once: a commit while its snapshot is written queues it again, and the next
run writes the then newest version (write_if_due decides, under the store's lock, as
maintenance does). A failure is logged and left to the next due commit or maintenance, as a
failed maintenance is: the changelogs already hold every committed version.
"""

from __future__ import annotations

import logging
import queue
import threading
from typing import Protocol

log = logging.getLogger(__name__)


class Snapshotter(Protocol):
    """A store's snapshot writer (snapshots.py): what the thread calls."""

    @property
    def store_id(self) -> str: ...

    def write_if_due(self) -> str | None: ...


class BackgroundSnapshots:
    """The queue of stores whose due snapshot waits for the background thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queued: set[int] = set()  # id() of each queued writer (a reopened store has a new one)
        self._queue: queue.SimpleQueue[Snapshotter] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._idle = threading.Condition(self._lock)
        self._running = 0

    def schedule(self, writer: Snapshotter) -> None:
        """Queue the store's `write_if_due`, unless it is queued already."""
        with self._lock:
            if id(writer) in self._queued:
                return
            self._queued.add(id(writer))
            self._running += 1
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="ttlstate-snapshots", daemon=True)
                self._thread.start()
        self._queue.put(writer)

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Until every queued snapshot was written (tests); False on timeout."""
        with self._lock:
            return self._idle.wait_for(lambda: self._running == 0, timeout)

    def _run(self) -> None:
        while True:
            writer = self._queue.get()
            with self._lock:
                self._queued.discard(id(writer))  # a commit from now on queues it again
            try:
                writer.write_if_due()
            except Exception:
                log.warning("ttlstate store %s: a snapshot started after a commit failed; the next "
                            "due commit or maintenance writes one (the changelogs hold every "
                            "committed version meanwhile)", writer.store_id, exc_info=True)
            finally:
                with self._lock:
                    self._running -= 1
                    self._idle.notify_all()


# The worker process's one queue (its stores' providers share it).
BACKGROUND = BackgroundSnapshots()
