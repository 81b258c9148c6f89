from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest
from tests.range_service import RangeService, Served, short_socket_path

from ttlstate.checkpoint.location import LocalCheckpointLocation
from ttlstate.config.keys import EngineKind, SnapshotLayout
from ttlstate.config.store_config import StoreConfig, TtlConfig
from ttlstate.store.provider import StoreProvider
from ttlstate.ttl.clock import ManualClock

# The native engine writes SST snapshots by default; record snapshots are what the rocksdict
# engine always writes and what `snapshot.layout=records` selects; `in-place` restores SST
# snapshots by reading their files in the checkpoint (snapshot.readInPlace), from a local folder or
# (`ranges`) through a range service as on HDFS or S3: every contract holds for all.
_VARIANTS = {"native": (EngineKind.NATIVE, SnapshotLayout.SST, False),
             "native-in-place": (EngineKind.NATIVE, SnapshotLayout.SST, True),
             "native-ranges": (EngineKind.NATIVE, SnapshotLayout.SST, True),
             "native-records": (EngineKind.NATIVE, SnapshotLayout.RECORDS, False),
             "rocksdict": (EngineKind.ROCKSDICT, SnapshotLayout.RECORDS, False)}


@contextmanager
def _makers(tmp_path, variant: str) -> Iterator[Callable[..., StoreProvider]]:  # noqa: ANN001
    """Providers of `variant` over one checkpoint dir; each call gets a fresh, empty local dir."""
    made: list[StoreProvider] = []
    checkpoint_dir = str(tmp_path / "ck")
    service = None
    if variant == "native-ranges":
        os.makedirs(checkpoint_dir, exist_ok=True)
        service = RangeService(checkpoint_dir, short_socket_path(str(tmp_path), "ranges.sock"))

    def make(ttl: TtlConfig | None = None, snapshot_interval: int = 2,
             local: str | None = None, checkpoint_ids: bool = False,
             column_families: bool = False, local_max_bytes: int = 0,
             local_fill: bool = False) -> StoreProvider:
        engine, layout, in_place = _VARIANTS[variant]
        cfg = StoreConfig(ttl or TtlConfig(), engine, snapshot_interval, layout,
                          snapshot_read_in_place=in_place, snapshot_local_max_bytes=local_max_bytes,
                          snapshot_local_fill=local_fill)
        location = LocalCheckpointLocation(checkpoint_dir)
        p = StoreProvider("op0/p0", str(tmp_path / (local or f"local{len(made)}")),
                          location if service is None else Served(location, service.socket_path),  # type: ignore[arg-type]
                          cfg, ManualClock(1000),
                          checkpoint_ids=checkpoint_ids, column_families=column_families)
        made.append(p)
        return p

    try:
        yield make
    finally:
        for p in made:
            p.close()
        if service is not None:
            service.stop()


@pytest.fixture(params=list(_VARIANTS))
def make_provider(request, tmp_path) -> Iterator[Callable[..., StoreProvider]]:  # noqa: ANN001
    """Providers of each variant over one checkpoint dir; each call gets a fresh, empty local dir."""
    with _makers(tmp_path, request.param) as make:
        yield make


@pytest.fixture
def make_sst_provider(tmp_path) -> Iterator[Callable[..., StoreProvider]]:  # noqa: ANN001
    """`make_provider` of the native engine with SST snapshots only: what SST files concern."""
    with _makers(tmp_path, "native") as make:
        yield make


@pytest.fixture
def make_ranges_provider(tmp_path) -> Iterator[Callable[..., StoreProvider]]:  # noqa: ANN001
    """`make_in_place_provider` reading the files through a range service (tests/range_service.py)."""
    with _makers(tmp_path, "native-ranges") as make:
        yield make


@pytest.fixture
def make_in_place_provider(tmp_path) -> Iterator[Callable[..., StoreProvider]]:  # noqa: ANN001
    """`make_sst_provider` whose restores read the SST files in the checkpoint (in_place.py)."""
    with _makers(tmp_path, "native-in-place") as make:
        yield make
