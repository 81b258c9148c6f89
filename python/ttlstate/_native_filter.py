"""One compaction filter instance driven entry by entry (native/src/compaction_filter.cpp), for
the filter's tests: its decisions, without a RocksDB compaction around it."""

from __future__ import annotations

from ctypes import byref, c_int

from ttlstate._native_handles import Handle, optional
from ttlstate._native_lib import Out, lib


class FilterHarness(Handle):
    """One filter instance (one compaction run) with its own holder, clock and counters."""

    __slots__ = ()
    _free = lib.ttl_harness_free

    def __init__(self) -> None:
        super().__init__(lib.ttl_harness_new())

    def configure(self, state_type: int, timestamp_offset: int, ttl: int, query_time_after_num_entries: int,
                  fixed_element_length: int = -1, variable_length_list: bool = False) -> bool:
        """One-shot: False if already configured (the new config is then discarded)."""
        configured = c_int()
        lib.ttl_harness_configure(self._h, state_type, timestamp_offset, ttl, query_time_after_num_entries,
                                  fixed_element_length, int(variable_length_list), byref(configured))
        return bool(configured.value)

    def new_run(self) -> None:
        """A new filter instance (a new compaction run), same config holder."""
        lib.ttl_harness_new_run(self._h)

    def set_time(self, now: int) -> None:
        lib.ttl_harness_set_time(self._h, now)

    def decide(self, value_type: int, value: bytes) -> tuple[int, bytes | None]:
        """(decision, new value or None) for one entry"""
        out, decision, changed = Out(), c_int(), c_int()
        lib.ttl_harness_decide(self._h, value_type, value, len(value), byref(decision), byref(changed),
                               *out.refs())
        return decision.value, optional(out, changed.value)

    @property
    def time_queries(self) -> int:
        return int(lib.ttl_harness_time_queries(self._h))
