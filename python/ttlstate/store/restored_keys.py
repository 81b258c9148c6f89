"""The key filter hashes of a local DB a load built from nothing, kept for the shim's filter.

The shim answers a read "absent" without asking the server when its filter of the store's
keys says so, so after a restore its filter must hold every key of the restored version. A DB
built key by key (record files) collects the hashes on the way (`ready`). A DB opened on an
SST snapshot's files has nothing to collect from: its keys are read back by a scan, which took
half of a restore's load at 5M keys. The scan is not on the restore's path: the shim starts the
restored version with a filter that answers "might be there" for every key (exact, only slower)
while recording the keys it writes, and asks for the bits at its next loads until it gets them.
The scan runs on a thread of its own at the lowest CPU priority, from the restore's load on:
it takes the time the executor's cores are not busy, and never holds up a batch. A close of the
DB stops it (native code checks every 4096 keys).

A scan of the same lineage covers every key of the restored version still stored (later
versions only add keys or remove them); the shim's filter adds the keys written since itself.

Kept, they are the bits of the one layer the shim will ask for (its first, sized by the
version's key count: key_filter_layout.py), not 8 bytes of hashes a key: a restore of 12.5M
keys holds 32 MB until the shim's next load instead of 100 MB (native/include/ttlstate/key_hash.h).
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections.abc import Callable
from enum import Enum

from ttlstate.engine.base import Engine
from ttlstate.store.key_filter_layout import KEY_FILTER_PROBES, first_layer_bits_log2
from ttlstate.store.planes.base import KeyHashes

log = logging.getLogger(__name__)


class Kept(Enum):
    """What a load says of the key hashes of the version it loaded (the wire's KEY_HASHES_*)."""

    NONE = "none"  # not kept: the shim builds its filter itself
    READY = "ready"  # collected while the DB was built: ask for the bits at once
    SCANNING = "scanning"  # being scanned: ask at the next loads


def _lowest_priority() -> None:
    """The calling thread yields the CPU to every other one (on Linux a thread has a nice value
    of its own; elsewhere this would renice the process, so it does nothing)."""
    if sys.platform.startswith("linux"):
        try:
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)
        except OSError:
            pass


class RestoredKeys:
    """The hashes of every key of `version` of local DB lineage `lineage`: collected while it
    was built (`ready`), or to be scanned from `engine` (`fresh()` makes the collector)."""

    def __init__(self, lineage: int, version: int, ready: KeyHashes | None = None,
                 engine: Engine | None = None, fresh: Callable[[], KeyHashes | None] | None = None) -> None:
        self.lineage = lineage
        self.version = version
        self._hashes = ready
        self._engine = engine
        self._fresh = fresh
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self._mu = threading.Lock()
        self.layer: tuple[int, int] | None = None  # (bits log2, probes) the hashes keep, once settled
        self.offered = False  # a load since they were done had the shim ask for them (KeptHashes.keep)

    @property
    def state(self) -> Kept:
        return Kept.READY if self._engine is None else Kept.SCANNING

    def describes(self, lineage: int, version: int) -> bool:
        return self.lineage == lineage and self.version == version

    def start(self, num_keys: int) -> None:
        """Keeps only the bits of the shim's first layer for a version of `num_keys` keys, and
        starts the scan on its own thread; once."""
        with self._mu:
            if self.layer is None:
                self.layer = (first_layer_bits_log2(num_keys), KEY_FILTER_PROBES)
                if self._hashes is not None:  # collected: from hashes to bits now
                    self._hashes.settle(*self.layer)
                    self.offered = True  # the shim asks for them after this very load
            if self._engine is None or self._thread is not None:
                return
            self._thread = threading.Thread(target=self._scan, name="ttlstate-key-scan", daemon=True)
            self._thread.start()

    def _scan(self) -> None:
        _lowest_priority()
        try:
            assert self._fresh is not None and self._engine is not None
            hashes = self._fresh()
            assert hashes is not None, "only planes that collect key hashes scan for them"
            assert self.layer is not None
            hashes.settle(*self.layer)  # before the scan: never a hash pair held
            self._engine.add_key_hashes(hashes)  # releases the GIL: the worker serves meanwhile
            self._hashes = hashes
        except BaseException as e:  # re-raised to whoever asks for the bits
            self._error = e

    @property
    def done(self) -> bool:
        """Whether the bits can be had now (collected, or scanned: successfully or not)."""
        thread = self._thread
        return self._engine is None or (thread is not None and not thread.is_alive())

    def wait(self, timeout: float | None = None) -> bool:
        """Until a started scan has ended (tests); whether it has."""
        thread = self._thread
        if thread is not None:
            thread.join(timeout)
        return self.done

    def fits(self, bits_log2: int, probes: int) -> bool:
        """Whether the kept bits give a layer of 2^bits_log2 bits and `probes` probes (the
        settled layer or a smaller one with its probes)."""
        return self.layer is None or (probes == self.layer[1] and bits_log2 <= self.layer[0])

    def bloom_words(self, bits_log2: int, probes: int) -> bytes:
        """The bits of a filter layer of 2^bits_log2 bits holding every key; only once `done`
        and only a layer it `fits`. A failed scan raises its error."""
        if not self.done:
            raise RuntimeError("the key scan has not ended")
        if self._error is not None:
            raise self._error
        assert self._hashes is not None
        return self._hashes.bloom_words(bits_log2, probes)


class KeptHashes:
    """The restored key hashes of one store's local DB, if any, until the shim takes them."""

    def __init__(self, store_id: str) -> None:
        self._store_id = store_id
        self.current: RestoredKeys | None = None

    def forget(self) -> None:
        """Drops the kept hashes. A scan still running stops when its DB closes, or ends on its
        own and is ignored: nothing waits for it."""
        self.current = None

    def keep(self, wanted: bool, lineage: int, version: int | None, num_keys: int) -> Kept:
        """After a load of `version` (of `num_keys` keys) of local DB `lineage`: whether its
        hashes are kept (starting their scan), or dropped when not `wanted`.

        Hashes kept for an earlier version are dropped at the second load that `wanted` them
        since they were done: the shim takes them at the first (READY: at their own load), or
        never will (its filter was dropped, or gave up), and they must not stay for good."""
        r = self.current
        if r is None:
            return Kept.NONE
        if version is None or not r.describes(lineage, version):
            if wanted and r.done:
                if r.offered:
                    self.forget()
                else:
                    r.offered = True
            return Kept.NONE
        if not wanted:
            self.forget()
            return Kept.NONE
        r.start(num_keys)
        return r.state

    def take(self, lineage: int, version: int) -> RestoredKeys | bool:
        """The kept hashes of `version` of local DB `lineage` once they are done (taken: asked
        for no more); True while their scan still runs; False if they are not kept."""
        r = self.current
        if r is None or not r.describes(lineage, version):
            return False
        if not r.done:
            return True
        self.current = None
        return r

    def bits(self, r: RestoredKeys, bits_log2: int, probes: int) -> bytes | None:
        """The filter layer's bits from hashes `take` gave, outside the store's lock; None if
        their scan failed or they do not give that layer (the shim scans the keys itself then)."""
        if not r.fits(bits_log2, probes):
            log.warning("ttlstate store %s: the shim asked for a key filter layer of 2^%d bits and %d "
                        "probes, the bits kept of restored version %d's keys are for (2^bits, probes) "
                        "%s; the shim scans the keys itself", self._store_id, bits_log2, probes,
                        r.version, r.layer)
            return None
        if r.state != Kept.SCANNING:
            return r.bloom_words(bits_log2, probes)
        try:
            return r.bloom_words(bits_log2, probes)
        except (OSError, RuntimeError) as e:
            log.warning("ttlstate store %s: scanning the keys of restored version %d for the key "
                        "filter failed (%s); the shim scans them itself", self._store_id, r.version, e)
            return None
