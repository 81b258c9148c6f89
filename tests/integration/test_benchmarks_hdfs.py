"""The HDFS path of the growth and side-by-side benchmarks (`--checkpoint-fs hdfs --quick`): each
starts its own MiniDFSCluster, keeps every checkpoint on it, and counts the bytes each batch
wrote there. Numbers are not checked (the benchmarks measure), only that they are there."""

from __future__ import annotations

import pytest
from benchmarks.workloads import growth, spark_side_by_side

pytestmark = pytest.mark.integration


def test_growth_on_hdfs_counts_checkpoint_bytes_per_batch() -> None:
    result = growth.main(["--quick", "--checkpoint-fs", "hdfs", "--providers", "rocksdb,ttlstate"])
    assert result["params"]["checkpoint_fs"] == "hdfs"
    for run in result["runs"]:
        assert run["checkpoint"].startswith("hdfs://"), run["checkpoint"]
        assert len(run["batches"]) == 3
        assert all(b["checkpoint_bytes_written"] > 0 for b in run["batches"]), run["batches"]
        assert run["checkpoint_bytes"] > 0
    for s in result["summary"]:
        assert s["restore_state_rows_ok"], s
        assert s["checkpoint_bytes_written"] >= s["last_batch_checkpoint_bytes_written"] > 0


def test_side_by_side_on_hdfs_reports_commit_time_and_bytes_per_batch() -> None:
    # ttlstate alone: Spark's RocksDB provider on HDFS runs in the growth test above, and the
    # per-batch accounting checked here is the harness's, the same for every provider.
    rows = spark_side_by_side.main(["--quick", "--checkpoint-fs", "hdfs", "--providers", "ttlstate-ttl-on"])
    assert {(r["provider"], r["workload"]) for r in rows} == {
        ("ttlstate-ttl-on", w) for w in spark_side_by_side.WORKLOADS}
    for r in rows:
        assert r["rows"] == 50_000
        assert len(r["commit_ms_per_batch"]) == len(r["checkpoint_bytes_per_batch"]) == 5, r
        assert all(b > 0 for b in r["checkpoint_bytes_per_batch"]), r
