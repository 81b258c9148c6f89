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
from typing import Any

STATEFUL_RDD = "StateStoreRDD"


def session_confs(directory: str) -> dict[str, str]:
    """Spark confs that write one plain (not rolled, not compressed) event log into directory,
    which must exist before the session starts."""
    return {"spark.eventLog.enabled": "true", "spark.eventLog.dir": "file://" + os.path.abspath(directory),
            "spark.eventLog.compress": "false", "spark.eventLog.rolling.enabled": "false"}


def log_events(params: dict[str, Any], directory: str) -> None:
    """A child's `params` (its `spark_confs` and `events_dir`) made to log its events into
    directory, created here; the child reads them back after its session stops."""
    os.makedirs(directory)
    params["events_dir"] = directory
    params["spark_confs"].update(session_confs(directory))


def read_events(directory: str) -> list[dict[str, Any]]:
    """The events of the one application that logged into directory."""
    logs = [n for n in os.listdir(directory) if not n.endswith(".inprogress")]
    if len(logs) != 1:
        found = sorted(os.listdir(directory))
        raise ValueError(f"expected one finished event log in {directory}, found {found}")
    with open(os.path.join(directory, logs[0])) as f:
        return [json.loads(line) for line in f if line.strip()]


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


def stage_attempts(events: list[dict[str, Any]], batch_id: int) -> list[dict[str, Any]]:
    """Every stage attempt of the batch, in submission order: whether it is stateful, when it
    was submitted and completed, whether it failed, and its tasks' summed time."""
    stage_ids = _batch_stage_ids(events, batch_id)
    stateful = _stateful_stage_ids(events)
    attempts: dict[tuple[int, int], dict[str, Any]] = {}
    for e in events:
        kind = e["Event"]
        if kind == "SparkListenerTaskEnd" and e["Stage ID"] in stage_ids:
            a = attempts.get((e["Stage ID"], e["Stage Attempt ID"]))
            if a is not None:
                t = e["Task Info"]
                a["tasks"] += 1
                a["task_ms"] += t["Finish Time"] - t["Launch Time"]
        info = e.get("Stage Info") or {}
        if info.get("Stage ID") not in stage_ids:
            continue
        key = (info["Stage ID"], info["Stage Attempt ID"])
        if kind == "SparkListenerStageSubmitted":
            attempts[key] = {"stage": key[0], "attempt": key[1], "stateful": key[0] in stateful,
                             "submitted": info["Submission Time"], "completed": None, "failed": False,
                             "tasks": 0, "task_ms": 0}
        elif kind == "SparkListenerStageCompleted" and key in attempts:
            attempts[key].update(completed=info.get("Completion Time"), failed="Failure Reason" in info)
    return sorted(attempts.values(), key=lambda a: a["submitted"])


def batch_stages(events: list[dict[str, Any]], batch_id: int, batch_start_ms: int,
                 batch_ms: int) -> dict[str, Any]:
    """The batch split at its stateful stage: before it, the stage itself (every attempt, from
    the first submission to the last successful completion), after it; the stateful tasks'
    summed time; and the last successful attempt (after a lost executor, the one that ran the
    lost partitions again), from the batch's start. A batch without a completed stateful stage
    is an error: the split would be meaningless."""
    stateful = [a for a in stage_attempts(events, batch_id) if a["stateful"]]
    done = [a for a in stateful if a["completed"] is not None and not a["failed"]]
    if not done:
        raise ValueError(f"batch {batch_id} has no completed stateful stage in the event log")
    start, last = stateful[0]["submitted"], max(done, key=lambda a: a["completed"])
    return {"before_stateful_ms": start - batch_start_ms, "stateful_stage_ms": last["completed"] - start,
            "after_stateful_ms": batch_start_ms + batch_ms - last["completed"],
            "stateful_stage_attempts": len(stateful), "stateful_tasks": sum(a["tasks"] for a in stateful),
            "stateful_task_ms": sum(a["task_ms"] for a in stateful),
            "last_stateful_attempt_from_start_ms": last["submitted"] - batch_start_ms,
            "last_stateful_attempt_ms": last["completed"] - last["submitted"]}


def stateful_tasks(events: list[dict[str, Any]], batch_id: int, batch_start_ms: int) -> list[dict[str, Any]]:
    """Every task attempt of the batch's stateful stage (all its attempts), in launch order,
    from the batch's start: its partition, executor, launch, time and how it ended. After a lost
    executor this shows where the lost partitions ran again and when, which a stage's times
    cannot where the lost tasks re-ran inside the attempt already running."""
    stateful = _stateful_stage_ids(events) & _batch_stage_ids(events, batch_id)
    tasks = []
    for e in events:
        if e["Event"] != "SparkListenerTaskEnd" or e["Stage ID"] not in stateful:
            continue
        t = e["Task Info"]
        tasks.append({"stage": e["Stage ID"], "stage_attempt": e["Stage Attempt ID"], "partition": t["Index"],
                      "executor": t["Executor ID"], "launched_ms": t["Launch Time"] - batch_start_ms,
                      "task_ms": t["Finish Time"] - t["Launch Time"],
                      "ended": (e.get("Task End Reason") or {}).get("Reason", "Success")})
    return sorted(tasks, key=lambda t: t["launched_ms"])


def busy_ms(tasks: Iterable[dict[str, Any]]) -> int:
    """How long at least one of the tasks ran: the union of their spans."""
    total, reach = 0, None
    for t in sorted(tasks, key=lambda t: t["launched_ms"]):
        start, end = t["launched_ms"], t["launched_ms"] + t["task_ms"]
        if reach is None or start > reach:
            total, reach = total + end - start, end
        elif end > reach:
            total, reach = total + end - reach, end
    return total


def executor_changes(events: Iterable[dict[str, Any]], since_ms: int, until_ms: int) -> list[dict[str, Any]]:
    """Executors added and removed between two instants, from since_ms: after a kill, when Spark
    noticed the loss and when the replacement registered."""
    kinds = {"SparkListenerExecutorAdded": "added", "SparkListenerExecutorRemoved": "removed"}
    return [{"executor": e["Executor ID"], "change": kinds[e["Event"]], "at_ms": e["Timestamp"] - since_ms}
            for e in events if e["Event"] in kinds and since_ms <= e["Timestamp"] <= until_ms]
