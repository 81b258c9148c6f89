"""The TTL settings a checkpoint was written with, and what a change of them at restart does.

Every checkpoint file records the settings in force (`settings` in its header). A query
restarted with other settings gets one WARN per operator and change, naming the old and new
values and their effect, because some effects cannot be undone: a shorter TTL expires old
entries at the next batch, and entries already removed do not come back when TTL is turned off
or lengthened.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import replace

from ttlstate.checkpoint.record_file import RecordFileHeader
from ttlstate.config.keys import StateVisibility, UpdateType
from ttlstate.config.parse import format_duration_ms
from ttlstate.config.store_config import StoreConfig, TtlConfig

log = logging.getLogger(__name__)

_warned: set[tuple[str | None, str, tuple[str, ...]]] = set()
_warned_lock = threading.Lock()


def settings_of(ttl: TtlConfig) -> dict[str, object]:
    """The settings recorded in each file's header (JSON values)."""
    return {"ttlMs": ttl.ttl_ms, "updateType": ttl.update_type.value,
            "stateVisibility": ttl.visibility.value, "timeSource": ttl.time_source.value}


def recorded_ttl(recorded: dict[str, object] | None, ttl_ms: int | None, current: TtlConfig
                 ) -> TtlConfig:
    """The TTL a version was written with: its file's recorded settings (`ttl_ms`, the header's
    ttlMs, for files written before settings were recorded), the rest as `current`."""
    if recorded is None:
        return replace(current, ttl_ms=ttl_ms)
    out = replace(current, ttl_ms=recorded.get("ttlMs"))  # type: ignore[arg-type]
    try:
        out = replace(out, update_type=UpdateType(recorded["updateType"]))
    except (KeyError, ValueError):
        pass
    try:
        out = replace(out, visibility=StateVisibility(recorded["stateVisibility"]))
    except (KeyError, ValueError):
        pass
    return out


def _ttl_text(ms: object) -> str:
    return "off" if ms is None else format_duration_ms(int(ms))  # type: ignore[call-overload]


def describe_changes(old: dict[str, object], new: dict[str, object]) -> list[str]:
    """One sentence per setting that differs, with its consequence; keys absent from `old`
    (files written before they were recorded) are not compared."""
    out: list[str] = []
    if "ttlMs" in old and old["ttlMs"] != new["ttlMs"]:
        was, now = old["ttlMs"], new["ttlMs"]
        change = f"TTL {_ttl_text(was)} -> {_ttl_text(now)}"
        if now is None:
            out.append(f"{change}: entries are kept forever from now on; entries that expired "
                       "or were removed under the old TTL do not come back")
        elif was is None or int(now) < int(was):  # type: ignore[call-overload]
            out.append(f"{change}: entries not accessed for {_ttl_text(now)} expire at the next "
                       "batch")
        else:
            out.append(f"{change}: entries live longer from now on; those already removed do "
                       "not come back")
    for key, effect in (("updateType", "which accesses refresh an entry's timestamp"),
                        ("stateVisibility", "whether expired entries not yet removed are returned"),
                        ("timeSource", "the clock TTL counts in; entries' timestamps were written "
                                       "in the old clock and are compared with the new one")):
        if key in old and old[key] != new[key]:
            out.append(f"{key} {old[key]} -> {new[key]}: {effect} changes from the next batch")
    return out


def warn_if_changed(store_id: str, query_id: str | None, recorded: dict[str, object] | None,
                    ttl: TtlConfig) -> list[str]:
    """Log the changes between `recorded` and `ttl` once per query, operator and change (a
    query's partitions all see the same change); returns the sentences, logged or not."""
    if recorded is None:
        return []
    changes = describe_changes(recorded, settings_of(ttl))
    if not changes:
        return changes
    operator = ",".join(p for p in store_id.split(",") if not p.startswith("part="))
    key = (query_id, operator, tuple(changes))
    with _warned_lock:
        if key in _warned:
            return changes
        _warned.add(key)
    log.warning("ttlstate %s%s: the TTL settings differ from those the checkpoint was written "
                "with: %s", operator, f" (query {query_id})" if query_id else "", "; ".join(changes))
    return changes


class WrittenWith:
    """The TTL settings of the newest file the last load read: a query is warned when its own
    differ, and a state reader reads the version with them (as the query saw it)."""

    def __init__(self, store_id: str, query_id: str | None, reader: bool) -> None:
        self._store_id = store_id
        self._query_id = query_id
        self._reader = reader
        self._ttl: TtlConfig | None = None

    def check(self, newest: RecordFileHeader, current: TtlConfig) -> None:
        self._ttl = recorded_ttl(newest.settings, newest.ttl_ms, current)
        if not self._reader:
            warn_if_changed(self._store_id, self._query_id, newest.settings, current)

    def reader_config(self, config: StoreConfig) -> StoreConfig:
        """A state reader's config: the TTL the files recorded (off with reader.includeExpired)."""
        ttl = self._ttl or config.ttl
        if config.reader_include_expired:
            ttl = ttl.disabled()
        return replace(config, ttl=ttl)
