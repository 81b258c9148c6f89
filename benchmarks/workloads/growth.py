"""Growth: state that grows batch after batch, each provider in its own fresh JVM, then a restore.

A `dropDuplicates(key)` is fed `--batches` Parquet files of `--keys-per-batch` brand-new keys,
one file per trigger (default 6 x 500k: the state grows to 3M keys; `--batches 12` reaches
6M), `local[2]`, `--partitions` shuffle partitions, state maintenance every 5 s. Each variant
runs in its own child process (fresh JVM, fresh state server); after its last batch the query
keeps running a few seconds (`--settle`) so maintenance can snapshot, then stops. A second
fresh child restarts the query on the same checkpoint and processes ONE small file of new
keys: its batch must first load the whole state from the checkpoint into an empty local
directory, so its duration is the restore time.

Variants: `rocksdb` (Spark's RocksDB provider, defaults), `rocksdb-changelog` (the same with
changelog checkpointing), `ttlstate` (TTL 1h, so nothing expires, `snapshotInterval` 2), and
with `--baseline REF` `ttlstate@<sha>`: the same ttlstate settings run by an older checkout in
the same invocation (see `benchmarks/harness/baseline.py`), because only same-run ratios mean
something on this machine. For state larger than memory: `ttlstate-budget` (each state server
worker's RocksDB memory held to 128 MiB), `ttlstate-churn` (the same with a TTL of 3 minutes
of batch time, so a long run's first keys expire and are cleaned up while new ones come)
and `hdfs` (Spark's HDFS-backed provider, every entry on the heap: where it fails, the run
records the batches it completed, the memory it reached and why it stopped, instead of failing
the benchmark).

`--checkpoint-fs hdfs` keeps the checkpoints on a real HDFS (a MiniDFSCluster in its own JVM,
two DataNodes, replication 2; `benchmarks/harness/checkpoint_fs.py`) instead of the local disk; the
input stays local.

Reported per batch: batch (triggerExecution) time, addBatch, the state operator's commit time
and state rows, ttlstate's store commit/snapshot times and round trips, Spark RocksDB's commit
latencies and snapshot upload time, the bytes the batch wrote to the checkpoint's state folder
(counted from its listings); the restore batch split at its stateful stage (Spark's event log:
`benchmarks/harness/event_log.py`); per variant: median batch time, restore time, peak RSS of the JVM
and of the state server, checkpoint bytes, bytes written per batch, ratios to `rocksdb` and to
the baseline.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import os
import shutil
import statistics
import tempfile
import time
from typing import Any

import numpy as np

from benchmarks.harness import checkpoint_fs, event_log
from benchmarks.harness.baseline import prepare
from benchmarks.harness.checkpoint_fs import checkpoint_root, join
from benchmarks.harness.machine import describe
from benchmarks.harness.subproc import ChildFailed, run_child
from benchmarks.harness.variants import (
    AFTER_COMMIT_KEY,
    CACHE_KEY,
    CHANGELOG_KEY,
    HDFS,
    KEY_FILTER_KEY,
    LOCAL_FILES_KEY,
    LOCAL_FILL_KEY,
    LOCAL_MAX_BYTES_KEY,
    MEMORY_KEY,
    READ_IN_PLACE_KEY,
    ROCKSDB,
    SNAPSHOT_INTERVAL_KEY,
    SNAPSHOT_LAYOUT_KEY,
    TTL_KEY,
    TTLSTATE,
    WORKERS_KEY,
    Variant,
    baseline_twin,
    pick,
    ratio,
    with_baseline,
)

VARIANTS: dict[str, Variant] = {
    "rocksdb": Variant("rocksdb", ROCKSDB),
    "rocksdb-changelog": Variant("rocksdb-changelog", ROCKSDB, {CHANGELOG_KEY: "true"}),
    "ttlstate": Variant("ttlstate", TTLSTATE, {TTL_KEY: "1h", SNAPSHOT_INTERVAL_KEY: "2"}),
    # the same with the default snapshotInterval (10): what fewer full snapshots save in bytes
    "ttlstate-snapshot10": Variant("ttlstate-snapshot10", TTLSTATE,
                                   {TTL_KEY: "1h", SNAPSHOT_INTERVAL_KEY: "10"}),
    # the same with record snapshots (the whole state per snapshot, rebuilt key by key on restore)
    "ttlstate-records": Variant("ttlstate-records", TTLSTATE,
                                {TTL_KEY: "1h", SNAPSHOT_INTERVAL_KEY: "2", SNAPSHOT_LAYOUT_KEY: "records"}),
    # the same restoring in place: the snapshot's SST files read where they lie in the checkpoint
    "ttlstate-in-place": Variant("ttlstate-in-place", TTLSTATE,
                                 {TTL_KEY: "1h", SNAPSHOT_INTERVAL_KEY: "2", READ_IN_PLACE_KEY: "true"}),
    # the same without the executor's cross-batch cache: what the cache's heap costs in memory
    "ttlstate-no-cache": Variant("ttlstate-no-cache", TTLSTATE,
                                 {TTL_KEY: "1h", SNAPSHOT_INTERVAL_KEY: "2", CACHE_KEY: "0"}),
    # the same with one state server worker (default: one per core): what a worker's interpreter
    # and its own RocksDB memory add, and what a second process buys the batches
    "ttlstate-one-worker": Variant("ttlstate-one-worker", TTLSTATE,
                                   {TTL_KEY: "1h", SNAPSHOT_INTERVAL_KEY: "2", WORKERS_KEY: "1"}),
    # the same without the shim's key filter: what rebuilding it after a restore costs
    "ttlstate-no-keyfilter": Variant("ttlstate-no-keyfilter", TTLSTATE,
                                     {TTL_KEY: "1h", SNAPSHOT_INTERVAL_KEY: "2", KEY_FILTER_KEY: "0"}),
    # the same with stores past keyFilter.maxKeys (1.25M keys each at 5M keys over 4 partitions),
    # as a 50M-key state's are with the default 10M: the shim keeps no filter of them
    "ttlstate-keyfilter-1m": Variant("ttlstate-keyfilter-1m", TTLSTATE,
                                     {TTL_KEY: "1h", SNAPSHOT_INTERVAL_KEY: "2", KEY_FILTER_KEY: "1000000"}),
    # State larger than memory: each state server worker's RocksDB memory (block cache and
    # memtables) held to 128 MiB; nothing expires (TTL 1h), as in Spark RocksDB's run
    "ttlstate-budget": Variant("ttlstate-budget", TTLSTATE, {TTL_KEY: "1h", MEMORY_KEY: "128m"}),
    # the same restoring in place (the snapshot's SST files read where they lie in the checkpoint)
    "ttlstate-budget-in-place": Variant("ttlstate-budget-in-place", TTLSTATE,
                                        {TTL_KEY: "1h", MEMORY_KEY: "128m", READ_IN_PLACE_KEY: "true"}),
    # the two, with the checkpoint reached only through Hadoop (checkpoint.localFiles off), as on
    # HDFS or S3: copying fetches each file through the shim, in place reads ranges through it
    "ttlstate-budget-hadoop": Variant("ttlstate-budget-hadoop", TTLSTATE,
                                      {TTL_KEY: "1h", MEMORY_KEY: "128m", LOCAL_FILES_KEY: "false"}),
    "ttlstate-budget-in-place-hadoop": Variant("ttlstate-budget-in-place-hadoop", TTLSTATE,
                                               {TTL_KEY: "1h", MEMORY_KEY: "128m", READ_IN_PLACE_KEY: "true",
                                                LOCAL_FILES_KEY: "false"}),
    # the budget's two restores with a snapshot of every version started as its commit returns
    # (snapshot.afterCommit, snapshotInterval 1), as Spark RocksDB uploads one with every commit:
    # a restore replays no changelog (or the few committed while the last snapshot was written)
    "ttlstate-budget-after-commit": Variant("ttlstate-budget-after-commit", TTLSTATE, {
        TTL_KEY: "1h", MEMORY_KEY: "128m", SNAPSHOT_INTERVAL_KEY: "1", AFTER_COMMIT_KEY: "true"}),
    "ttlstate-budget-in-place-after-commit": Variant("ttlstate-budget-in-place-after-commit", TTLSTATE, {
        TTL_KEY: "1h", MEMORY_KEY: "128m", SNAPSHOT_INTERVAL_KEY: "1", AFTER_COMMIT_KEY: "true",
        READ_IN_PLACE_KEY: "true"}),
    # the same without copying the files a restore opened in place to the local disk afterwards
    # (snapshot.localFill off): they stay read in place until compactions rewrite them
    "ttlstate-budget-in-place-after-commit-no-fill": Variant(
        "ttlstate-budget-in-place-after-commit-no-fill", TTLSTATE, {
        TTL_KEY: "1h", MEMORY_KEY: "128m", SNAPSHOT_INTERVAL_KEY: "1", AFTER_COMMIT_KEY: "true",
        READ_IN_PLACE_KEY: "true", LOCAL_FILL_KEY: "false"}),
    # the same with the local disk bounded to about a tenth of the state's SST bytes
    # (snapshot.localMaxBytes, per store): 3 MB of about 25 MB per store at 5M keys over 4
    # partitions, 25 MB of about 250 MB at 50M
    **{name: Variant(name, TTLSTATE, {
        TTL_KEY: "1h", MEMORY_KEY: "128m", SNAPSHOT_INTERVAL_KEY: "1", AFTER_COMMIT_KEY: "true",
        READ_IN_PLACE_KEY: "true", LOCAL_MAX_BYTES_KEY: bound})
       for bound in ("3m", "25m") for name in [f"ttlstate-budget-in-place-local-{bound}"]},
    # the same with TTL churn: keys expire 3 minutes (batch time) after they came, so a long run's
    # early keys are cleaned up (on read, by the compaction filter) while new ones keep coming
    "ttlstate-churn": Variant("ttlstate-churn", TTLSTATE, {TTL_KEY: "3m", MEMORY_KEY: "128m"}),
    # Spark's HDFS-backed provider: all state on the JVM's heap (expected to run out of it on
    # state larger than memory; its failure is reported, not raised: see MAY_FAIL)
    "hdfs": Variant("hdfs", HDFS),
}
# Variants whose grow step may fail without failing the benchmark: the run records how far it
# got, what it reached in memory and why it stopped. Any other variant's failure is an error.
MAY_FAIL = frozenset({"hdfs"})
REFERENCE = "rocksdb"
# Summary fields compared across variants (all "lower is better").
COMPARED = ("median_batch_ms", "restore_ms", "restore_load_ms", "median_commit_ms", "total_peak_rss_mb",
            "total_peak_pss_mb", "checkpoint_bytes", "checkpoint_bytes_written", "restore_stateful_stage_ms",
            "restore_outside_stateful_ms")
# The memory goal: a variant's JVM and state server together against the JVM of Spark's RocksDB
# provider (whose RocksDB lives inside its JVM) at the same heap setting, by RSS and by PSS.
MEMORY_RATIOS = {"total_to_rocksdb_jvm_peak_rss": ("total_peak_rss_mb", "jvm_peak_rss_mb"),
                 "total_to_rocksdb_jvm_peak_pss": ("total_peak_pss_mb", "jvm_peak_pss_mb")}
# A variant's field against another field of Spark RocksDB's: the memory goal above, and the
# least share of Spark RocksDB's restore this variant's could reach were its stateful stage free.
CROSS_RATIOS = {**MEMORY_RATIOS,
                "restore_outside_stateful_to_rocksdb_restore": ("restore_outside_stateful_ms", "restore_ms")}
# (Spark's HDFS provider reports neither.)
SNAPSHOT_METRIC = {"ttlstate": "storeSnapshotTimeMs", "rocksdb": "rocksdbSaveZipFilesLatencyMs", "hdfs": None}
REPLAY_METRIC = "rocksdbNumReplayChangelogFiles"
# What the restore batch spent loading state, summed over partitions: each provider's load
# latency, by the same name (ttlstate's includes filling the shim's key filter).
LOAD_METRIC = {"ttlstate": "rocksdbLoadLatencyMs", "rocksdb": "rocksdbLoadLatencyMs", "hdfs": None}


# ---- input: generated once, outside every timing ----

def new_keys(start: int, count: int) -> list[str]:
    """Keys start..start+count-1 through splitmix64's finalizer (a bijection, so every key is
    new), as 16 hex digits: spread over the key space like real ids, not in insertion order."""
    with np.errstate(over="ignore"):
        z = np.arange(start, start + count, dtype=np.uint64) + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    return [f"{v:016x}" for v in z.tolist()]


def write_keys(path: str, keys: list[str], mtime: float) -> None:
    """One Parquet file; the mtime fixes the file source's order (oldest first)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"key": pa.array(keys, pa.string())}), path)
    os.utime(path, (mtime, mtime))


def write_inputs(directory: str, batches: int, per_batch: int, restore_keys: int) -> tuple[list[str], str]:
    """The growth files and the restore file (keys after all the others)."""
    os.makedirs(directory, exist_ok=True)
    base = time.time() - 3600
    files = []
    for b in range(batches):
        path = os.path.join(directory, f"part-{b:04d}.parquet")
        write_keys(path, new_keys(b * per_batch, per_batch), base + b)
        files.append(path)
    restore = os.path.join(directory, "restore.parquet")
    write_keys(restore, new_keys(batches * per_batch, restore_keys), base + batches + 60)
    return files, restore


def _place(src: str, directory: str) -> None:
    """A hard link (same inode, same mtime, no copy) or, across file systems, a copy."""
    dst = os.path.join(directory, os.path.basename(src))
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def dir_bytes(path: str) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.path.getsize(os.path.join(root, name))
            except OSError:
                pass
    return total


# ---- one variant: grow in one JVM, restore in another ----

def _child_params(v: Variant, args: argparse.Namespace, mode: str, input_dir: str, ck: str) -> dict[str, Any]:
    return {"mode": mode, "provider_class": v.provider_class, "confs": dict(v.confs),
            "ttlstate": v.is_ttlstate, "input_dir": input_dir, "checkpoint": ck,
            "batches": args.batches, "settle_s": args.settle, "timeout_s": args.timeout,
            "spark_confs": {"spark.sql.shuffle.partitions": str(args.partitions),
                            "spark.sql.streaming.stateStore.maintenanceInterval": args.maintenance_interval,
                            "spark.sql.streaming.numRecentProgressUpdates": "1000",
                            **_heap_confs(args)}}


def _heap_confs(args: argparse.Namespace) -> dict[str, str]:
    """The driver JVM's heap: --driver-memory, and with --fixed-heap all of it committed and
    touched at start (-Xms = -Xmx): its RSS is then the heap setting plus what lives outside
    the heap, whatever G1 would otherwise have sized the heap to for this run's allocation
    rate. (Not JAVA_TOOL_OPTIONS: spark-submit's launcher is a JVM too, with a smaller heap.)"""
    confs = {"spark.driver.memory": args.driver_memory}
    if args.fixed_heap:
        confs["spark.driver.extraJavaOptions"] = f"-Xms{args.driver_memory} -XX:+AlwaysPreTouch"
    return confs


def _kind(v: Variant) -> str:
    return "ttlstate" if v.is_ttlstate else "hdfs" if v.provider_class == HDFS else "rocksdb"


def _normalized(rows: list[dict[str, Any]], v: Variant) -> list[dict[str, Any]]:
    """Adds `snapshot_ms`: ttlstate's snapshot time reported at this commit (snapshots are
    written by maintenance between batches), or Spark RocksDB's snapshot upload time (in its
    commit; with changelog checkpointing uploads run in maintenance and are not reported), and
    `load_ms` (see LOAD_METRIC)."""
    snapshot, load = SNAPSHOT_METRIC[_kind(v)], LOAD_METRIC[_kind(v)]
    return [{**r, "snapshot_ms": r["custom"].get(snapshot), "load_ms": r["custom"].get(load)} for r in rows]


def _shim_jars(child_result: dict[str, Any]) -> list[str]:
    """The ttlstate jars on the child's spark.jars (which shim its JVM loaded)."""
    return [j for j in str(child_result.get("spark_jars", "")).split(",") if "ttlstate" in j]


def run_variant(v: Variant, args: argparse.Namespace, files: list[str], restore_file: str,
                work: str, round_no: int, ck_root: str) -> dict[str, Any]:
    """Grow, then restore, each in a fresh child process; per-batch rows, RSS, checkpoint bytes.
    The checkpoint goes under ck_root (`work` or an hdfs:// URL)."""
    here = os.path.join(work, f"{v.name.replace('@', '-at-')}-r{round_no}")
    input_dir, ck = os.path.join(here, "input"), join(ck_root, os.path.basename(here), "ck")
    os.makedirs(input_dir)
    for f in files:
        _place(f, input_dir)
    print(f"growth: {v.name} (round {round_no}): {len(files)} batches", flush=True)
    partial = os.path.join(work, "logs", f"{os.path.basename(here)}-grow-batches.json")
    try:
        params = {**_child_params(v, args, "grow", input_dir, ck), "partial_path": partial}
        grown, grow_rss = run_child("benchmarks.workloads.growth_child", params, v.env(),
                                    os.path.join(work, "logs", f"{os.path.basename(here)}-grow.log"),
                                    args.timeout, jvm_breakdown_every=args.jvm_breakdown)
    except ChildFailed as e:
        if v.name not in MAY_FAIL:
            raise
        return _failed_run(v, round_no, ck, partial, e)
    # on local disk with Hadoop's .crc files, as before; elsewhere as the child listed it
    ck_bytes = dir_bytes(os.path.join(ck, "state")) if ck_root == work else grown["checkpoint_state_bytes"]
    _place(restore_file, input_dir)
    restores = []
    for repeat in range(args.restore_repeats):  # each after taking the one before back out
        params = _child_params(v, args, "restore", input_dir, ck)
        events = os.path.join(work, "events", f"{os.path.basename(here)}-restore{repeat}")
        event_log.log_events(params, events)
        if restores:
            params["rewind_batch"] = restores[-1]["batch_id"]
        restored, restore_rss = run_child(
            "benchmarks.workloads.growth_child", params, v.env(),
            os.path.join(work, "logs", f"{os.path.basename(here)}-restore{repeat or ''}.log"), args.timeout)
        restores.append({**_normalized([restored["batch"]], v)[0], "query_wall_s": restored["query_wall_s"],
                         "ttlstate_file": restored["ttlstate_file"], "shim_jars": _shim_jars(restored),
                         **restore_rss.as_dict()})
    # the repeat of the median restore batch (the upper one of an even count) stands for them
    median = sorted(restores, key=lambda r: r["batch_ms"])[len(restores) // 2]
    run = {"variant": v.name, "round": round_no, "checkpoint": ck, "ttlstate_file": grown["ttlstate_file"],
           "shim_jars": _shim_jars(grown) + [j for r in restores for j in r.pop("shim_jars")],
           "grow_wall_s": grown["grow_wall_s"], "batches": _normalized(grown["batches"], v),
           "checkpoint_bytes": ck_bytes, **grow_rss.as_dict(), "restore": median,
           **({"restore_repeats": restores} if len(restores) > 1 else {})}
    if not args.keep:
        shutil.rmtree(here, ignore_errors=True)
    _print_run(run)
    return run


def _failed_run(v: Variant, round_no: int, ck: str, partial: str, e: ChildFailed) -> dict[str, Any]:
    """A grow step that failed (a MAY_FAIL variant): the batches it completed, the memory it
    reached, and the end of its log (why it stopped)."""
    batches = []
    if os.path.exists(partial):
        with open(partial) as f:
            batches = _normalized(json.load(f), v)
    run = {"variant": v.name, "round": round_no, "checkpoint": ck, "failed": str(e)[-3000:],
           "batches": batches, "ttlstate_file": None, "shim_jars": [],
           **(e.peak.as_dict() if e.peak is not None else {})}
    last = batches[-1]["state_rows"] if batches else 0
    print(f"growth: {v.name} (round {round_no}) failed after {len(batches)} batches at {last} state rows; "
          f"peak RSS {run.get('jvm_peak_rss_mb')} MB:\n{str(e)[-1500:]}", flush=True)
    return run


def _print_run(run: dict[str, Any]) -> None:
    for r in run["batches"]:
        print(f"  batch {r['batch_id']}: {r['batch_ms']} ms, commit {r['commit_ms']} ms, "
              f"snapshot {r['snapshot_ms']} ms, state rows {r['state_rows']}, wrote "
              f"{r['checkpoint_bytes_written'] / 1e6:.1f} MB to the checkpoint", flush=True)
    rs = run["restore"]
    if "restore_repeats" in run:
        print(f"  restores: {', '.join(str(r['batch_ms']) for r in run['restore_repeats'])} ms", flush=True)
    st = rs.get("stages")  # a baseline tree's child may not split it
    if st is not None:
        print(f"  restore's stages: {st['before_stateful_ms']} ms before the stateful stage, "
              f"{st['stateful_stage_ms']} ms in it ({st['stateful_tasks']} tasks, "
              f"{st['stateful_task_ms']} ms summed), {st['after_stateful_ms']} ms after it", flush=True)
    print(f"  restore: {rs['batch_ms']} ms (state rows {rs['state_rows']}, changelogs replayed "
          f"{_replayed(rs)}); peak RSS JVM "
          f"{run['jvm_peak_rss_mb']} MB, server {run['server_peak_rss_mb']} MB (PSS "
          f"{run.get('jvm_peak_pss_mb')} MB, {run.get('server_peak_pss_mb')} MB); checkpoint "
          f"{run['checkpoint_bytes'] / 1e6:.1f} MB", flush=True)


# ---- summary ----

def _replayed(restore: dict[str, Any]) -> int | None:
    """Changelogs the restore batch's loads replayed, summed over partitions (both providers
    report Spark's rocksdbNumReplayChangelogFiles; ttlstate from 2026-11-27)."""
    return (restore.get("custom") or {}).get(REPLAY_METRIC)


def _in_place(restore: dict[str, Any]) -> dict[str, Any]:
    """What the restore batch read in place (snapshot.readInPlace): SST files opened where they
    lie, and the range reads of them through the shim (HDFS, S3), with their bytes; {} for a
    provider that reports none."""
    custom = restore.get("custom") or {}
    names = {"restore_sst_files_in_place": "sstFilesReadInPlace", "restore_range_reads": "inPlaceRangeReads",
             "restore_range_read_bytes": "inPlaceRangeReadBytes"}
    return {k: custom[m] for k, m in names.items() if m in custom}


def _local_disk(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """A store reading in place (snapshot.readInPlace), over the growing batches: the local
    disk's share of the SST reads RocksDB's block cache missed (the cache hit rate of
    snapshot.localMaxBytes), the checkpoint's reads per batch (median) and the bytes evicted;
    {} for a provider that reports none."""
    customs = [r.get("custom") or {} for r in rows]
    if not any("inPlaceLocalReads" in c for c in customs):
        return {}
    local = sum(int(c.get("inPlaceLocalReads", 0)) for c in customs)
    remote = sum(int(c.get("inPlaceRangeReads", 0)) for c in customs)
    return {"local_disk_hit_rate": round(local / (local + remote), 4) if local + remote else None,
            "median_checkpoint_reads_per_batch": _median([c.get("inPlaceRangeReads", 0) for c in customs]),
            "median_checkpoint_read_bytes_per_batch": _median([c.get("inPlaceRangeReadBytes", 0)
                                                               for c in customs]),
            "local_sst_bytes_evicted": sum(int(c.get("localSstBytesEvicted", 0)) for c in customs)}


def _median(values: list[Any]) -> float | None:
    nums = [float(x) for x in values if isinstance(x, (int, float))]
    return round(statistics.median(nums), 1) if nums else None


def _written(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Bytes written to the checkpoint: in all, per batch (median), by the last batch (None for
    results of a harness that did not count them)."""
    per = [r.get("checkpoint_bytes_written") for r in rows]
    return {"checkpoint_bytes_written": None if None in per else sum(per),
            "median_checkpoint_bytes_written_per_batch": _median(per),
            "last_batch_checkpoint_bytes_written": per[-1]}


def summarize_failed_run(run: dict[str, Any]) -> dict[str, Any]:
    """How far a failed run got: batches, state rows, its peaks (nothing to compare)."""
    rows = run["batches"]
    return {"failed": True, "batches_completed": len(rows),
            "final_state_rows": rows[-1]["state_rows"] if rows else 0,
            "median_batch_ms": _median([r["batch_ms"] for r in rows]),
            "max_batch_ms": max((r["batch_ms"] for r in rows), default=None),
            "jvm_peak_rss_mb": run.get("jvm_peak_rss_mb"), "jvm_peak_pss_mb": run.get("jvm_peak_pss_mb"),
            "why": _why(run["failed"])}


def _restore_stages(restore: dict[str, Any]) -> dict[str, Any]:
    """The restore batch split at its stateful stage (runs before 2026-12-01 have no split):
    the part outside that stage is Spark's, whatever the provider, so half of Spark RocksDB's
    restore is out of any store's reach when that part alone takes longer."""
    stages = restore.get("stages")
    if stages is None:
        return {}
    return {"restore_before_stateful_ms": stages["before_stateful_ms"],
            "restore_stateful_stage_ms": stages["stateful_stage_ms"],
            "restore_outside_stateful_ms": stages["before_stateful_ms"] + stages["after_stateful_ms"],
            "restore_stateful_task_ms": stages["stateful_task_ms"]}


def _why(failure: str) -> str:
    """The lines of a failed child's log that name errors (the cause), else its last lines."""
    named = [line.strip()[:400] for line in failure.splitlines()
             if any(w in line for w in ("Error", "Exception", "exited", "timed out"))]
    return "\n".join(named[-6:]) if named else failure[-600:]


def summarize_run(run: dict[str, Any], expected_rows: int) -> dict[str, Any]:
    """The scalars of one variant's run."""
    if "failed" in run:
        return summarize_failed_run(run)
    rows, rs = run["batches"], run["restore"]
    restores = run.get("restore_repeats", [rs])
    return {"median_batch_ms": _median([r["batch_ms"] for r in rows]),
            "first_batch_ms": rows[0]["batch_ms"], "max_batch_ms": max(r["batch_ms"] for r in rows),
            "median_commit_ms": _median([r["commit_ms"] for r in rows]),
            "snapshot_ms_total": sum(int(r["snapshot_ms"] or 0) for r in rows),
            "restore_ms": rs["batch_ms"], "restore_load_ms": rs["load_ms"],
            "restore_commit_ms": rs["commit_ms"], "restore_replayed_changelogs": _replayed(rs),
            **_restore_stages(rs),
            **_in_place(rs),
            "restore_state_rows_ok": all(r["state_rows"] == expected_rows for r in restores),
            **({"restore_ms_repeats": [r["batch_ms"] for r in restores]} if len(restores) > 1 else {}),
            "jvm_peak_rss_mb": run["jvm_peak_rss_mb"], "server_peak_rss_mb": run["server_peak_rss_mb"],
            "total_peak_rss_mb": run["total_peak_rss_mb"],
            "jvm_peak_pss_mb": run.get("jvm_peak_pss_mb"),
            "server_peak_pss_mb": run.get("server_peak_pss_mb"),
            "total_peak_pss_mb": run.get("total_peak_pss_mb"), "checkpoint_bytes": run["checkpoint_bytes"],
            **_written(rows), **_local_disk(rows),
            "final_state_rows": rows[-1]["state_rows"], "loadavg_1m_mean": run.get("loadavg_1m_mean"),
            **({"jvm_breakdown_mb": run["jvm_breakdown_mb"]} if "jvm_breakdown_mb" in run else {})}


def _combine_rounds(per_round: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians over rounds; with several rounds also every round's median batch and restore."""
    if len(per_round) == 1:
        return per_round[0]
    out: dict[str, Any] = {}
    for key, first in per_round[0].items():
        values = [s.get(key) for s in per_round]
        if isinstance(first, dict | list):  # a breakdown or repeats: no median of its own, every round's
            out[f"{key}_per_round"] = values
        else:
            out[key] = all(values) if isinstance(first, bool) else _median(values)
    out["median_batch_ms_per_round"] = [s["median_batch_ms"] for s in per_round]
    out["restore_ms_per_round"] = [s.get("restore_ms") for s in per_round]
    out["restore_replayed_changelogs_per_round"] = [s.get("restore_replayed_changelogs") for s in per_round]
    return out


def summarize(variants: list[Variant], runs: list[dict[str, Any]],
              expected_rows: int) -> list[dict[str, Any]]:
    """One summary row per variant, with ratios to Spark's RocksDB provider and to the baseline
    (this variant's value / the other's: below 1 is better for every compared field)."""
    rounds = {v.name: [summarize_run(r, expected_rows) for r in runs if r["variant"] == v.name]
              for v in variants}
    rows = {v.name: {"variant": v.name, **_combine_rounds(rounds[v.name])} for v in variants}
    ref = rows.get(REFERENCE)
    for v in variants:
        s = rows[v.name]
        if ref is not None and v.name != REFERENCE:
            s["ratio_to_rocksdb"] = {k: ratio(s.get(k), ref.get(k)) for k in COMPARED}
            for name, (mine, theirs) in CROSS_RATIOS.items():
                s["ratio_to_rocksdb"][name] = ratio(s.get(mine), ref.get(theirs))
            if len(rounds[v.name]) > 1 and len(rounds[v.name]) == len(rounds[REFERENCE]):
                pairs = list(zip(rounds[v.name], rounds[REFERENCE], strict=True))
                per = {k: [ratio(a.get(k), b.get(k)) for a, b in pairs] for k in COMPARED}
                for name, (mine, theirs) in CROSS_RATIOS.items():
                    per[name] = [ratio(a.get(mine), b.get(theirs)) for a, b in pairs]
                s["ratio_to_rocksdb_per_round"] = per
        if v.is_ttlstate and ref is not None:
            s["meets_target"] = {k: s[k] is not None and ref[k] is not None and s[k] <= ref[k]
                                 for k in ("median_batch_ms", "restore_ms")}
        twin = baseline_twin(v, variants)
        if twin is not None:
            s["ratio_to_baseline"] = {k: ratio(s.get(k), rows[twin.name].get(k)) for k in COMPARED}
    return list(rows.values())


# ---- main ----

def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batches", type=int, default=6)
    ap.add_argument("--keys-per-batch", type=int, default=500_000)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--providers", default="rocksdb,rocksdb-changelog,ttlstate",
                    help=f"comma-separated, from {', '.join(VARIANTS)}")
    ap.add_argument("--baseline", metavar="REF", help="also run ttlstate from this older commit")
    ap.add_argument("--baseline-variants", default="ttlstate",
                    help="which ttlstate variants get a baseline twin")
    ap.add_argument("--restore-keys", type=int, default=100, help="new keys in the restore batch")
    ap.add_argument("--ttl", help="the TTL of the ttlstate variants whose 1h is there only so that "
                                  "nothing expires (not churn's): longer for a run over an hour, e.g. 6h")
    ap.add_argument("--restore-repeats", type=int, default=1,
                    help="restores per grown checkpoint, each in a fresh JVM after the one before was "
                         "taken back out of the checkpoint (checkpoint_fs.rewind; on HDFS too); the "
                         "median one is the round's restore, every one is listed")
    ap.add_argument("--settle", type=float, default=6.0,
                    help="seconds the query keeps running after its last batch (maintenance)")
    ap.add_argument("--maintenance-interval", default="5s")
    ap.add_argument("--rounds", type=int, default=2,
                    help="run every variant this many times, in alternating order, and report medians: "
                         "the machine's speed drifts within minutes, and reversing the order makes a "
                         "drift hit every variant alike (--quick: 1)")
    ap.add_argument("--timeout", type=float, default=1800, help="seconds per child process")
    checkpoint_fs.add_option(ap)
    ap.add_argument("--driver-memory", default="1g",
                    help="the JVM's heap (spark.driver.memory, local mode; 1g is Spark's default), "
                         "the same for every variant")
    ap.add_argument("--fixed-heap", action="store_true",
                    help="every JVM starts with its whole heap committed and touched (-Xms equal to "
                         "--driver-memory, -XX:+AlwaysPreTouch), as a long-running executor's heap ends "
                         "up: peak memory then compares what each provider adds outside the heap, "
                         "instead of where G1's adaptive sizing happened to settle")
    ap.add_argument("--jvm-breakdown", type=float, default=0.0, metavar="SECONDS",
                    help="run the JVM with Native Memory Tracking and take its summary (jcmd) this "
                         "often while it grows; the one at the highest RSS goes in the results "
                         "(0 = off: jcmd costs CPU, so keep it off for timings)")
    ap.add_argument("--quick", action="store_true", help="3 batches of 20k keys, settle 2 s, one round")
    ap.add_argument("--json", help="write the results here (and the plot beside it, .png)")
    ap.add_argument("--plot", help="write the plot here (default: beside --json)")
    ap.add_argument("--keep", action="store_true",
                    help="keep inputs and checkpoints (`python -m benchmarks restore_rerun` re-runs their "
                    "restores)")
    args = ap.parse_args(argv)
    if args.quick:
        args.batches, args.keys_per_batch, args.settle, args.rounds = 3, 20_000, 2.0, 1
    if args.json and not args.plot:
        args.plot = os.path.splitext(args.json)[0] + ".png"
    return args


def _params(args: argparse.Namespace) -> dict[str, Any]:
    return {"batches": args.batches, "keys_per_batch": args.keys_per_batch, "partitions": args.partitions,
            "master": "local[2]", "driver_memory": args.driver_memory, "fixed_heap": args.fixed_heap,
            "maintenance_interval": args.maintenance_interval,
            "settle_s": args.settle, "restore_keys": args.restore_keys, "rounds": args.rounds,
            "restore_repeats": args.restore_repeats, "ttl": args.ttl,
            "quick": args.quick, "checkpoint_fs": args.checkpoint_fs,
            "workload": "dropDuplicates(key), Parquet file source, maxFilesPerTrigger=1, noop sink"}


def _longer_ttl(v: Variant, ttl: str | None) -> Variant:
    """`--ttl`: the variant's TTL, where its 1h is there only so that nothing expires."""
    if ttl is None or v.confs.get(TTL_KEY) != "1h":
        return v
    return dataclasses.replace(v, confs={**v.confs, TTL_KEY: ttl})


def _check_baseline_runs(variants: list[Variant], runs: list[dict[str, Any]]) -> None:
    """A baseline variant must have imported the old package and run the old server."""
    for v in variants:
        for r in (r for r in runs if r["variant"] == v.name and "failed" not in r):
            v.check_code([r["ttlstate_file"], r["restore"]["ttlstate_file"], *r["shim_jars"]],
                         [*r["server_files"], *r["restore"]["server_files"]])


def run_all(args: argparse.Namespace, variants: list[Variant], work: str) -> list[dict[str, Any]]:
    files, restore = write_inputs(os.path.join(work, "input"), args.batches, args.keys_per_batch,
                                  args.restore_keys)
    os.makedirs(os.path.join(work, "logs"))
    runs = []
    with checkpoint_root(args.checkpoint_fs, work) as ck_root:
        for round_no in range(args.rounds):
            order = variants if round_no % 2 == 0 else list(reversed(variants))
            runs += [run_variant(v, args, files, restore, work, round_no, ck_root) for v in order]
    return runs


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    baseline = prepare(args.baseline) if args.baseline else None
    variants = [_longer_ttl(v, args.ttl) for v in
                with_baseline(pick(VARIANTS, args.providers), baseline, args.baseline_variants)]
    started = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    work = tempfile.mkdtemp(prefix="ttlstate-growth-")
    try:
        runs = run_all(args, variants, work)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
        else:  # e.g. for `python -m benchmarks restore_rerun`
            print(f"growth: inputs and checkpoints kept in {work}", flush=True)
    _check_baseline_runs(variants, runs)
    expected = args.batches * args.keys_per_batch + args.restore_keys
    result = {"benchmark": "growth", "started": started, "machine": describe(), "params": _params(args),
              "variants": [v.describe() for v in variants], "runs": runs,
              "summary": summarize(variants, runs, expected)}
    for s in result["summary"]:
        print(json.dumps(s), flush=True)
    _save(result, args)
    return result


def _save(result: dict[str, Any], args: argparse.Namespace) -> None:
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
        print(f"growth: results {args.json}", flush=True)
    if args.plot:
        from benchmarks.workloads.growth_plot import plot

        plot(result, args.plot)
        print(f"growth: plot {args.plot}", flush=True)


if __name__ == "__main__":
    main()
