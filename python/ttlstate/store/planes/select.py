"""Which data plane runs a store: the one that fits the engine its local DB opened."""

from __future__ import annotations

import threading

from ttlstate.engine.base import Engine
from ttlstate.store.planes.base import DataPlane


def for_engine(engine: Engine, lock: threading.RLock) -> DataPlane:
    """The data plane that runs a store on `engine` (`lock`: the store's)."""
    if engine.native_data_plane:
        from ttlstate.store.planes.native import NativePlane

        return NativePlane()
    from ttlstate.store.planes.portable import PortablePlane

    return PortablePlane(lock)
