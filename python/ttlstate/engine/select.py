"""Opening an engine by kind: native by default, rocksdict on request, `auto` falls back."""

from __future__ import annotations

import logging

from ttlstate.config.keys import EngineKind
from ttlstate.engine.base import Engine, FilterSettings

log = logging.getLogger(__name__)


class EngineUnavailable(RuntimeError):
    pass


def native_available() -> bool:
    try:
        import ttlstate._native  # noqa: F401
    except ImportError:
        return False
    return True


def open_engine(kind: EngineKind, path: str, filter_settings: FilterSettings | None) -> Engine:
    """Open the engine; `filter_settings` is honoured by engines that have a compaction filter."""
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

        return NativeEngine(path, filter_settings)
    from ttlstate.engine.rocksdict_engine import RocksdictEngine

    return RocksdictEngine(path)
