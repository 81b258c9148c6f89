"""The cluster tier's input: one topic of JSON events that every scenario's query reads, cut into
the same micro-batches by `maxOffsetsPerTrigger` (tests/cluster/stream_job.py).

Each batch has new ids and ids seen before (a duplicate always carries the same key and value as
the first occurrence, so which copy `dropDuplicates` keeps does not matter), and the pause rows
of the scenarios that stop a batch midway (`__pause_<tag>__`, one per tag, in its batch).
`expected_totals` is what the per-key count must end at, computed here, so the reference run of
Spark's RocksDB provider is checked too.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

BATCHES = 4
ROWS_PER_BATCH = 6000
KEYS = 7
# The batch each fault scenario stops in: the application master killed (YARN cluster mode), a
# NodeManager stopped (YARN client mode), an executor killed and a worker decommissioned
# (standalone).
PAUSES = {"am": 2, "nm": 2, "exec": 1, "decom": 3}


def _event(i: int) -> dict[str, Any]:
    return {"id": i, "k": f"k{i % KEYS}", "v": i % 101}


def batches() -> list[list[dict[str, Any]]]:
    out = []
    for b in range(BATCHES):
        pauses = [{"id": -1 - n, "k": f"__pause_{tag}__", "v": 0}
                  for n, (tag, at) in enumerate(sorted(PAUSES.items())) if at == b]
        fresh = ROWS_PER_BATCH - len(pauses) - ROWS_PER_BATCH // 5
        start = b * ROWS_PER_BATCH
        rows = [_event(start + i) for i in range(fresh)]
        seen = start + fresh
        rows += [_event((start * 7 + i * 13) % seen) for i in range(ROWS_PER_BATCH // 5)]
        out.append(rows[: fresh // 2] + pauses + rows[fresh // 2:])
    return out


def expected_totals(data: list[list[dict[str, Any]]]) -> dict[str, tuple[int, int]]:
    """Per key: (distinct ids, sum of their values) over the whole input."""
    first: dict[int, dict[str, Any]] = {}
    for rows in data:
        for r in rows:
            first.setdefault(r["id"], r)
    totals: dict[str, tuple[int, int]] = {}
    for r in first.values():
        n, s = totals.get(r["k"], (0, 0))
        totals[r["k"]] = (n + 1, s + r["v"])
    return totals


def final_rows(outputs: dict[int, list[tuple[Any, ...]]]) -> dict[str, tuple[int, int]]:
    """The last (n, total) each key was written with, over the batches in order."""
    last: dict[str, tuple[int, int]] = {}
    for batch in sorted(outputs):
        for k, n, total in outputs[batch]:
            last[k] = (n, total)
    return last


@dataclass
class Input:
    """The input topic, its batches, and once computed the reference outputs (checks.py)."""

    topic: str
    batches: list[list[dict[str, Any]]]
    reference: dict[int, list[tuple[Any, ...]]] = field(default_factory=dict)
