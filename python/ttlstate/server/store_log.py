"""What the state server logs at INFO: its start, and each store it opens with the TTL in effect.

Nothing per row or per batch: one line when a server starts and one per store a worker opens
(a store opens once per executor, partition and stateful operator, again after a restart).

Where the lines go: the server's stderr is the executor's (Spark's own executor log). They are
logged at INFO through the `ttlstate.lifecycle` logger, which `TTLSTATE_LOG_LEVEL` controls
when it is set. When it is not (the default): the start line is shown, and each store's line is
shown when the executor's log shows INFO, which the shim tells the server at OPEN (`logInfo`):
so on a cluster, whose executors log at INFO, every store's TTL is in its executor's log, and a
local PySpark session or shell (whose console Spark filters to WARN, though its log level is
INFO; the driver's console is the executor's stderr there) does not print one line per shuffle
partition.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping

from ttlstate.config import keys as K
from ttlstate.config.parse import format_duration_ms
from ttlstate.config.store_config import StoreConfig
from ttlstate.server.ttl_scope import is_join_store, is_limit_store

LEVEL_ENV = "TTLSTATE_LOG_LEVEL"
FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
# The server's start and its stores: at INFO, shown unless TTLSTATE_LOG_LEVEL says otherwise.
lifecycle = logging.getLogger("ttlstate.lifecycle")


def level_from_env() -> str | None:
    """TTLSTATE_LOG_LEVEL if it is set to a logging level (DEBUG, INFO, WARNING, ...), else None."""
    level = os.environ.get(LEVEL_ENV, "").strip().upper()
    return level if level and isinstance(logging.getLevelName(level), int) else None


if level_from_env() is None:
    lifecycle.setLevel(logging.INFO)


def configure_logging() -> None:
    """The supervisor's logging: stderr, at TTLSTATE_LOG_LEVEL (default WARNING; the lines of
    `lifecycle` logger at INFO). A bad level falls back to the default with a warning: the server starts."""
    logging.basicConfig(level=level_from_env() or "WARNING", stream=sys.stderr, format=FORMAT)
    if os.environ.get(LEVEL_ENV, "").strip() and level_from_env() is None:
        logging.getLogger("ttlstate.server").warning(
            "%s=%r is not a logging level (DEBUG, INFO, WARNING, ERROR); using the default",
            LEVEL_ENV, os.environ[LEVEL_ENV])


def operator_names(info: Mapping[str, object]) -> dict[int, str] | None:
    """The query's operator names by id, as the shim sends them at OPEN (None: not sent)."""
    raw = info.get("operatorNames")
    if not isinstance(raw, Mapping):
        return None
    out = {}
    for op, name in raw.items():
        try:
            out[int(op)] = str(name)
        except (TypeError, ValueError):
            continue
    return out


def why_no_ttl(info: Mapping[str, object]) -> str | None:
    """Why TTL never applies to this store (None: it may)."""
    store = str(info.get("storeName", "default"))
    if is_join_store(store):
        return ("a stream-stream join store: the join keeps counts across its four stores, so "
                "expiring one entry would corrupt it")
    if is_limit_store(str(info.get("keySchema", "")), str(info.get("valueSchema", ""))):
        return "the store of a streaming limit: its one row is the limit's count"
    return None


def describe_store(info: Mapping[str, object], config: StoreConfig, ttl_applies: bool) -> str:
    """One line: which store (operator id and name, partition, store name) and its TTL in
    effect, with the key it comes from, or why TTL does not apply to it."""
    op = info.get("operatorId", "?")
    name = info.get("operatorName")
    where = (f"operator {op}{f' ({name})' if name else ''}, partition {info.get('partitionId', '?')}, "
             f"store {info.get('storeName', 'default')}")
    ttl = config.ttl
    if not ttl_applies:
        what = f"no TTL: {why_no_ttl(info) or 'TTL does not apply to it'}"
    elif not ttl.enabled:
        what = f"TTL off ({_short(config.ttl_key)}=off)"
    else:
        cleanup = []
        if ttl.incremental is not None:
            cleanup.append(f"incremental {ttl.incremental.size}"
                           f"{' per record' if ttl.incremental.per_record else ' per commit'}")
        if ttl.compaction_filter is not None:
            cleanup.append("compaction filter")
        if ttl.full_snapshot:
            cleanup.append("full snapshot")
        what = (f"TTL {format_duration_ms(ttl.ttl_ms)} ({_short(config.ttl_key)}), "
                f"{ttl.update_type.value}, {ttl.visibility.value}, time {ttl.time_source.value}, "
                f"cleanup {', '.join(cleanup) or 'on read only'}")
    return f"store opened: {where}: {what}; engine {config.engine.value}"


def log_store_opened(info: Mapping[str, object], config: StoreConfig) -> None:
    """Logs `describe_store` for a store the worker just opened (`config` as it will serve it,
    TTL already turned off where it does not apply)."""
    if level_from_env() is None and str(info.get("logInfo", "")).lower() != "true":
        return  # by default, only when the executor logs at INFO too
    if lifecycle.isEnabledFor(logging.INFO):
        lifecycle.info(describe_store(info, config, why_no_ttl(info) is None))


def _short(key: str) -> str:
    return key[len(K.PREFIX):] if key.startswith(K.PREFIX) else key
