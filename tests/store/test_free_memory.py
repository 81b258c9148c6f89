"""The allocator is trimmed after batches end, off the caller's thread, at most once per gap."""

from __future__ import annotations

import threading
import time

import pytest

from ttlstate.store.planes import free_memory


@pytest.fixture
def trims(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    calls: list[str] = []

    def release() -> bool:
        calls.append(threading.current_thread().name)
        return True

    monkeypatch.setattr(free_memory._native, "release_free_memory", release)
    monkeypatch.setattr(free_memory, "MIN_GAP_S", 0.3)
    time.sleep(1.2)  # a trim another test asked for, with the real gap, is over
    calls.clear()
    return calls


def _wait_for(calls: list[str], n: int, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while len(calls) < n and time.monotonic() < deadline:
        time.sleep(0.01)


def test_a_batch_end_trims_on_the_trim_thread(trims: list[str]) -> None:
    free_memory.batch_ended()
    _wait_for(trims, 1)
    assert trims == ["ttlstate-trim"]


def test_many_batch_ends_within_the_gap_cost_at_most_two_trims(trims: list[str]) -> None:
    for _ in range(200):
        free_memory.batch_ended()
    _wait_for(trims, 1)
    time.sleep(0.5)  # past the gap: the requests during it are served by one more trim
    assert 1 <= len(trims) <= 2
    settled = len(trims)
    time.sleep(0.5)
    assert len(trims) == settled  # nothing asked since: no more trims

