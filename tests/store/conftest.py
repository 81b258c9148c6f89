from __future__ import annotations

from collections.abc import Callable

import pytest

from ttlstate.checkpoint.location import LocalCheckpointLocation
from ttlstate.config.keys import EngineKind
from ttlstate.config.store_config import StoreConfig, TtlConfig
from ttlstate.store.provider import StoreProvider
from ttlstate.ttl.clock import ManualClock


@pytest.fixture(params=[EngineKind.NATIVE, EngineKind.ROCKSDICT], ids=lambda e: e.value)
def make_provider(request, tmp_path) -> Callable[..., StoreProvider]:  # noqa: ANN001
    """Providers over one checkpoint dir; each call gets a fresh, empty local dir."""
    made: list[StoreProvider] = []

    def make(ttl: TtlConfig | None = None, snapshot_interval: int = 2,
             local: str | None = None, checkpoint_ids: bool = False) -> StoreProvider:
        cfg = StoreConfig(ttl or TtlConfig(), request.param, snapshot_interval)
        p = StoreProvider("op0/p0", str(tmp_path / (local or f"local{len(made)}")),
                          LocalCheckpointLocation(str(tmp_path / "ck")), cfg, ManualClock(1000),
                          checkpoint_ids=checkpoint_ids)
        made.append(p)
        return p

    yield make
    for p in made:
        p.close()

