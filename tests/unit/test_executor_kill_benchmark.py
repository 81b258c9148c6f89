"""The executor-kill benchmark's arithmetic: the recovery, the rows check, ratios per round."""

from __future__ import annotations

from typing import Any

import pyarrow.parquet as pq
import pytest
from benchmarks.workloads import executor_kill
from benchmarks.workloads.executor_kill_child import PHASES
from benchmarks.workloads.growth import VARIANTS, new_keys


def _run(variant: str, steady: int, kill: int, after: int, rows: list[int]) -> dict[str, Any]:
    times = dict(zip(PHASES, (steady, kill, after), strict=True))
    phases = {p: {"batch_ms": times[p], "state_rows": r, "load_ms": 7, "custom": {}}
              for p, r in zip(PHASES, rows, strict=True)}
    phases["kill"].update(kill_to_end_ms=kill - 300, kill_into_batch_ms=300)
    return {"variant": variant, "phases": phases, "batches": [{"batch_ms": 10}, {"batch_ms": 30}]}


def test_recovery_is_the_kill_and_after_batches_beyond_two_steady_ones_and_rows_must_grow() -> None:
    good = executor_kill.summarize_run(_run("rocksdb", 1000, 9000, 2000, [110, 120, 130]), 100, 10)
    assert good["recovery_ms"] == 9000  # 8000 in the kill batch, 1000 in the one after
    assert good["kill_to_end_ms"] == 8700
    assert good["median_grow_batch_ms"] == 20
    assert good["state_rows_ok"]
    lost = executor_kill.summarize_run(_run("rocksdb", 1000, 9000, 2000, [110, 115, 125]), 100, 10)
    assert not lost["state_rows_ok"]


def test_summary_takes_medians_over_rounds_and_pairs_each_round_with_rocksdb_s() -> None:
    variants = [VARIANTS["rocksdb"], VARIANTS["ttlstate-budget-in-place-after-commit"]]
    rows = [110, 120, 130]
    runs = [_run("rocksdb", 1000, 10000, 2000, rows), _run("rocksdb", 1000, 8000, 2000, rows),
            _run("rocksdb", 1000, 12000, 2000, rows),
            _run(variants[1].name, 500, 4000, 1000, rows), _run(variants[1].name, 500, 2000, 1000, rows),
            _run(variants[1].name, 500, 6000, 1000, [110, 120, 999])]
    ref, mine = executor_kill.summarize(variants, runs, 100, 10)
    assert ref["kill_batch_ms"] == 10000 and ref["kill_batch_ms_per_round"] == [10000, 8000, 12000]
    assert ref["recovery_ms_per_round"] == [10000, 8000, 12000]
    assert mine["ratio_to_rocksdb"]["recovery_ms"] == 0.4
    assert mine["kill_batch_ms"] == 4000
    assert mine["ratio_to_rocksdb"]["kill_batch_ms"] == 0.4
    assert mine["ratio_to_rocksdb_per_round"]["kill_batch_ms"] == [0.4, 0.25, 0.5]
    assert ref["state_rows_ok"] and not mine["state_rows_ok"]  # one round lost or doubled rows


def test_phase_inputs_hold_new_keys_after_the_growth_s_and_younger_files(tmp_path: object) -> None:
    directory = str(tmp_path)
    executor_kill.write_phase_inputs(directory, 40, 5, 1000.0)
    keys = [pq.read_table(f"{directory}/{p}.parquet")["key"].to_pylist() for p in PHASES]
    assert keys == [new_keys(40, 5), new_keys(45, 5), new_keys(50, 5)]


def test_cluster_confs_give_executors_the_variant_s_python_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONPATH", "/tree/python")
    args = executor_kill.parse_args(["--quick"])
    confs = executor_kill.cluster_confs(args, "spark://127.0.0.1:7077", VARIANTS["rocksdb"])
    assert confs["spark.master"] == "spark://127.0.0.1:7077"
    assert confs["spark.executorEnv.PYTHONPATH"] == "/tree/python"
    assert confs["spark.cores.max"] == "2" and confs["spark.executor.cores"] == "1"
    assert args.kill_keys == args.keys_per_batch == 20_000


def test_the_kill_batch_outside_its_stateful_tasks_and_against_spark_rocksdb_s_kill_batch() -> None:
    def with_tasks(run: dict[str, Any], spans: list[tuple[int, int, str]], added_at: int) -> dict[str, Any]:
        kill = run["phases"]["kill"]
        kill["stages"] = {"last_stateful_attempt_from_start_ms": 1000, "last_stateful_attempt_ms": 3000,
                          "after_stateful_ms": 100, "stateful_stage_attempts": 1}
        kill["tasks"] = [{"launched_ms": a, "task_ms": b, "ended": e, "partition": 0, "executor": "0"}
                         for a, b, e in spans]
        kill["executors"] = [{"executor": "0", "change": "removed", "at_ms": 400},
                             {"executor": "2", "change": "added", "at_ms": added_at}]
        return run
    variants = [VARIANTS["rocksdb"], VARIANTS["ttlstate-budget-in-place-after-commit"]]
    rows = [110, 120, 130]
    ref = with_tasks(_run("rocksdb", 1000, 10000, 2000, rows), [(1000, 2000, "Success")], 3300)
    mine = with_tasks(_run(variants[1].name, 500, 4000, 1000, rows),
                      [(1000, 1000, "ExecutorLostFailure"), (1500, 1000, "Success"), (3000, 500, "Success")],
                      2300)
    one = executor_kill.summarize_run(mine, 100, 10)
    assert one["kill_stateful_busy_ms"] == 1500 + 500  # 1000-2500 and 3000-3500
    assert one["kill_outside_stateful_tasks_ms"] == 4000 - 2000
    assert one["kill_failed_task_attempts"] == 1
    assert one["kill_to_replacement_executor_ms"] == 2300 - 300  # the kill came 300 ms in
    r, m = executor_kill.summarize(variants, [ref, mine], 100, 10)
    assert m["ratio_to_rocksdb"]["kill_outside_stateful_tasks_to_rocksdb_kill"] == 2000 / 10000
    assert m["ratio_to_rocksdb_per_round"]["kill_outside_stateful_tasks_to_rocksdb_kill"] == [0.2]
    assert m["ratio_to_rocksdb"]["kill_stateful_busy_ms"] == 2000 / 2000
