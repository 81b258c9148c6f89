"""The executor-kill benchmark (`python -m benchmarks executor_kill --quick`) on its own standalone
cluster, the checkpoint on the tier's HDFS: an executor is SIGKILLed inside the kill batch's
stateful stage, the batch completes on the executors left and the master's replacement, and no
row is lost or doubled. Numbers are not checked (the benchmark measures), only that they are
there and mean what they say."""

from __future__ import annotations

import pytest
from benchmarks.workloads import executor_kill
from integration.yarn import YarnHadoop

pytestmark = pytest.mark.cluster


def test_an_executor_killed_mid_batch_costs_a_slower_batch_and_no_row(hadoop: YarnHadoop) -> None:
    # ttlstate alone: the harness is the same for every provider (half this test's time)
    result = executor_kill.main(["--quick", "--providers", "ttlstate-budget-in-place-after-commit",
                                 "--checkpoint-fs", hadoop.fs_url, "--kill-after", "0.2"])
    (run,) = result["runs"]
    assert run["checkpoint"].startswith(hadoop.fs_url + "/benchmarks/"), run["checkpoint"]
    kill = run["phases"]["kill"]
    assert kill["kill_into_batch_ms"] > 0 and kill["kill_to_end_ms"] > 0, kill
    assert kill["load_ms"] is not None, kill  # the lost stores loaded again
    for phase in run["phases"].values():  # each batch split at its stateful stage (the event log)
        st = phase["stages"]
        assert sum(st[k] for k in ("before_stateful_ms", "stateful_stage_ms", "after_stateful_ms")) \
            == phase["batch_ms"], st
        assert st["last_stateful_attempt_ms"] <= st["stateful_stage_ms"] and st["stateful_tasks"] >= 4, st
    (summary,) = result["summary"]
    assert summary["state_rows_ok"], run["phases"]
    assert summary["kill_batch_ms"] == kill["batch_ms"]
    assert summary["kill_to_last_stateful_attempt_ms"] + summary["kill_last_stateful_attempt_ms"] \
        + summary["kill_after_stateful_ms"] == kill["kill_to_end_ms"], summary
    # ... and by its stateful tasks: every partition ran, busy and idle add up to the batch
    assert {t["partition"] for t in kill["tasks"]} == set(range(4)), kill["tasks"]
    busy, idle = summary["kill_stateful_busy_ms"], summary["kill_outside_stateful_tasks_ms"]
    assert busy + idle == kill["batch_ms"], summary
    if summary["kill_failed_task_attempts"]:  # a task lost with the executor: Spark saw it go
        assert any(c["change"] == "removed" for c in kill["executors"]), kill["executors"]
