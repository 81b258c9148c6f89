"""What a run of tests/cluster/stream_job.py wrote, read back from its output topic.

The job's `foreachBatch` tags every record with its batch id and attempt. Kafka's sink is at
least once: a batch that fails after it wrote (an executor, a NodeManager or the application
master killed) is written again when the query recovers. So, as in tests/integration/pipeline.py,
`outputs()` asserts that every attempt of a batch wrote a subset of its last attempt's rows (a
retry never produced a different result) and returns the last attempt's rows per batch id,
which are compared record for record with another provider's.
"""

from __future__ import annotations

import json
from typing import Any

from integration.kafka_io import consume


def outputs(bootstrap: str, name: str) -> dict[int, list[tuple[Any, ...]]]:
    by_attempt: dict[tuple[int, int], list[tuple[Any, ...]]] = {}
    for _partition, _offset, value in consume(bootstrap, f"{name}-out"):
        rec = json.loads(value)
        by_attempt.setdefault((rec["batch"], rec["attempt"]), []).append(tuple(rec["row"].values()))
    last: dict[int, int] = {}
    for batch, attempt in by_attempt:
        last[batch] = max(attempt, last.get(batch, attempt))
    out = {b: sorted(set(by_attempt[(b, a)]), key=repr) for b, a in last.items()}
    for (batch, attempt), rows in by_attempt.items():
        extra = set(rows) - set(out[batch])
        assert not extra, f"{name}: batch {batch} attempt {attempt} wrote rows its last did not: {extra}"
    return out


def attempts(bootstrap: str, name: str) -> dict[int, int]:
    """How many attempts of each batch wrote to the output topic."""
    seen: dict[int, set[int]] = {}
    for _p, _o, value in consume(bootstrap, f"{name}-out"):
        rec = json.loads(value)
        seen.setdefault(rec["batch"], set()).add(rec["attempt"])
    return {b: len(a) for b, a in seen.items()}
