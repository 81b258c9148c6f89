"""A churn workload: sessions that are active for a while and then never come back.

Each batch starts `new_sessions` sessions; each session emits `events_per_batch` events in each
of the `active_batches` batches after it starts and is never seen again. Without TTL a store
keyed by session grows by `new_sessions` keys per batch forever; with TTL it levels off near
(sessions started per TTL) x (1 + active period).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

# The events' columns, as a Spark DDL schema (the file source's and the Kafka records' JSON).
EVENT_SCHEMA = "session STRING, event STRING, value INT"


@dataclass(frozen=True)
class ChurnWorkload:
    new_sessions: int = 200
    active_batches: int = 2
    events_per_batch: int = 2

    def events(self, batch: int) -> list[dict[str, object]]:
        first = max(0, batch - self.active_batches + 1)
        rows = []
        for start in range(first, batch + 1):
            for s in range(self.new_sessions):
                session = f"s{start:05d}-{s:05d}"
                for e in range(self.events_per_batch):
                    rows.append({"session": session, "event": f"{session}-{batch}-{e}",
                                 "value": e + 1})
        return rows

    def write_batch(self, directory: str, batch: int) -> int:
        """Write batch `batch` as one JSON-lines file; returns its row count."""
        os.makedirs(directory, exist_ok=True)
        rows = self.events(batch)
        tmp = os.path.join(directory, f".batch-{batch:05d}.json.tmp")
        with open(tmp, "w") as f:
            f.writelines(json.dumps(r) + "\n" for r in rows)
        os.replace(tmp, os.path.join(directory, f"batch-{batch:05d}.json"))
        return len(rows)
