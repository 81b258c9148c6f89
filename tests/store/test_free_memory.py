"""The allocator is trimmed after batches end, off the caller's thread, only once the worker is
idle, and at most once per gap."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from ttlstate.engine.select import native_import_error, native_module
from ttlstate.store.planes import free_memory


@pytest.fixture
def trims(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    calls: list[str] = []

    def release() -> bool:
        calls.append(threading.current_thread().name)
        return True

    native = native_module()
    assert native is not None, native_import_error()
    monkeypatch.setattr(native, "release_free_memory", release)
    monkeypatch.setattr(free_memory, "MIN_GAP_S", 0.3)
    monkeypatch.setattr(free_memory, "QUIET_S", 0.1)
    free_memory.set_idle_probe(lambda: True)
    time.sleep(1.2)  # a trim another test asked for, with the real gap, is over
    calls.clear()
    yield calls
    free_memory.set_idle_probe(lambda: True)


def _wait_for(calls: list[str], n: int, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while len(calls) < n and time.monotonic() < deadline:
        time.sleep(0.01)


def test_a_batch_end_trims_on_the_trim_thread(trims: list[str]) -> None:
    free_memory.batch_ended()
    _wait_for(trims, 1)
    assert trims == ["ttlstate-trim"]


def test_no_trim_while_a_store_version_is_open(trims: list[str]) -> None:
    busy = {"now": True}
    free_memory.set_idle_probe(lambda: not busy["now"])
    free_memory.batch_ended()
    time.sleep(0.6)  # well past QUIET_S: still busy, so nothing
    assert trims == []
    busy["now"] = False
    _wait_for(trims, 1)
    assert trims == ["ttlstate-trim"]


def test_many_batch_ends_within_the_gap_cost_at_most_two_trims(trims: list[str]) -> None:
    for _ in range(200):
        free_memory.batch_ended()
    _wait_for(trims, 1)
    time.sleep(0.8)  # past the gap: the requests during it are served by one more trim
    assert 1 <= len(trims) <= 2
    settled = len(trims)
    time.sleep(0.6)
    assert len(trims) == settled  # nothing asked since: no more trims


def test_a_failing_idle_probe_counts_as_busy_and_the_trim_thread_lives_on(trims: list[str]) -> None:
    fails = {"now": True}

    def probe() -> bool:
        if fails["now"]:
            raise RuntimeError("WeakSet changed size during iteration")
        return True

    free_memory.set_idle_probe(probe)
    free_memory.batch_ended()
    time.sleep(0.6)
    assert trims == []
    fails["now"] = False
    _wait_for(trims, 1)
    assert trims == ["ttlstate-trim"]
