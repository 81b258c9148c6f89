"""What every part of one store shares: who the store is, its settings, its files and its lock.

The provider (provider.py) builds one `StoreContext` and hands it to each of its parts (the
local DB, the loader, the committer, maintenance), so none of them needs the provider itself.
"""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass, field

from ttlstate.config.store_config import StoreConfig
from ttlstate.errors import StoreStateError
from ttlstate.store.sst_snapshots import SstSnapshots
from ttlstate.store.store_files import StoreFiles


@dataclass
class StoreContext:
    store_id: str
    # Written into every file; a file of another query is refused.
    query_id: str | None
    # Replaced by a state reader's load: the TTL the checkpoint recorded (recorded_settings.py).
    config: StoreConfig
    files: StoreFiles
    sst: SstSnapshots
    # Checkpoint format 2: versions are loaded by (version, checkpoint id), every commit gets a
    # new id and writes `<v>_<id>.*` files (see checkpoint/id_plan.py).
    checkpoint_ids: bool
    # Serves the state data source (no streaming query): a version reads as the query saw it.
    reader: bool
    # A store with column families (transformWithState's): its changelogs log every put, delete
    # and append in the order made, as Spark's RocksDB provider's do (its change feed shows each),
    # and its metrics count the keys of its user families and of its internal ones apart
    # (column_families.is_internal_key).
    column_families: bool = False
    # The store's lock: held by every public call of the provider, re-entrant.
    lock: threading.RLock = field(default_factory=threading.RLock)
    # Metric counters accumulated since the last report (store/metric_names.py names them).
    counters: Counter[str] = field(default_factory=Counter)
    # Snapshots a load passed over as damaged or missing (repair.py): never overwritten, so the
    # evidence stays, and a snapshot is due at the next maintenance to take their place.
    unusable_snapshots: set[str] = field(default_factory=set)
    snapshot_due: bool = False

    def not_loaded(self) -> StoreStateError:
        return StoreStateError(f"ttlstate store {self.store_id}: no version is loaded")
