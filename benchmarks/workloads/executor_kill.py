"""Executor kill: the batch of a running query in which an executor is lost, on a standalone cluster.

The growth workload (`dropDuplicates(key)` fed `--batches` Parquet files of `--keys-per-batch`
new keys, `--partitions` shuffle partitions) runs on a standalone cluster of pyspark's own
master and two one-core workers on this machine (`integration/standalone.py`), one executor on
each, the checkpoint on the local disk or a MiniDFSCluster (`--checkpoint-fs hdfs`). After the
state has grown and maintenance has had `--settle` seconds, three more batches of
`--kill-keys` new keys each run one at a time (`executor_kill_child`): a steady batch (the
reference), the kill batch, in which the first worker's executor JVM is SIGKILLed
`--kill-after` seconds after the stateful stage's tasks start (as a lost host: its tasks, the
shuffle output it held and the stores it had loaded are gone, and the master starts another
executor), and the batch after. The two batches' time beyond two steady batches is what an
executor's loss costs the query: failing the tasks, re-running the lost map output, and
loading the lost stores from the checkpoint where the tasks run again, which for Spark's
RocksDB provider is a download of every SST file of those stores.

Each variant runs in its own driver process (a fresh driver JVM and fresh executors), in
alternating order over `--rounds` (with `--baseline REF`, the ttlstate variants of
`--baseline-variants` also run by an older checkout, `<name>@<sha>`, as growth's: the executors'
state servers import that tree, which the run checks); the summary has the medians of the three
batches, the recovery (what the kill batch and the batch after took beyond two steady batches: a
kill that came after the victim's stateful tasks had ended costs the batch after) and their
ratios to Spark's RocksDB provider (and to the baseline twin), and checks the state rows after
every batch (nothing lost or doubled by the retries). From Spark's event log, the kill batch is
also split at the stateful stage's last attempt. Where Spark resubmitted the stage (a lost
map output failed a fetch), the wait for that attempt from the kill holds the first attempt's
remaining tasks and the map output run again, and the attempt is where the lost partitions'
stores load and are read again; where the lost tasks ran again inside the attempt already
running (one attempt), the wait is negative and the attempt is the whole stage. So each batch
is also timed by its stateful tasks (where each partition ran, when, for how long, how it ended):
the time no stateful task ran is Spark's whatever the provider, and the summary sets the kill
batch's share of it against Spark RocksDB's whole kill batch, the best any store could do there.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import tempfile
from typing import Any

from benchmarks.harness import checkpoint_fs, event_log
from benchmarks.harness.baseline import prepare
from benchmarks.harness.checkpoint_fs import checkpoint_root, join
from benchmarks.harness.machine import describe
from benchmarks.harness.subproc import RssPoller, run_child
from benchmarks.harness.variants import Variant, baseline_twin, pick, ratio, with_baseline
from benchmarks.workloads.executor_kill_child import PHASES
from benchmarks.workloads.growth import (
    LOAD_METRIC,
    REFERENCE,
    VARIANTS,
    _child_params,
    _kind,
    _longer_ttl,
    _median,
    _place,
    _replayed,
    _shim_jars,
    new_keys,
    write_inputs,
    write_keys,
)


def write_phase_inputs(directory: str, first_key: int, keys: int, after_mtime: float) -> None:
    """One file per phase, of keys after all the growth's, younger than every growth file."""
    os.makedirs(directory, exist_ok=True)
    for i, phase in enumerate(PHASES):
        write_keys(os.path.join(directory, f"{phase}.parquet"), new_keys(first_key + i * keys, keys),
                   after_mtime + i)


def cluster_confs(args: argparse.Namespace, cluster_url: str, v: Variant) -> dict[str, str]:
    """The driver's Spark confs for the cluster: one one-core executor per worker, and the
    variant's Python path on the executors too (a baseline variant's state server imports its
    own tree)."""
    confs = {"spark.master": cluster_url, "spark.driver.host": "127.0.0.1",
             "spark.executor.memory": args.executor_memory, "spark.executor.cores": "1",
             "spark.cores.max": "2"}
    path = v.env().get("PYTHONPATH")
    if path:
        confs["spark.executorEnv.PYTHONPATH"] = path
    return confs


def run_variant(v: Variant, args: argparse.Namespace, cluster: Any, files: list[str], work: str,
                round_no: int, ck_root: str) -> dict[str, Any]:
    here = os.path.join(work, f"{v.name.replace('@', '-at-')}-r{round_no}")
    input_dir, staging = os.path.join(here, "input"), os.path.join(here, "staging")
    os.makedirs(input_dir)
    for f in files:
        _place(f, input_dir)
    os.makedirs(staging)
    for phase in PHASES:
        _place(os.path.join(work, "phases", f"{phase}.parquet"), staging)
    ck = join(ck_root, os.path.basename(here), "ck")
    params = _child_params(v, args, "kill", input_dir, ck)
    params["spark_confs"].update(cluster_confs(args, cluster.url, v))
    event_log.log_events(params, os.path.join(work, "events", os.path.basename(here)))
    params.update(staging_dir=staging, kill_after_s=args.kill_after, partitions=args.partitions,
                  victim_worker_pid=cluster.workers[0].pid)
    print(f"executor_kill: {v.name} (round {round_no}): {args.batches} batches, then {', '.join(PHASES)}",
          flush=True)
    servers = [RssPoller(w.pid, interval=1.0) for w in cluster.workers]  # the executors' state servers
    for poller in servers:
        poller.start()
    try:
        out, _rss = run_child("benchmarks.workloads.executor_kill_child", params, v.env(),
                              os.path.join(work, "logs", f"{os.path.basename(here)}.log"), args.timeout)
    finally:
        server_files = sorted({f for poller in servers for f in poller.stop().server_files})
    v.check_code([out["ttlstate_file"], *_shim_jars(out)], server_files)
    load = LOAD_METRIC[_kind(v)] or ""
    phases = {p["phase"]: {**p, "load_ms": p["custom"].get(load)} for p in out["phases"]}
    run = {"variant": v.name, "round": round_no, "checkpoint": ck, "ttlstate_file": out["ttlstate_file"],
           "shim_jars": _shim_jars(out), "grow_wall_s": out["grow_wall_s"], "batches": out["batches"],
           "phases": phases, "executors_at_end": out["executors_at_end"]}
    shutil.rmtree(here, ignore_errors=True)
    print("  " + ", ".join(f"{name} {p['batch_ms']} ms (load {p['load_ms']} ms, state rows {p['state_rows']})"
                           for name, p in phases.items())
          + f"; killed {phases['kill']['kill_into_batch_ms']} ms into its batch, which ended "
          f"{phases['kill']['kill_to_end_ms']} ms later", flush=True)
    split = _kill_stages(phases["kill"])
    if split:
        print(f"  from the kill to the stateful stage's last attempt "
              f"{split['kill_to_last_stateful_attempt_ms']} ms, that attempt "
              f"{split['kill_last_stateful_attempt_ms']} ms, after it {split['kill_after_stateful_ms']} ms "
              f"({split['kill_stateful_attempts']} attempts)", flush=True)
        kill = phases["kill"]
        print(f"  stateful tasks (from the batch's start, killed at {kill['kill_into_batch_ms']} ms): "
              + "; ".join(f"p{t['partition']} on {t['executor']} at {t['launched_ms']} ms "
                          f"for {t['task_ms']} ms ({t['ended']})" for t in kill["tasks"])
              + "; executors " + ", ".join(f"{c['executor']} {c['change']} at {c['at_ms']} ms"
                                           for c in kill["executors"]), flush=True)
    return run


def summarize_run(run: dict[str, Any], grown_rows: int, kill_keys: int) -> dict[str, Any]:
    """The scalars of one variant's run: the three batches, the recovery, the rows check."""
    p = run["phases"]
    expected = [grown_rows + (i + 1) * kill_keys for i in range(len(PHASES))]
    # The loss lands in the kill batch or, when the victim's tasks had ended before the kill
    # (lost shuffle output, stores moving back), in the batch after: both count.
    return {**{f"{name}_batch_ms": p[name]["batch_ms"] for name in PHASES},
            "recovery_ms": p["kill"]["batch_ms"] + p["after"]["batch_ms"] - 2 * p["steady"]["batch_ms"],
            "kill_to_end_ms": p["kill"]["kill_to_end_ms"], "kill_load_ms": p["kill"]["load_ms"],
            "kill_replayed_changelogs": _replayed(p["kill"]), **_kill_stages(p["kill"]),
            **{f"{name}_outside_stateful_tasks_ms": p[name]["batch_ms"] - event_log.busy_ms(p[name]["tasks"])
               for name in PHASES if "tasks" in p[name]},
            "median_grow_batch_ms": _median([b["batch_ms"] for b in run["batches"]]),
            "state_rows_ok": [p[name]["state_rows"] for name in PHASES] == expected}


def _kill_stages(kill: dict[str, Any]) -> dict[str, Any]:
    """The kill batch from the kill on: until the stateful stage's last attempt starts, that
    attempt, and what follows it (the module's docstring says what each holds). A negative wait:
    that attempt had started before the kill, the lost tasks ran again inside it. Runs before
    2026-12-01, and baseline trees, have no split."""
    stages = kill.get("stages")
    if stages is None:
        return {}
    split = {"kill_to_last_stateful_attempt_ms": stages["last_stateful_attempt_from_start_ms"]
             - kill["kill_into_batch_ms"],
             "kill_last_stateful_attempt_ms": stages["last_stateful_attempt_ms"],
             "kill_after_stateful_ms": stages["after_stateful_ms"],
             "kill_stateful_attempts": stages["stateful_stage_attempts"]}
    return {**split, **_kill_tasks(kill)}


def _kill_tasks(kill: dict[str, Any]) -> dict[str, Any]:
    """The kill batch by its stateful tasks: how long at least one ran (the stores' work is in
    there, with the tasks' own), how many attempts failed, and when the replacement executor
    came. Each batch's time outside its stateful tasks (`summarize_run`: the query's start, the
    recovery's waits for the loss to be noticed, the map output run again, a slot or the
    replacement executor, and the end) is Spark's whatever the provider, as far as a faster store
    cannot have a lost task run again sooner on a slot it frees. Runs before 2026-12-01's task
    timeline have no tasks."""
    tasks = kill.get("tasks")
    if tasks is None:
        return {}
    added = [c["at_ms"] for c in kill["executors"] if c["change"] == "added"]
    return {"kill_stateful_busy_ms": event_log.busy_ms(tasks),
            "kill_failed_task_attempts": sum(t["ended"] != "Success" for t in tasks),
            "kill_to_replacement_executor_ms": min(added) - kill["kill_into_batch_ms"] if added else None}


COMPARED = ("recovery_ms", "kill_batch_ms", "after_batch_ms", "kill_to_end_ms", "steady_batch_ms",
            "kill_to_last_stateful_attempt_ms", "kill_last_stateful_attempt_ms", "kill_stateful_busy_ms",
            "kill_outside_stateful_tasks_ms", "after_outside_stateful_tasks_ms")
# a variant's figure over another of Spark RocksDB's: the kill batch a store could reach at best
# if its stateful tasks took no time at all, against Spark RocksDB's kill batch
CROSS_RATIOS = {"kill_outside_stateful_tasks_to_rocksdb_kill":
                ("kill_outside_stateful_tasks_ms", "kill_batch_ms")}


def summarize(variants: list[Variant], runs: list[dict[str, Any]], grown_rows: int,
              kill_keys: int) -> list[dict[str, Any]]:
    """Per variant, medians over rounds (and each round's kill batch), ratios to Spark RocksDB's
    (and to the variant's baseline twin)."""
    rows = {}
    for v in variants:
        per_round = [summarize_run(r, grown_rows, kill_keys) for r in runs if r["variant"] == v.name]
        row: dict[str, Any] = {"variant": v.name}
        for key, first in per_round[0].items():
            values = [s[key] for s in per_round]
            row[key] = all(values) if isinstance(first, bool) else _median(values)
        row["kill_batch_ms_per_round"] = [s["kill_batch_ms"] for s in per_round]
        row["recovery_ms_per_round"] = [s["recovery_ms"] for s in per_round]
        rows[v.name] = (row, per_round)
    if REFERENCE in rows:
        ref, ref_rounds = rows[REFERENCE]
        for name, (row, per_round) in rows.items():
            if name == REFERENCE:
                continue
            row["ratio_to_rocksdb"] = {k: ratio(row.get(k), ref.get(k)) for k in COMPARED}
            row["ratio_to_rocksdb"].update({name: ratio(row.get(mine), ref.get(theirs))
                                            for name, (mine, theirs) in CROSS_RATIOS.items()})
            if len(per_round) == len(ref_rounds):
                pairs = list(zip(per_round, ref_rounds, strict=True))
                row["ratio_to_rocksdb_per_round"] = {k: [ratio(a.get(k), b.get(k)) for a, b in pairs]
                                                     for k in COMPARED}
                row["ratio_to_rocksdb_per_round"].update(
                    {name: [ratio(a.get(mine), b.get(theirs)) for a, b in pairs]
                     for name, (mine, theirs) in CROSS_RATIOS.items()})
    for v in variants:  # this tree's variant against its run by the baseline's code
        twin = baseline_twin(v, variants)
        if twin is not None:
            mine, theirs = rows[v.name][0], rows[twin.name][0]
            mine["ratio_to_baseline"] = {k: ratio(mine.get(k), theirs.get(k)) for k in COMPARED}
    return [row for row, _ in rows.values()]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batches", type=int, default=10)
    ap.add_argument("--keys-per-batch", type=int, default=500_000)
    ap.add_argument("--kill-keys", type=int, help="new keys in each of the last three batches "
                                                  "(default: --keys-per-batch)")
    ap.add_argument("--kill-after", type=float, default=0.5,
                    help="seconds after the kill batch's stateful tasks start that the executor is killed")
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--providers", default="rocksdb,ttlstate-budget-in-place-after-commit",
                    help=f"comma-separated, from {', '.join(VARIANTS)}")
    ap.add_argument("--baseline", metavar="REF", help="also run ttlstate from this older commit")
    ap.add_argument("--baseline-variants", default="ttlstate-budget-in-place-after-commit",
                    help="which ttlstate variants get a baseline twin")
    ap.add_argument("--ttl", help="as growth's --ttl (e.g. 6h for a run over an hour)")
    ap.add_argument("--settle", type=float, default=6.0,
                    help="seconds between the growth's last batch and the steady one (maintenance)")
    ap.add_argument("--maintenance-interval", default="5s")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--timeout", type=float, default=3600, help="seconds per variant's run")
    checkpoint_fs.add_option(ap)
    ap.add_argument("--executor-memory", default="1g", help="each executor's heap")
    ap.add_argument("--worker-memory", default="3g", help="what each standalone worker offers")
    ap.add_argument("--quick", action="store_true", help="3 batches of 20k keys, settle 2 s, one round")
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args(argv)
    if args.quick:
        args.batches, args.keys_per_batch, args.settle, args.rounds = 3, 20_000, 2.0, 1
    args.kill_keys = args.kill_keys or args.keys_per_batch
    # what growth's child parameters also need (the driver runs in client mode, its heap is small)
    args.driver_memory, args.fixed_heap = "1g", False
    return args


def _keep_logs(work: str, cluster: Any) -> None:
    """A failed run's drivers' logs and the executors' (with their state servers'), which go
    with the work and cluster folders: kept for the post-mortem."""
    kept = tempfile.mkdtemp(prefix="ttlstate-executor-kill-failed-")
    shutil.copytree(os.path.join(work, "logs"), os.path.join(kept, "drivers"), dirs_exist_ok=True)
    for path in cluster.logs():
        target = os.path.join(kept, "cluster", os.path.relpath(path, cluster.root))
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copyfile(path, target)
    print(f"executor_kill: the failed run's logs are kept in {kept}", flush=True)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    from integration.standalone import StandaloneCluster

    args = parse_args(argv)
    baseline = prepare(args.baseline) if args.baseline else None
    variants = [_longer_ttl(v, args.ttl) for v in
                with_baseline(pick(VARIANTS, args.providers), baseline, args.baseline_variants)]
    started = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    work = tempfile.mkdtemp(prefix="ttlstate-executor-kill-")
    runs: list[dict[str, Any]] = []
    try:
        files, _restore = write_inputs(os.path.join(work, "input"), args.batches, args.keys_per_batch, 1)
        write_phase_inputs(os.path.join(work, "phases"), args.batches * args.keys_per_batch + 1,
                           args.kill_keys, os.path.getmtime(files[-1]) + 3600)
        os.makedirs(os.path.join(work, "logs"))
        cluster = StandaloneCluster(workers=2, cores=1, memory=args.worker_memory)
        try:
            with checkpoint_root(args.checkpoint_fs, work) as ck_root:
                for round_no in range(args.rounds):
                    order = variants if round_no % 2 == 0 else list(reversed(variants))
                    runs += [run_variant(v, args, cluster, files, work, round_no, ck_root) for v in order]
        except BaseException:
            _keep_logs(work, cluster)
            raise
        finally:
            cluster.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    summary = summarize(variants, runs, args.batches * args.keys_per_batch, args.kill_keys)
    result = {"benchmark": "executor_kill", "started": started, "machine": describe(),
              "params": {k: v for k, v in vars(args).items() if k not in ("json",)},
              "variants": [v.describe() for v in variants],
              "runs": runs, "summary": summary}
    for s in summary:
        print(json.dumps(s), flush=True)
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
        print(f"executor_kill: results {args.json}", flush=True)
    return result


if __name__ == "__main__":
    main()
