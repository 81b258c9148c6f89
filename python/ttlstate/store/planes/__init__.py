"""The data planes: where a store version's per-entry work runs.

`base` is the interface the provider (the control plane) calls; `native` runs it in C++
(native/, the default), `portable` in Python (the reference implementation, and the only
one with the rocksdict engine). `for_engine` picks the one that fits an opened engine.
"""

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
