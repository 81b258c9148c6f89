"""The restore batch's split at its stateful stage, from an event log shaped like Spark's."""

from __future__ import annotations

import json
import os

import pytest
from benchmarks.harness.checkpoint_fs import progress_start_ms
from benchmarks.harness.event_log import (
    batch_stages,
    busy_ms,
    executor_changes,
    read_events,
    session_confs,
    stage_attempts,
    stateful_tasks,
)


def _job(job: int, batch: int, stages: list[int]) -> dict:
    return {"Event": "SparkListenerJobStart", "Job ID": job, "Stage IDs": stages,
            "Properties": {"streaming.sql.batchId": str(batch)}}


def _stage(kind: str, stage: int, attempt: int, rdds: list[str], submitted: int, completed: int | None = None,
           failure: str | None = None) -> dict:
    info = {"Stage ID": stage, "Stage Attempt ID": attempt, "RDD Info": [{"Name": n} for n in rdds],
            "Submission Time": submitted}
    if completed is not None:
        info["Completion Time"] = completed
    if failure is not None:
        info["Failure Reason"] = failure
    return {"Event": f"SparkListenerStage{kind}", "Stage Info": info}


def _task(stage: int, launched: int, finished: int, attempt: int = 0, partition: int = 0, executor: str = "0",
          reason: str = "Success") -> dict:
    return {"Event": "SparkListenerTaskEnd", "Stage ID": stage, "Stage Attempt ID": attempt,
            "Task End Reason": {"Reason": reason},
            "Task Info": {"Launch Time": launched, "Finish Time": finished, "Index": partition,
                          "Executor ID": executor}}


STATEFUL = ["StateStoreRDD", "ShuffledRowRDD"]
SCAN = ["MapPartitionsRDD", "FileScanRDD"]
# batch 7 starts at 1000 and takes 4000 ms: its scan stage 3, then stateful stage 4, whose first
# attempt fails and whose second completes; batch 6's stateful stage 2 must not count
EVENTS = [
    _job(1, 6, [1, 2]), _stage("Submitted", 2, 0, STATEFUL, 100), _task(2, 110, 900),
    _stage("Completed", 2, 0, STATEFUL, 100, 950),
    _job(2, 7, [3]), _stage("Submitted", 3, 0, SCAN, 1500), _stage("Completed", 3, 0, SCAN, 1500, 2000),
    _job(3, 7, [3, 4]), _stage("Submitted", 4, 0, STATEFUL, 2100),
    _task(4, 2100, 2600, partition=1, executor="1", reason="ExecutorLostFailure"),
    {"Event": "SparkListenerExecutorRemoved", "Timestamp": 2650, "Executor ID": "1"},
    _stage("Completed", 4, 0, STATEFUL, 2100, 2700, failure="FetchFailed"),
    _stage("Submitted", 4, 1, STATEFUL, 2900), _task(4, 2900, 3400, 1, partition=0),
    {"Event": "SparkListenerExecutorAdded", "Timestamp": 3000, "Executor ID": "2"},
    _task(4, 2950, 4200, 1, partition=1, executor="2"),
    _stage("Completed", 4, 1, STATEFUL, 2900, 4300),
    {"Event": "SparkListenerExecutorAdded", "Timestamp": 6000, "Executor ID": "3"},
]


def test_the_batch_splits_at_its_stateful_stage_every_attempt_counted() -> None:
    split = batch_stages(EVENTS, 7, 1000, 4000)
    assert split == {"before_stateful_ms": 1100, "stateful_stage_ms": 2200, "after_stateful_ms": 700,
                     "stateful_stage_attempts": 2, "stateful_tasks": 3, "stateful_task_ms": 500 + 500 + 1250,
                     "last_stateful_attempt_from_start_ms": 1900, "last_stateful_attempt_ms": 1400}
    assert split["before_stateful_ms"] + split["stateful_stage_ms"] + split["after_stateful_ms"] == 4000


def test_every_stage_attempt_of_the_batch_in_submission_order() -> None:
    attempts = stage_attempts(EVENTS, 7)
    assert [(a["stage"], a["attempt"], a["stateful"], a["failed"], a["tasks"]) for a in attempts] == [
        (3, 0, False, False, 0), (4, 0, True, True, 1), (4, 1, True, False, 2)]
    assert attempts[2]["task_ms"] == 500 + 1250


def test_a_batch_without_a_completed_stateful_stage_is_an_error() -> None:
    with pytest.raises(ValueError, match="batch 8 has no completed stateful stage"):
        batch_stages(EVENTS, 8, 0, 1)
    failed_only = [e for e in EVENTS if (e.get("Stage Info") or {}).get("Stage Attempt ID") != 1]
    with pytest.raises(ValueError, match="batch 7"):
        batch_stages(failed_only, 7, 1000, 4000)


def test_a_progress_timestamp_is_the_event_logs_epoch_milliseconds() -> None:
    assert progress_start_ms({"timestamp": "1970-01-01T00:00:01.250Z"}) == 1250
    # int() of the float product gave 1796101813954
    assert progress_start_ms({"timestamp": "2026-12-01T05:10:13.955Z"}) == 1796101813955


def test_the_one_finished_log_is_read_and_an_unfinished_one_refused(tmp_path) -> None:
    confs = session_confs(str(tmp_path))
    assert confs["spark.eventLog.dir"] == "file://" + str(tmp_path)
    assert confs["spark.eventLog.rolling.enabled"] == confs["spark.eventLog.compress"] == "false"
    with open(os.path.join(tmp_path, "local-1.inprogress"), "w") as f:
        f.write(json.dumps(EVENTS[0]) + "\n")
    with pytest.raises(ValueError, match="expected one finished event log"):
        read_events(str(tmp_path))
    os.rename(os.path.join(tmp_path, "local-1.inprogress"), os.path.join(tmp_path, "local-1"))
    assert read_events(str(tmp_path)) == [EVENTS[0]]


def test_each_stateful_task_with_its_partition_executor_and_end_from_the_batch_s_start() -> None:
    tasks = stateful_tasks(EVENTS, 7, 1000)
    assert [(t["stage_attempt"], t["partition"], t["executor"], t["launched_ms"], t["task_ms"], t["ended"])
            for t in tasks] == [(0, 1, "1", 1100, 500, "ExecutorLostFailure"),
                                (1, 0, "0", 1900, 500, "Success"), (1, 1, "2", 1950, 1250, "Success")]
    assert stateful_tasks(EVENTS, 6, 0)[0]["launched_ms"] == 110  # another batch's own stage


def test_busy_is_the_union_of_the_tasks_spans() -> None:
    def span(start: int, ms: int) -> dict:
        return {"launched_ms": start, "task_ms": ms}
    assert busy_ms([]) == 0
    # 100-600 and 300-400 overlap (500), 700-900 apart (200), 850-1000 runs past it (100 more)
    assert busy_ms([span(700, 200), span(100, 500), span(300, 100), span(850, 150)]) == 800
    assert busy_ms(stateful_tasks(EVENTS, 7, 1000)) == 500 + 1300


def test_executor_changes_inside_the_window_from_its_start() -> None:
    assert executor_changes(EVENTS, 1000, 5000) == [
        {"executor": "1", "change": "removed", "at_ms": 1650},
        {"executor": "2", "change": "added", "at_ms": 2000}]
