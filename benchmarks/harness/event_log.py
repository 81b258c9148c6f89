"""Where one streaming batch's time went by stage, from Spark's event log.

A batch's progress reports its phases (addBatch, walCommit, ...), not its stages, so it cannot
say how much of a restore batch the stateful stage took at all. Outside that stage (the
query's start, offsets, planning, the stage that reads the input) the time is Spark's,
whichever provider serves the state: it bounds from below what any store can bring the batch
to, and the restore's target is judged against it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

STATEFUL_RDD = "StateStoreRDD"


def session_confs(directory: str) -> dict[str, str]:
    """Spark confs that write one plain (not rolled, not compressed) event log into directory,
    which must exist before the session starts."""
    return {"spark.eventLog.enabled": "true", "spark.eventLog.dir": "file://" + os.path.abspath(directory),
            "spark.eventLog.compress": "false", "spark.eventLog.rolling.enabled": "false"}


def read_events(directory: str) -> list[dict[str, Any]]:
    """The events of the one application that logged into directory."""
    logs = [n for n in os.listdir(directory) if not n.endswith(".inprogress")]
    if len(logs) != 1:
        found = sorted(os.listdir(directory))
        raise ValueError(f"expected one finished event log in {directory}, found {found}")
    with open(os.path.join(directory, logs[0])) as f:
        return [json.loads(line) for line in f if line.strip()]


def progress_epoch_ms(timestamp: str) -> int:
    """A progress's `timestamp` (ISO 8601 in UTC, millisecond precision) as epoch milliseconds,
    the event log's clock (both are the driver's wall clock)."""
    parsed = datetime.strptime(timestamp, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
    return round(parsed.timestamp() * 1000)


def _batch_stage_ids(events: Iterable[dict[str, Any]], batch_id: int) -> set[int]:
    ids: set[int] = set()
    for e in events:
        if e["Event"] == "SparkListenerJobStart" and \
                (e.get("Properties") or {}).get("streaming.sql.batchId") == str(batch_id):
            ids.update(e["Stage IDs"])
    return ids


def _stateful_stage_ids(events: Iterable[dict[str, Any]]) -> set[int]:
    return {e["Stage Info"]["Stage ID"] for e in events if e["Event"] == "SparkListenerStageSubmitted"
            and any(r.get("Name") == STATEFUL_RDD for r in e["Stage Info"].get("RDD Info", []))}


def batch_stages(events: list[dict[str, Any]], batch_id: int, batch_start_ms: int,
                 batch_ms: int) -> dict[str, Any]:
    """The batch split at its stateful stage: before it, the stage itself (every attempt, from
    the first submission to the last successful completion), after it; and the stateful tasks'
    summed time. A batch without a completed stateful stage is an error: the split would be
    meaningless."""
    stateful = _batch_stage_ids(events, batch_id) & _stateful_stage_ids(events)
    submitted: list[int] = []
    completed: list[int] = []
    tasks: list[dict[str, Any]] = []
    for e in events:
        kind = e["Event"]
        if kind == "SparkListenerTaskEnd" and e["Stage ID"] in stateful:
            tasks.append(e["Task Info"])
        info = e.get("Stage Info") or {}
        if info.get("Stage ID") not in stateful:
            continue
        if kind == "SparkListenerStageSubmitted":
            submitted.append(info["Submission Time"])
        elif kind == "SparkListenerStageCompleted" and "Failure Reason" not in info:
            completed.append(info["Completion Time"])
    if not submitted or not completed:
        raise ValueError(f"batch {batch_id} has no completed stateful stage in the event log")
    start, end = min(submitted), max(completed)
    return {"before_stateful_ms": start - batch_start_ms, "stateful_stage_ms": end - start,
            "after_stateful_ms": batch_start_ms + batch_ms - end, "stateful_stage_attempts": len(submitted),
            "stateful_tasks": len(tasks),
            "stateful_task_ms": sum(t["Finish Time"] - t["Launch Time"] for t in tasks)}
