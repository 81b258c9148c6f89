"""The benchmark harness without Spark: conf names, inputs, summaries, ratios, plot, report,
the RSS poller's roles and the baseline environment (seconds, no JVM)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
from benchmarks.harness import report, variants
from benchmarks.harness.baseline import Baseline, environment
from benchmarks.harness.subproc import ChildFailed, RssPoller, parse_nmt_summary
from benchmarks.workloads import growth, read_ahead_lookups, restore_rerun, spark_side_by_side

from ttlstate.config import keys as K


def test_variant_conf_names_are_the_packages() -> None:
    assert variants.TTLSTATE == K.PROVIDER_CLASS
    assert variants.PROVIDER_KEY == K.PROVIDER_CLASS_KEY
    assert variants.TTL_KEY == K.TTL.key
    assert variants.SNAPSHOT_INTERVAL_KEY == K.SNAPSHOT_INTERVAL.key
    assert variants.KEY_FILTER_KEY == K.KEY_FILTER_MAX_KEYS.key
    assert variants.CACHE_KEY == K.CACHE_MAX_BYTES.key
    assert variants.SNAPSHOT_LAYOUT_KEY == K.SNAPSHOT_LAYOUT.key
    assert variants.READ_IN_PLACE_KEY == K.SNAPSHOT_READ_IN_PLACE.key
    assert variants.LOCAL_FILL_KEY == K.SNAPSHOT_LOCAL_FILL.key
    assert variants.MEMORY_KEY == K.MEMORY_MAX_BYTES.key
    assert variants.TRANSFORM_WITH_STATE_KEY == K.TRANSFORM_WITH_STATE.key


def test_restore_rerun_gives_a_restore_child_what_growth_gives_it() -> None:
    """restore_rerun builds its children's parameters with growth's helper: its command line
    must have every option that helper reads."""
    for name, v in growth.VARIANTS.items():
        rerun = growth._child_params(v, restore_rerun.parse_args(["kept"]), "restore", "in", "ck")
        grown = growth._child_params(v, growth.parse_args([]), "restore", "in", "ck")
        assert rerun.keys() == grown.keys(), name
        assert rerun["spark_confs"] == grown["spark_confs"], name


def test_new_keys_are_distinct_across_batches_and_deterministic() -> None:
    a, b = growth.new_keys(0, 5000), growth.new_keys(5000, 5000)
    assert len(set(a) | set(b)) == 10_000
    assert growth.new_keys(0, 5000) == a
    assert all(len(k) == 16 for k in a)
    assert a != sorted(a)  # spread over the key space, not in insertion order


def test_inputs_are_ordered_by_mtime_with_the_restore_file_last(tmp_path: object) -> None:
    files, restore = growth.write_inputs(str(tmp_path), 3, 100, 7)
    times = [os.path.getmtime(f) for f in [*files, restore]]
    assert times == sorted(times) and len(set(times)) == 4


def _run(variant: str, batch_ms: list[int], restore_ms: int, jvm_mb: float = 500.0) -> dict[str, object]:
    rows = [{"batch_ms": t, "commit_ms": t // 2, "snapshot_ms": 10, "state_rows": (i + 1) * 100,
             "checkpoint_bytes_written": 1000 * (i + 1)}
            for i, t in enumerate(batch_ms)]
    return {"variant": variant, "round": 0, "batches": rows, "jvm_peak_rss_mb": jvm_mb,
            "server_peak_rss_mb": 300.0, "total_peak_rss_mb": jvm_mb + 300, "jvm_peak_pss_mb": jvm_mb - 20,
            "server_peak_pss_mb": 200.0, "total_peak_pss_mb": jvm_mb + 180, "checkpoint_bytes": 10**6,
            "restore": {"batch_ms": restore_ms, "commit_ms": 5, "state_rows": 310, "load_ms": 7}}


def _fake_result() -> dict[str, object]:
    base = variants.Variant("ttlstate", variants.TTLSTATE)
    twin = base.at(Baseline("old", "abcdef0123", "/tree", "/py", {}))
    vs = [variants.Variant("rocksdb", variants.ROCKSDB), base, twin]
    runs = [_run("rocksdb", [900, 300, 400], 1000), _run("ttlstate", [800, 200, 300], 500),
            _run("ttlstate@abcdef0", [800, 400, 600], 2000)]
    summary = growth.summarize(vs, runs, expected_rows=310)
    return {"params": {"batches": 3, "keys_per_batch": 100, "partitions": 4, "master": "local[2]"},
            "started": "now", "variants": [v.describe() for v in vs], "runs": runs, "summary": summary}


def test_summary_ratios_targets_and_baseline() -> None:
    s = {row["variant"]: row for row in _fake_result()["summary"]}  # type: ignore[attr-defined]
    assert s["ttlstate"]["median_batch_ms"] == 300
    assert s["ttlstate"]["ratio_to_rocksdb"]["median_batch_ms"] == 0.75
    assert s["ttlstate"]["ratio_to_rocksdb"]["total_to_rocksdb_jvm_peak_rss"] == 1.6  # 800 / 500
    assert s["ttlstate"]["ratio_to_rocksdb"]["total_to_rocksdb_jvm_peak_pss"] == 1.417  # 680 / 480
    assert s["ttlstate"]["meets_target"] == {"median_batch_ms": True, "restore_ms": True}
    assert s["ttlstate"]["ratio_to_baseline"]["restore_ms"] == 0.25
    assert s["ttlstate"]["restore_state_rows_ok"] is True
    assert "ratio_to_baseline" not in s["rocksdb"]


def test_rounds_are_combined_by_median_and_listed() -> None:
    v = [variants.Variant("rocksdb", variants.ROCKSDB)]
    runs = [_run("rocksdb", [100, 200, 300], 1000), {**_run("rocksdb", [500, 600, 700], 3000), "round": 1},
            {**_run("rocksdb", [100, 100, 100], 2000), "round": 2}]
    s = growth.summarize(v, runs, expected_rows=310)[0]
    assert s["median_batch_ms"] == 200 and s["restore_ms"] == 2000
    assert s["median_batch_ms_per_round"] == [200, 600, 100]


def test_restore_repeats_are_listed_and_each_must_restore_every_row() -> None:
    v = [variants.Variant("rocksdb", variants.ROCKSDB)]
    repeats = [{"batch_ms": ms, "commit_ms": 5, "state_rows": 310, "load_ms": 7} for ms in (900, 700, 800)]
    runs = [{**_run("rocksdb", [100, 200, 300], 800), "restore_repeats": repeats},
            {**_run("rocksdb", [100, 200, 300], 600), "round": 1, "restore_repeats": repeats[:2]}]
    s = growth.summarize(v, runs, expected_rows=310)[0]
    assert s["restore_ms_repeats_per_round"] == [[900, 700, 800], [900, 700]]
    assert s["restore_ms"] == 700 and s["restore_state_rows_ok"]
    runs[1]["restore_repeats"] = [repeats[0], {**repeats[1], "state_rows": 300}]
    assert not growth.summarize(v, runs, expected_rows=310)[0]["restore_state_rows_ok"]


def test_a_longer_ttl_replaces_only_the_ttl_that_keeps_everything() -> None:
    args = growth.parse_args(["--ttl", "6h", "--providers", "rocksdb,ttlstate,ttlstate-churn"])
    picked = {v.name: growth._longer_ttl(v, args.ttl) for v in growth.pick(growth.VARIANTS, args.providers)}
    assert picked["ttlstate"].confs[variants.TTL_KEY] == "6h"
    assert picked["ttlstate-churn"].confs == growth.VARIANTS["ttlstate-churn"].confs
    assert picked["rocksdb"] == growth.VARIANTS["rocksdb"]


def test_jvm_breakdowns_are_kept_per_round_not_combined() -> None:
    v = [variants.Variant("rocksdb", variants.ROCKSDB)]
    runs = [{**_run("rocksdb", [100, 200, 300], 1000), "jvm_breakdown_mb": {"Java Heap": 300.0}},
            {**_run("rocksdb", [500, 600, 700], 3000), "round": 1, "jvm_breakdown_mb": {"Java Heap": 500.0}}]
    s = growth.summarize(v, runs, expected_rows=310)[0]
    assert s["jvm_breakdown_mb_per_round"] == [{"Java Heap": 300.0}, {"Java Heap": 500.0}]
    assert "jvm_breakdown_mb" not in s


NMT_SUMMARY = """12345:

Native Memory Tracking:

Total: reserved=2634752KB, committed=660172KB
-                 Java Heap (reserved=1048576KB, committed=306176KB)
                            (mmap: reserved=1048576KB, committed=306176KB)
-                 Metaspace (reserved=197323KB, committed=132555KB)
-                  Tracing (reserved=32KB, committed=32KB)
"""


def test_nmt_summary_in_mb_with_rss_minus_the_total() -> None:
    found = parse_nmt_summary(NMT_SUMMARY, rss=800 * 1024 * 1024)
    assert found == {"total": 644.7, "Java Heap": 299.0, "Metaspace": 129.4, "rss_minus_nmt": 155.3}
    assert parse_nmt_summary("Native memory tracking is not enabled", rss=1) is None


def test_ratios_per_round_pair_each_round_with_the_reference_round() -> None:
    vs = [variants.Variant("rocksdb", variants.ROCKSDB), variants.Variant("ttlstate", variants.TTLSTATE)]
    runs = [_run("rocksdb", [100, 200, 300], 1000, jvm_mb=400), _run("ttlstate", [50, 100, 150], 2000),
            {**_run("rocksdb", [500, 600, 700], 3000, jvm_mb=800), "round": 1},
            {**_run("ttlstate", [600, 600, 600], 3000), "round": 1}]
    per = growth.summarize(vs, runs, expected_rows=310)[1]["ratio_to_rocksdb_per_round"]
    assert per["median_batch_ms"] == [0.5, 1.0]
    assert per["restore_ms"] == [2.0, 1.0]
    assert per["total_to_rocksdb_jvm_peak_rss"] == [2.0, 1.0]  # (500 + 300) / 400, 800 / 800
    assert per["total_to_rocksdb_jvm_peak_pss"] == [round(680 / 380, 3), round(680 / 780, 3)]


def test_a_failed_hdfs_run_is_summarized_with_how_far_it_got(tmp_path: object) -> None:
    vs = [variants.Variant("rocksdb", variants.ROCKSDB), growth.VARIANTS["hdfs"]]
    partial = os.path.join(str(tmp_path), "batches.json")
    with open(partial, "w") as f:
        json.dump([{"batch_ms": t, "commit_ms": 1, "state_rows": n, "custom": {}}
                   for t, n in ((100, 500), (900, 1000))], f)
    failed = ChildFailed("... java.lang.OutOfMemoryError: Java heap space", None)
    hdfs_run = growth._failed_run(vs[1], 0, "ck", partial, failed)
    s = {r["variant"]: r for r in growth.summarize(vs, [_run("rocksdb", [100, 200], 1000), hdfs_run], 310)}
    assert s["hdfs"]["failed"] is True and s["hdfs"]["batches_completed"] == 2
    assert s["hdfs"]["final_state_rows"] == 1000 and s["hdfs"]["max_batch_ms"] == 900
    assert s["hdfs"]["why"] == "... java.lang.OutOfMemoryError: Java heap space"
    assert s["hdfs"]["ratio_to_rocksdb"]["median_batch_ms"] == 3.333  # 500 / 150
    assert s["hdfs"]["ratio_to_rocksdb"]["restore_ms"] is None
    assert "hdfs" in growth.MAY_FAIL and "ttlstate" not in growth.MAY_FAIL


def test_plot_and_report_render(tmp_path: object) -> None:
    from benchmarks.workloads.growth_plot import plot

    result = _fake_result()
    path = os.path.join(str(tmp_path), "growth.png")
    plot(result, path)
    assert os.path.getsize(path) > 10_000
    text = "\n".join(report.growth_section(result))
    assert "| ttlstate@abcdef0 |" in text and "0.75, 0.5" in text


def test_side_by_side_ratios_to_rocksdb_and_to_the_baseline_twin() -> None:
    rows: list[dict[str, object]] = [
        {"provider": p, "workload": "w", "rows_per_s": r}
        for p, r in (("rocksdb", 100.0), ("ttlstate-ttl-on", 150.0), ("ttlstate-ttl-on@abc1234", 50.0))]
    spark_side_by_side.add_ratios(rows)
    assert rows[1]["ratio_to_rocksdb"] == 1.5 and rows[1]["ratio_to_baseline"] == 3.0
    assert "ratio_to_baseline" not in rows[0] and "ratio_to_baseline" not in rows[2]


def test_side_by_side_rounds_are_combined_by_median() -> None:
    rows = [{"provider": "rocksdb", "workload": "w", "round": i, "seconds": s, "rows_per_s": 100 / s}
            for i, s in enumerate((1.0, 4.0, 2.0))]
    [row] = spark_side_by_side.combine_rounds(rows)
    assert row["seconds"] == 2.0 and row["rows_per_s"] == 50.0 and "round" not in row
    assert row["rows_per_s_per_round"] == [100.0, 25.0, 50.0]


def test_cold_uniform_preset_sizes_format_providers_and_quick() -> None:
    full = spark_side_by_side.parse_args(["--preset", "cold-uniform"])
    assert (full.rows, full.keys, full.batches, full.input) == (4_000_000, 4_000_000, 8, "parquet")
    assert full.providers == "hdfs,rocksdb,ttlstate-ttl-on"
    quick = spark_side_by_side.parse_args(["--preset", "cold-uniform", "--quick", "--providers", "rocksdb"])
    assert (quick.rows, quick.keys, quick.providers) == (80_000, 80_000, "rocksdb")
    plain = spark_side_by_side.parse_args(["--quick"])
    assert (plain.rows, plain.input) == (50_000, "json")
    assert plain.providers == ",".join(spark_side_by_side.VARIANTS)


def test_side_by_side_parquet_input_has_every_row_in_batch_order(tmp_path: object) -> None:
    import pyarrow.parquet as pq

    spark_side_by_side.write_input(str(tmp_path), 1000, 50, 4, fmt="parquet")
    files = sorted(os.listdir(str(tmp_path)))
    assert files == [f"part-{b:03d}.parquet" for b in range(4)]
    tables = [pq.read_table(os.path.join(str(tmp_path), f)) for f in files]
    assert [t.num_rows for t in tables] == [250] * 4
    keys = {k for t in tables for k in t.column("key").to_pylist()}
    assert 1 < len(keys) <= 50 and all(k.startswith("k") for k in keys)


@pytest.mark.parametrize("fmt", ["json", "parquet"])
def test_side_by_side_long_keys_are_integers(tmp_path: object, fmt: str) -> None:
    import pyarrow.json as pj
    import pyarrow.parquet as pq

    spark_side_by_side.write_input(str(tmp_path), 100, 10, 1, fmt=fmt, key_type="long")
    path = os.path.join(str(tmp_path), f"part-000.{fmt}")
    table = pq.read_table(path) if fmt == "parquet" else pj.read_json(path)
    assert str(table.schema.field("key").type) == "int64"
    assert 1 < len(set(table.column("key").to_pylist())) <= 10


def test_rss_poller_sees_a_server_process_behind_a_launcher() -> None:
    code = "import time; time.sleep(1.5)"  # exits by itself; bash waits for it
    proc = subprocess.Popen(["bash", "-c", f"'{sys.executable}' -c '{code}' ttlstate.server & wait"])
    poller = RssPoller(proc.pid, interval=0.05)
    poller.start()
    try:
        deadline = time.monotonic() + 10
        while poller.peak.server == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        peak = poller.stop()
        proc.wait(timeout=10)
    assert peak.server > 0 and peak.jvm == 0
    assert 0 < peak.server_pss <= peak.server


def test_baseline_environment_puts_the_old_tree_first(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONPATH", "/elsewhere")
    env = environment("/cache/ttlstate-abc", "/venv/bin/python")
    assert env["PYTHONPATH"].split(os.pathsep) == ["/cache/ttlstate-abc/python", "/elsewhere"]
    assert env["PYSPARK_PYTHON"] == "/venv/bin/python"


def test_a_baseline_variant_that_ran_the_current_code_is_refused() -> None:
    old = variants.Variant("ttlstate", variants.TTLSTATE).at(Baseline("r", "abc1234567", "/old", "/py", {}))
    old.check_code(["/old/python/ttlstate/__init__.py"], ["/old/python/ttlstate/_native.so"])
    with pytest.raises(RuntimeError, match="did not run only"):
        old.check_code(["/new/python/ttlstate/__init__.py"], ["/old/python/ttlstate/_native.so"])
    with pytest.raises(RuntimeError, match="did not run only"):
        old.check_code(["/old/python/ttlstate/__init__.py"], [])  # no server seen at all


def test_realtime_latency_summary_is_nearest_rank_in_ms() -> None:
    from benchmarks.workloads import realtime_latency

    s = realtime_latency.summarize([i * 1_000_000 for i in range(1, 101)])  # 1..100 ms
    assert s == {"n": 100, "p50_ms": 50.0, "p99_ms": 99.0, "max_ms": 100.0}
    assert realtime_latency.summarize([]) == {"n": 0}


def test_churn_input_keeps_each_key_for_three_batches(tmp_path: object) -> None:
    import pyarrow.parquet as pq
    from benchmarks.workloads import churn

    counts = churn.write_inputs(str(tmp_path), 5, 30)
    assert counts == [10, 20, 30, 30, 30]
    files = [os.path.join(str(tmp_path), f"part-{b:03d}.parquet") for b in range(5)]
    batches = [set(pq.read_table(f).column("key").to_pylist()) for f in files]
    assert all(len(keys) == n for keys, n in zip(batches, counts, strict=True))  # each key once per batch
    assert batches[0] < batches[1] < batches[2] and "c0-0" not in batches[3] and "c1-0" in batches[3]


def test_churn_stops_a_query_once_its_last_timers_had_a_batch() -> None:
    from types import SimpleNamespace

    from benchmarks.workloads.churn_child import last_timers_fired

    def p(batch: int, rows: int, second: float) -> SimpleNamespace:
        stamp = f"2026-11-29T10:00:{second:06.3f}Z"
        return SimpleNamespace(batchId=batch, numInputRows=rows, timestamp=stamp)

    data = [p(0, 10, 0.0), p(1, 20, 5.0)]
    assert not last_timers_fired(data, 40, 3000)  # a row not read yet
    assert not last_timers_fired(data, 30, 3000)  # no batch without data yet
    assert not last_timers_fired([*data, p(2, 0, 7.9)], 30, 3000)  # started before the last timers were due
    assert last_timers_fired([*data, p(2, 0, 7.9), p(3, 0, 8.0)], 30, 3000)


def test_churn_summary_bound_ratios_and_a_variant_that_did_not_finish(tmp_path: object) -> None:
    from benchmarks.workloads import churn
    from benchmarks.workloads.churn_plot import plot

    def run(name: str, finished: bool, rate: float, state: list[int]) -> dict[str, object]:
        batches = [{"batch_id": i, "input_rows": 30, "batch_ms": 1000, "state_rows": s, "rows_removed": 0}
                   for i, s in enumerate(state)]
        return {"variant": name, "round": 0, "all_rows_read": finished, "rows_per_s": rate,
                "batches": batches, "jvm_peak_rss_mb": 1.0, "server_peak_rss_mb": 0.0}

    runs = [run("ttlstate", True, 300.0, [10, 30, 40, 40]), run("tws-scala", True, 100.0, [10, 30, 50, 60]),
            run("apply-in-pandas", False, 1.0, [10])]
    names = ["ttlstate", "tws-scala", "apply-in-pandas"]
    summary = churn.summarize(runs, names, cohort=10, ttl_ms=1500, batches=4, deadline=60)
    rows = {r["variant"]: r for r in summary}
    assert rows["ttlstate"]["ratio_to_tws-scala"] == 3.0 and rows["ttlstate"]["max_state_rows"] == 40
    assert rows["ttlstate"]["ttl_bound_rows"] == 40  # 3 active cohorts + 1 ended within the TTL
    assert rows["apply-in-pandas"]["did_not_finish"] == "did not finish 4 batches in 60 s (1 done)"
    complete = {"batches": [{"input_rows": 30, "batch_ms": 500}, {"input_rows": 30, "batch_ms": 1500}]}
    churn.complete(complete, total_rows=60)
    assert complete["rows_per_s"] == 30.0 and complete["all_rows_read"] is True
    churn.complete(complete, total_rows=90)
    assert complete["all_rows_read"] is False
    assert churn.ttl_ms("3s") == 3000 and churn.ttl_ms("250ms") == 250
    with pytest.raises(SystemExit, match="--ttl '3'"):
        churn.ttl_ms("3")
    result = {"params": {"batches": 4, "rows_per_batch": 30, "ttl": "1500ms"}, "runs": runs,
              "summary": list(rows.values())}
    path = os.path.join(str(tmp_path), "churn.png")
    plot(result, path)
    assert os.path.getsize(path) > 10_000


def test_read_ahead_lookups_reads_back_every_key_of_its_grown_store(tmp_path: object) -> None:
    out = os.path.join(str(tmp_path), "r.json")
    rows = read_ahead_lookups.main(["--versions", "2", "--keys-per-version", "500", "--chunk", "50",
                                    "--requests", "4", "--rounds", "1", "--json", out])
    assert [(r["variant"], r["keys"], r["found"]) for r in rows] == [("ttlstate", 1000, 1.0)]
    assert float(rows[0]["server_cpu_us_per_key"]) >= 0 and json.load(open(out)) == rows  # type: ignore[arg-type]
