"""The HDFS path of the growth and side-by-side benchmarks (`--checkpoint-fs <hdfs:// URL>
--quick`): each keeps every checkpoint on the tier's HDFS (`--checkpoint-fs hdfs` would start a
MiniDFSCluster of its own, the same way the tier's is started) and counts the bytes each batch
wrote there. Numbers are not checked (the benchmarks measure), only that they are there."""

from __future__ import annotations

import pytest
from benchmarks.harness.checkpoint_fs import checkpoint_root
from benchmarks.workloads import growth, spark_side_by_side
from integration.components import MiniHdfs

pytestmark = pytest.mark.integration


def test_an_hdfs_url_gives_each_run_a_folder_of_its_own_there() -> None:
    with checkpoint_root("hdfs://127.0.0.1:9000/", "/tmp/ttlstate-growth-abc/") as root:
        assert root == "hdfs://127.0.0.1:9000/benchmarks/ttlstate-growth-abc"
    with pytest.raises(ValueError, match="hdfs:// URL"), checkpoint_root("s3a://bucket", "/tmp/x"):
        pass


def test_growth_on_hdfs_counts_checkpoint_bytes_per_batch(hdfs: MiniHdfs) -> None:
    # ttlstate alone (half this test's time): the per-batch byte accounting checked here is the
    # harness's, the same for every provider, and Spark's RocksDB provider on HDFS runs in
    # tests/integration/test_kafka_hdfs.py.
    # Two restores each: the second takes the first's batch back out of the checkpoint on HDFS.
    result = growth.main(["--quick", "--checkpoint-fs", hdfs.url, "--providers", "ttlstate",
                          "--restore-repeats", "2"])
    assert result["params"]["checkpoint_fs"] == hdfs.url
    for run in result["runs"]:
        assert [r["batch_id"] for r in run["restore_repeats"]] == [3, 3], run["restore_repeats"]
        for r in run["restore_repeats"]:  # each restore batch split at its stateful stage (the event log)
            st = r["stages"]
            parts = (st["before_stateful_ms"], st["stateful_stage_ms"], st["after_stateful_ms"])
            assert sum(parts) == r["batch_ms"] and parts[0] > 0 and parts[2] >= 0, st
            assert st["stateful_tasks"] > 0, st
        assert run["checkpoint"].startswith(hdfs.url + "/benchmarks/"), run["checkpoint"]
        assert len(run["batches"]) == 3
        assert all(b["checkpoint_bytes_written"] > 0 for b in run["batches"]), run["batches"]
        assert run["checkpoint_bytes"] > 0
    for s in result["summary"]:
        assert s["restore_state_rows_ok"], s
        assert s["checkpoint_bytes_written"] >= s["last_batch_checkpoint_bytes_written"] > 0


def test_side_by_side_on_hdfs_reports_commit_time_and_bytes_per_batch(hdfs: MiniHdfs) -> None:
    # ttlstate alone, as the growth test above.
    rows = spark_side_by_side.main(["--quick", "--checkpoint-fs", hdfs.url, "--providers", "ttlstate-ttl-on"])
    assert {(r["provider"], r["workload"]) for r in rows} == {
        ("ttlstate-ttl-on", w) for w in spark_side_by_side.WORKLOADS}
    for r in rows:
        assert r["rows"] == 50_000
        assert len(r["commit_ms_per_batch"]) == len(r["checkpoint_bytes_per_batch"]) == 5, r
        assert all(b > 0 for b in r["checkpoint_bytes_per_batch"]), r
