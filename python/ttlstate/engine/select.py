"""Opening an engine by kind: native by default, rocksdict on request, `auto` falls back.

The one place that decides whether the native extension is there (`native_module`).
"""

from __future__ import annotations

import functools
import logging
from types import ModuleType

from ttlstate.config.keys import EngineKind
from ttlstate.engine.base import Engine, FilterSettings
from ttlstate.errors import EngineUnavailable

log = logging.getLogger(__name__)




@functools.cache
def _load_native() -> tuple[ModuleType | None, str]:
    try:
        from ttlstate import _native
    except ImportError as e:
        return None, str(e)
    return _native, ""


def native_module() -> ModuleType | None:
    """The native extension `ttlstate._native`, or None in a portable build without it."""
    return _load_native()[0]


def native_import_error() -> str:
    """Why the native extension does not load ("" when it does)."""
    return _load_native()[1]


def native_available() -> bool:
    return native_module() is not None


def open_engine(kind: EngineKind, path: str, filter_settings: FilterSettings | None,
                mapped_reads: bool = False) -> Engine:
    """Open the engine; `filter_settings` is honoured by engines that have a compaction filter,
    `mapped_reads` (the directory may hold SST files read in place through the shim) by the
    native one, the only one whose snapshots are SST files."""
    if kind is EngineKind.AUTO:
        if native_available():
            kind = EngineKind.NATIVE
        else:
            log.warning("ttlstate: native engine not built; engine=auto falls back to rocksdict "
                        "(no compaction filter: expired entries are removed only on read, by "
                        "incremental cleanup and in snapshots)")
            kind = EngineKind.ROCKSDICT
    if kind is EngineKind.NATIVE:
        if not native_available():
            raise EngineUnavailable(
                "ttlstate engine 'native' was requested but the native extension "
                "ttlstate._native is not built. Run `make setup` (needs librocksdb-dev and g++), "
                "or set spark.sql.streaming.stateStore.ttlstate.engine to rocksdict or auto.")
        from ttlstate.engine.native_engine import NativeEngine

        return NativeEngine(path, filter_settings, mapped_reads)
    from ttlstate.engine.rocksdict_engine import RocksdictEngine

    return RocksdictEngine(path)
