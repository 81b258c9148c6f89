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

from tests.integration.pipeline import last_attempts


def outputs(bootstrap: str, name: str) -> dict[int, list[tuple[Any, ...]]]:
    return last_attempts([value for _p, _o, value in consume(bootstrap, f"{name}-out")], name)


def attempts(bootstrap: str, name: str) -> dict[int, int]:
    """How many attempts of each batch wrote to the output topic."""
    seen: dict[int, set[int]] = {}
    for _p, _o, value in consume(bootstrap, f"{name}-out"):
        rec = json.loads(value)
        seen.setdefault(rec["batch"], set()).add(rec["attempt"])
    return {b: len(a) for b, a in seen.items()}
