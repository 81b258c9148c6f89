"""One variant of the executor-kill benchmark: the driver of a query on a standalone cluster
(started by `benchmarks.workloads.executor_kill`).

The growth query (`growth_child`: `dropDuplicates(key)`, one Parquet file per trigger) runs
`batches` batches on the cluster's two executors, then `settle_s` seconds so maintenance can
snapshot. Then three more files, one at a time, each a batch of the same query:

- `steady`: a batch like any other, the reference;
- `kill`: once the stateful stage's tasks run, and `kill_after_s` later, the executor JVM of
  the first worker is SIGKILLed (as a lost host). Its tasks fail, the master starts another
  executor, and the stores of the lost partitions load from the checkpoint wherever their
  tasks run again: this batch's time is the recovery;
- `after`: the batch after that, where the stores settle on the executors they now have.

With `events_dir` (Spark's event log goes there) each of the three batches is also split at its
stateful stage (`benchmarks.harness.event_log`), the kill batch's last stateful attempt (the one
that ran the lost partitions again) timed apart, and each batch's stateful tasks and executor
changes are kept (where each partition ran, when, and when the lost executor's replacement came).
"""

from __future__ import annotations

import os
import signal
import sys
import time
from typing import Any

from integration.standalone import executors_of

from benchmarks.harness.checkpoint_fs import CheckpointFiles, join, progress_start_ms
from benchmarks.harness.event_log import batch_stages, executor_changes, read_events, stateful_tasks
from benchmarks.harness.sparkjob import child_main, imported_ttlstate, progresses, session
from benchmarks.workloads.growth_child import _start, _wait_for_batches, batch_row

PHASES = ("steady", "kill", "after")


def _stateful_stage_running(spark: Any, partitions: int) -> bool:
    """Whether a stage of `partitions` tasks (the stateful one: the file source's has one task)
    has tasks running now."""
    tracker = spark.sparkContext.statusTracker()
    for stage in tracker.getActiveStageIds():
        info = tracker.getStageInfo(stage)
        if info is not None and info.numTasks == partitions and info.numActiveTasks > 0:
            return True
    return False


def _kill_when_stateful(spark: Any, params: dict[str, Any], deadline: float) -> dict[str, Any]:
    """SIGKILLs the first worker's executor once the stateful stage runs (and kill_after_s more)."""
    while not _stateful_stage_running(spark, int(params["partitions"])):
        if time.monotonic() > deadline:
            raise TimeoutError("the kill batch's stateful stage never ran")
        time.sleep(0.01)
    time.sleep(float(params["kill_after_s"]))
    victims = executors_of(int(params["victim_worker_pid"]))
    if len(victims) != 1:
        raise RuntimeError(f"the first worker runs {len(victims)} executors, expected 1")
    os.kill(victims[0].pid, signal.SIGKILL)
    return {"killed_pid": victims[0].pid, "killed_at": time.time()}


def _one_batch(spark: Any, query: Any, params: dict[str, Any], phase: str) -> dict[str, Any]:
    """Moves the phase's file into the input folder and waits for its batch (killing an
    executor in the `kill` phase). Data batches are counted, not batch ids: an idle query
    reports progress too."""
    done = len(progresses(query))
    name = f"{phase}.parquet"
    os.replace(os.path.join(params["staging_dir"], name), os.path.join(params["input_dir"], name))
    deadline = time.monotonic() + float(params["timeout_s"])
    killed = _kill_when_stateful(spark, params, deadline) if phase == "kill" else {}
    while len(progresses(query)) <= done:
        if query.exception() is not None:
            raise RuntimeError(f"the query failed in the {phase} batch: {query.exception()}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"the {phase} batch did not complete")
        time.sleep(0.2)
    return {"phase": phase, **killed}


def _since_kill(phase: dict[str, Any], progress: dict[str, Any]) -> dict[str, Any]:
    """For the kill batch: from the kill to the batch's end, and from its start to the kill."""
    if "killed_at" not in phase:
        return {}
    start_ms = progress_start_ms(progress)
    kill_ms = int(phase.pop("killed_at") * 1000)
    return {"kill_into_batch_ms": kill_ms - start_ms,
            "kill_to_end_ms": start_ms + int(progress["durationMs"]["triggerExecution"]) - kill_ms}


def run(params: dict[str, Any]) -> dict[str, Any]:
    spark = session("ttlstate-executor-kill", params["provider_class"], params["confs"],
                    bool(params["ttlstate"]), params["spark_confs"])
    try:
        files = CheckpointFiles(spark, join(params["checkpoint"], "state"))
        started = time.monotonic()
        query = _start(spark, params, available_now=False)
        timeout = float(params["timeout_s"])
        _wait_for_batches(query, int(params["batches"]), timeout, files)
        grow_wall_s = round(time.monotonic() - started, 3)
        time.sleep(float(params["settle_s"]))
        phases = [_one_batch(spark, query, params, phase) for phase in PHASES]
        executors = spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() - 1  # less the driver
        done = progresses(query)
        query.stop()
        if query.exception() is not None:
            raise RuntimeError(f"the query failed: {query.exception()}")
        grown, extra = done[:-len(PHASES)], done[-len(PHASES):]
        result = {"ttlstate_file": imported_ttlstate() if params["ttlstate"] else None,
                  "spark_jars": spark.conf.get("spark.jars", ""), "grow_wall_s": grow_wall_s,
                  "batches": [batch_row(p) for p in grown],
                  "phases": [{**phase, **batch_row(p), **_since_kill(phase, p)}
                             for phase, p in zip(phases, extra, strict=True)],
                  "executors_at_end": executors}
    finally:
        spark.stop()
    if params.get("events_dir"):  # the event log is whole once the session has stopped
        events = read_events(params["events_dir"])
        for phase, p in zip(result["phases"], extra, strict=True):
            start = progress_start_ms(p)
            phase["stages"] = batch_stages(events, phase["batch_id"], start, phase["batch_ms"])
            phase["tasks"] = stateful_tasks(events, phase["batch_id"], start)
            phase["executors"] = executor_changes(events, start, start + phase["batch_ms"])
    return result


if __name__ == "__main__":
    sys.exit(child_main(run))
