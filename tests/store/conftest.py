from __future__ import annotations

from collections.abc import Callable

import pytest

from ttlstate.checkpoint.location import LocalCheckpointLocation
from ttlstate.config.keys import EngineKind, SnapshotLayout
from ttlstate.config.store_config import StoreConfig, TtlConfig
from ttlstate.store.provider import StoreProvider
from ttlstate.ttl.clock import ManualClock

# The native engine writes SST snapshots by default; record snapshots are what the rocksdict
# engine always writes and what `snapshot.layout=records` selects: every contract holds for all.
_VARIANTS = {"native": (EngineKind.NATIVE, SnapshotLayout.SST),
             "native-records": (EngineKind.NATIVE, SnapshotLayout.RECORDS),
             "rocksdict": (EngineKind.ROCKSDICT, SnapshotLayout.RECORDS)}


@pytest.fixture(params=list(_VARIANTS))
def make_provider(request, tmp_path) -> Callable[..., StoreProvider]:  # noqa: ANN001
    """Providers over one checkpoint dir; each call gets a fresh, empty local dir."""
    made: list[StoreProvider] = []

    def make(ttl: TtlConfig | None = None, snapshot_interval: int = 2,
             local: str | None = None, checkpoint_ids: bool = False) -> StoreProvider:
        engine, layout = _VARIANTS[request.param]
        cfg = StoreConfig(ttl or TtlConfig(), engine, snapshot_interval, layout)
        p = StoreProvider("op0/p0", str(tmp_path / (local or f"local{len(made)}")),
                          LocalCheckpointLocation(str(tmp_path / "ck")), cfg, ManualClock(1000),
                          checkpoint_ids=checkpoint_ids)
        made.append(p)
        return p

    yield make
    for p in made:
        p.close()

