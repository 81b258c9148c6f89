"""Resource bounds over many versions of a churning workload, private local files, and no
process of ours after `spark.stop()` or after the driver's Python process is killed.

The churn: a deduplication with a watermark, every batch 40 new keys whose event time is
10 s after the previous batch's, so each version puts 40 rows and evicts the previous 40.
`make test` runs 15 versions; `make test-long` 100, comparing the server's RSS at version 30
and version 100, and the killed driver (it starts a second JVM). Numbers are printed
(`pytest -s` shows them).
"""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time

import psutil
import pytest
from pyspark.sql import DataFrame

from tests.spark.harness import (
    TTLSTATE,
    Run,
    is_server_command,
    is_worker,
    our_server_processes,
    poll_until,
    running,
    session,
)
from ttlstate.checkpoint import names

pytestmark = pytest.mark.spark

SCHEMA = {"events": "k STRING, ts TIMESTAMP, pad STRING"}
KEYS_PER_STEP = 40
RETAIN = 5            # spark.sql.streaming.minBatchesToRetain
SNAPSHOT_EVERY = 2    # ttlstate.snapshotInterval
CONFS = {"spark.sql.streaming.minBatchesToRetain": str(RETAIN),
         "spark.sql.streaming.stateStore.ttlstate.snapshotInterval": str(SNAPSHOT_EVERY),
         "spark.sql.streaming.noDataMicroBatches.enabled": "false"}  # one version per step
MB = 1 << 20


def dedup(s: dict[str, DataFrame]) -> DataFrame:
    return s["events"].withWatermark("ts", "0 seconds").dropDuplicates(["k", "ts"])


def churn_step(i: int) -> list[dict]:
    ts = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(1_767_225_600 + 10 * i))
    return [{"k": f"s{i}-{j}", "ts": ts, "pad": "x" * 100} for j in range(KEYS_PER_STEP)]


def _server() -> tuple[list[psutil.Process], str]:
    """Our server's processes (supervisor first) and its root directory."""
    procs = our_server_processes()
    sup = [(p, cmd) for p, cmd in procs if not is_worker(p)]
    assert len(sup) == 1, f"expected one state server, found {procs}"
    root = sup[0][1][sup[0][1].index("--root") + 1]
    return [sup[0][0]] + [p for p, cmd in procs if p is not sup[0][0]], root


def _rss_mb(procs: list[psutil.Process]) -> float:
    return sum(p.memory_info().rss for p in procs) / MB


def _fds(procs: list[psutil.Process]) -> int:
    return sum(p.num_fds() for p in procs)


def _store_dirs(root: str) -> list[str]:
    return [os.path.join(root, w, d) for w in os.listdir(root) if os.path.isdir(os.path.join(root, w))
            for d in os.listdir(os.path.join(root, w))]


def _local_root_problems(root: str, stores: int) -> list[str]:
    """What is wrong with the server's root: anything but sockets and the running query's stores
    (db + empty staging), or anything readable by others than the user."""
    problems = []
    for dirpath, dirnames, filenames in os.walk(root):
        for name in [dirpath] + [os.path.join(dirpath, n) for n in dirnames + filenames]:
            try:
                mode = stat.S_IMODE(os.lstat(name).st_mode)
            except FileNotFoundError:  # a staging file that was just published
                continue
            if mode & 0o077:
                problems.append(f"{name} is {oct(mode)}")
    problems += [f"unexpected {n}" for n in os.listdir(root)
                 if not (n.endswith(".sock") or os.path.isdir(os.path.join(root, n)))]
    dirs = _store_dirs(root)
    if len(dirs) != stores:
        problems.append(f"{len(dirs)} store directories, not {stores}: {dirs}")
    for d in dirs:
        if sorted(os.listdir(d)) != ["db", "staging"] or os.listdir(os.path.join(d, "staging")):
            problems.append(f"{d}: {os.listdir(d)}, staging {os.listdir(os.path.join(d, 'staging'))}")
    return problems


def _bytes_under(root: str) -> int:
    return sum(os.path.getsize(os.path.join(d, f)) for d, _dirs, files in os.walk(root) for f in files)


def _retention_reached(store_dir: str) -> bool:
    """Cleanup kept what rebuilds the newest RETAIN versions even if their newest base snapshot
    turns out damaged (the second-newest snapshot at or before the oldest of them, and every
    changelog after it) and nothing older."""
    files = names.parse_all(os.listdir(store_dir))
    latest = max(f.version for f in files)
    oldest_needed = latest - RETAIN + 1
    bases = sorted(f.version for f in files if f.kind == names.SNAPSHOT and f.version <= oldest_needed)
    base = bases[-2] if len(bases) >= 2 else 0
    changelogs = {f.version for f in files if f.kind == names.CHANGELOG}
    assert set(range(base + 1, latest + 1)) <= changelogs, f"a needed changelog is gone: {sorted(changelogs)}"
    return min(f.version for f in files) == base > 0


@pytest.mark.parametrize("versions,measure_from", [(15, 5), pytest.param(100, 30, marks=pytest.mark.long)])
def test_churn_keeps_memory_files_fds_and_processes_bounded(versions: int, measure_from: int) -> None:
    spark = session()
    try:
        jvm = psutil.Process(spark._jvm.java.lang.ProcessHandle.current().pid())  # type: ignore[union-attr]
        warm = Run(spark, TTLSTATE, dedup, SCHEMA, confs=CONFS)
        warm.start()
        for i in range(3):
            warm.step(churn_step(i))
        warm.stop()
        server, root = _server()
        # Maintenance unloads and closes the stopped query's stores (bounded wait).
        assert poll_until(lambda: not _store_dirs(root), 60), _store_dirs(root)
        before = {"jvm_fds": jvm.num_fds(), "server_fds": _fds(server),
                  "processes": len(psutil.Process().children(recursive=True))}

        run = Run(spark, TTLSTATE, dedup, SCHEMA, confs=CONFS)
        run.start()
        rss: dict[int, float] = {}
        started = time.monotonic()
        for i in range(versions):
            run.step(churn_step(i))
            if i + 1 in (measure_from, versions):
                rss[i + 1] = _rss_mb(server)
        elapsed = time.monotonic() - started
        assert len(run.outputs) == versions and all(len(o) == KEYS_PER_STEP for o in run.outputs.values())
        assert sum(op["numRowsTotal"] for op in run.progress[-1]["stateOperators"]) == KEYS_PER_STEP
        # (bounded wait: maintenance may be writing a snapshot through staging right now)
        assert poll_until(lambda: not _local_root_problems(root, 2), 30), _local_root_problems(root, 2)
        local_bytes = _bytes_under(root)
        store_dirs = [os.path.join(run.checkpoint, "state", "0", p) for p in ("0", "1")]
        assert poll_until(lambda: all(_retention_reached(d) for d in store_dirs), 60), \
            [sorted(os.listdir(d)) for d in store_dirs]
        kept = sorted(os.listdir(store_dirs[0]))
        run.stop()
        assert poll_until(lambda: not _store_dirs(root), 60), _store_dirs(root)
        after = {"jvm_fds": jvm.num_fds(), "server_fds": _fds(server),
                 "processes": len(psutil.Process().children(recursive=True))}
        print(f"\n{versions} versions in {elapsed:.0f} s; server RSS MB {rss}; local store bytes "
              f"{local_bytes}; checkpoint files of store 0/0 after cleanup {kept}; before {before}, "
              f"after {after}")

        growth = rss[versions] - rss[measure_from]
        assert growth < 40, f"server RSS grew {growth:.1f} MB from version {measure_from} to {versions}"
        assert running(server) == server, "the state server was restarted"
        assert after["processes"] <= before["processes"], (before, after)
        # Slack for pooled connections and Spark's own files; a leak per version exceeds it.
        assert after["server_fds"] <= before["server_fds"] + 4, (before, after)
        assert after["jvm_fds"] <= before["jvm_fds"] + 8, (before, after)
    finally:
        spark.stop()
    assert poll_until(lambda: not running(server), 60), "a state server process outlived spark.stop()"
    assert not os.path.exists(root)


@pytest.mark.long  # a second JVM: about half a minute here, more when the machine is busy
def test_killed_driver_python_takes_jvm_and_state_server_with_it() -> None:
    """A child Python process runs a stateful query on ttlstate, then SIGKILLs itself: the JVM it
    launched exits (EOF on its stdin) and the state server follows; nothing of ours remains."""
    child = subprocess.run([sys.executable, "-m", "tests.spark.crashing_driver"], capture_output=True,
                           text=True, timeout=600, cwd=os.path.dirname(os.path.dirname(os.path.dirname(
                               os.path.abspath(__file__)))))
    assert child.returncode == -signal.SIGKILL, child.stderr[-2000:]
    report = json.loads(child.stdout.strip().splitlines()[-1])
    assert report["servers"], report
    procs = []
    for pid in [report["jvm"], *report["servers"]]:
        try:
            p = psutil.Process(pid)
            if "java" in p.cmdline() or is_server_command(p.cmdline()) or "java" in p.name():
                procs.append(p)  # (not a new process that got a freed pid)
        except psutil.Error:
            pass
    assert poll_until(lambda: not running(procs), 120), f"still running: {running(procs)}"
    assert poll_until(lambda: not os.path.exists(report["root"]), 10), report["root"]
