"""The stores a worker serves, by handle: opened once per store, shared by all connections."""

from __future__ import annotations

import logging
import os
import re
import shutil
import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import cast

from ttlstate.checkpoint.identity import store_label
from ttlstate.checkpoint.location import CheckpointLocation, LocalCheckpointLocation
from ttlstate.config import keys as K
from ttlstate.config.store_config import MemoryConfig, StoreConfig, store_config_from_confs
from ttlstate.engine.select import native_module
from ttlstate.errors import RequestError
from ttlstate.server import protocol as P
from ttlstate.server import store_log
from ttlstate.server.remote_checkpoint import RemoteCheckpointLocation
from ttlstate.server.ttl_scope import ttl_applies
from ttlstate.store.in_place import forget_placed
from ttlstate.store.planes.base import StoreVersion
from ttlstate.store.provider import StoreProvider

log = logging.getLogger("ttlstate.server")


def _location(info: dict[str, object], config: StoreConfig) -> CheckpointLocation:
    """The store's checkpoint folder: read and written here when the shim found it on Hadoop's
    local file system (`localCheckpointDir`) and `checkpoint.localFiles` allows it, else through
    the shim's Hadoop FileSystem."""
    local = info.get("localCheckpointDir")
    if local and config.checkpoint_local_files:
        return LocalCheckpointLocation(str(local))
    socket = info.get("rangeSocket")
    return RemoteCheckpointLocation(str(info.get("checkpointDir", "")), str(socket) if socket else None)


@dataclass
class OpenStore:
    """A store a shim opened: its provider, and the version the last load gave (if any)."""

    key: str
    provider: StoreProvider
    local_dir: str
    store: StoreVersion | None = None
    closing: bool = False  # closed by the shim while a task had a version open: closed at its end


class Registry:
    """The providers of this worker, by handle; shared by all connections.

    Spark closes a provider from its maintenance thread when the coordinator names another
    executor as the store's active one: after a lost executor, a retried task there and a task
    of the stage's earlier attempt still running here use the same partition's store at once.
    A close while a connection of this worker has a version of the store open (`in_use`) waits
    for that version to end (commit, abort, or its connection dropping: `version_ended`), as
    Spark's RocksDB provider's close waits for the task holding its instance; closing at once
    failed that task ("version N is closed"), and a retry could meet the same race again."""

    def __init__(self, root: str, in_use: Callable[[int], bool] = lambda handle: False) -> None:
        self.root = root
        self._in_use = in_use
        self._lock = threading.Lock()
        self._by_key: dict[str, int] = {}
        self._open: dict[int, OpenStore] = {}
        self._next = 1
        self._memory: MemoryConfig | None = None

    def open(self, key: str, confs: dict[str, str], info: dict[str, object]) -> int:
        with self._lock:
            handle = self._by_key.get(key)
            if handle is not None:
                self._open[handle].closing = False  # wanted again: a close still waiting is off
                return handle
            operator_id = int(cast("int | str", info.get("operatorId", -1)))
            config = store_config_from_confs(confs, operator_id, store_log.operator_names(info))
            self._apply_memory(config.memory)
            if not ttl_applies(str(info.get("storeName", "default")), str(info.get("keySchema", "")),
                               str(info.get("valueSchema", "")), info.get("columnFamilies") is True):
                config = replace(config, ttl=config.ttl.disabled())
            store_log.log_store_opened(info, config)
            handle = self._next
            self._next += 1
            local = os.path.join(self.root, f"{handle}-{re.sub(r'[^A-Za-z0-9_.-]', '_', key)[-80:]}")
            store_id = store_label(info.get("operatorId", "?"), info.get("partitionId", "?"),  # type: ignore[arg-type]
                                   str(info.get("storeName", "default")))
            query = info.get("queryId")
            location = _location(info, config)
            provider = StoreProvider(store_id, local, location, config,
                                     query_id=str(query) if query else None,
                                     checkpoint_ids=bool(info.get("checkpointIds", False)),
                                     reader=bool(info.get("stateReader", False)),
                                     column_families=info.get("columnFamilies") is True)
            self._by_key[key] = handle
            self._open[handle] = OpenStore(key, provider, local)
            return handle

    def _apply_memory(self, memory: MemoryConfig) -> None:
        """One block cache and write-buffer budget for all of this worker's stores."""
        native = native_module()
        if native is None or self._memory == memory:
            return
        if self._memory is not None:
            log.warning("ttlstate server: %s changed to %d bytes (ratio %s); the worker's shared "
                        "RocksDB memory is resized", K.MEMORY_MAX_BYTES.key, memory.max_bytes,
                        memory.write_buffer_ratio)
        native.configure_memory(memory.max_bytes, memory.write_buffer_ratio)
        self._memory = memory

    def get(self, handle: int) -> OpenStore:
        opened = self._open.get(handle)
        if opened is None:
            raise RequestError(P.ERR_STATE, f"unknown store handle {handle} (closed or never opened)")
        return opened

    def close(self, handle: int) -> None:
        """Closes the store now, or once the version a connection has open ends."""
        with self._lock:
            opened = self._open.get(handle)
            if opened is None:
                return
            if self._in_use(handle):
                if not opened.closing:
                    log.info("ttlstate store %s: closed by Spark while a task has a version of it "
                             "open; it closes when that version ends", opened.provider.store_id)
                opened.closing = True
                return
            self._forget(handle, opened)
        self._close(opened)

    def version_ended(self, handle: int) -> None:
        """A connection's version of the store ended: a close waiting for it happens now."""
        with self._lock:
            opened = self._open.get(handle)
            if opened is None or not opened.closing or self._in_use(handle):
                return
            self._forget(handle, opened)
        self._close(opened)

    def _forget(self, handle: int, opened: OpenStore) -> None:
        del self._open[handle]
        self._by_key.pop(opened.key, None)

    @staticmethod
    def _close(opened: OpenStore) -> None:
        opened.provider.close()
        forget_placed(opened.local_dir)
        shutil.rmtree(opened.local_dir, ignore_errors=True)
