"""Restore only: the growth benchmark's restore batch, re-run many times on kept checkpoints.

`python -m benchmarks growth --keep ...` leaves its work directory (it prints where), holding
for each variant and round `<variant>-r<round>/ck` (the checkpoint after its restore batch) and
`input`. This script takes that directory and, for each variant asked, rebuilds the
checkpoint as it was before the restore batch (that batch's offset, commit and source log
entries and the state files of the version it committed are removed), then re-runs the
restore child (`benchmarks.workloads.growth_child`, a fresh JVM with empty local state) on a fresh copy,
`--repeats` times, variants in alternating order. A change to the load path is then measured
in about half a minute per restore instead of a whole growth run, against Spark's RocksDB
provider and an older commit in the same run.

The ttlstate variants run with a TTL of 1h: on a checkpoint whose batches ran more than an
hour ago, entries have expired, and the restore batch's commit also removes some of them
(incremental cleanup), so its state rows drop. The script warns when that may be the case.

A variant is a growth variant name, `name@REF` for an older commit's code (built as
`--baseline` builds it), and `spec=kept` restores the checkpoint kept for variant `kept`
(e.g. `ttlstate@24fce2d=ttlstate`; the default is the name before `@`).

`--cold` evicts each fresh copy of the checkpoint from the page cache before its restore
(written out, then `POSIX_FADV_DONTNEED`), as a fresh executor on another host finds its
checkpoint: every byte a restore reads then comes from the disk, not from memory.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time
from typing import Any

from benchmarks.harness.baseline import prepare
from benchmarks.harness.checkpoint_fs import BATCH_LOGS, committed_version, log_entry_names
from benchmarks.harness.subproc import run_child
from benchmarks.harness.variants import Variant, ratio
from benchmarks.workloads.growth import LOAD_METRIC, VARIANTS, _child_params, _in_place, _kind, _replayed


def _last_batch(ck: str) -> int:
    commits = [int(n) for n in os.listdir(os.path.join(ck, "commits")) if n.isdigit()]
    if not commits:
        raise SystemExit(f"restore_rerun: {ck} has no committed batch")
    return max(commits)


def _remove_batch(ck: str, batch: int) -> None:
    """The checkpoint as before `batch`: its log entries and the state version it committed
    (checkpoint_fs.rewind, for a local folder without a JVM)."""
    for log in BATCH_LOGS:
        for name in log_entry_names(batch):
            path = os.path.join(ck, log, name)
            if os.path.exists(path):
                os.unlink(path)
    for source in os.listdir(os.path.join(ck, "sources")):
        entries = os.path.join(ck, "sources", source)
        if os.path.exists(os.path.join(entries, f"{batch}.compact")):
            raise SystemExit(f"restore_rerun: batch {batch}'s source log entry is a compaction of "
                             "all earlier ones; grow with another --batches")
        for name in log_entry_names(batch):
            if os.path.exists(os.path.join(entries, name)):
                os.unlink(os.path.join(entries, name))
    version = committed_version(batch)
    for root, _dirs, files in os.walk(os.path.join(ck, "state")):
        for name in files:
            if version.match(name):
                os.unlink(os.path.join(root, name))


def _variant(spec: str, baselines: dict[str, Any]) -> tuple[str, Variant, str]:
    name, _, kept = spec.partition("=")
    base, _, ref = name.partition("@")
    if base not in VARIANTS:
        raise SystemExit(f"restore_rerun: unknown variant {base!r}; known: {', '.join(VARIANTS)}")
    v = VARIANTS[base]
    if ref:
        baselines.setdefault(ref, prepare(ref))
        v = v.at(baselines[ref])
    return name, v, kept or base


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command line, with what growth's child parameters also need (a restore child grows nothing)."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("work", help="a work directory `python -m benchmarks growth --keep` left")
    ap.add_argument("--variants", default="rocksdb,ttlstate", help="comma-separated (see above)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--round", type=int, default=0, help="whose kept checkpoint (growth round)")
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--maintenance-interval", default="5s")
    ap.add_argument("--driver-memory", default="1g", help="the JVM heap (spark.driver.memory), as in growth")
    ap.add_argument("--fixed-heap", action="store_true",
                    help="the JVM's whole heap committed and touched at start, as `growth --fixed-heap`")
    ap.add_argument("--timeout", type=float, default=900)
    ap.add_argument("--cold", action="store_true",
                    help="evict the checkpoint's copy from the page cache before each restore")
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args(argv)
    args.batches, args.settle = 0, 0.0  # not used by a restore child
    return args


def _evict_from_page_cache(root: str) -> None:
    """Writes every file under `root` out and drops its pages from the page cache."""
    for directory, _dirs, files in os.walk(root):
        for name in files:
            fd = os.open(os.path.join(directory, name), os.O_RDONLY)
            try:
                os.fsync(fd)
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    baselines: dict[str, Any] = {}
    variants = [_variant(s.strip(), baselines) for s in args.variants.split(",") if s.strip()]
    scratch = tempfile.mkdtemp(prefix="ttlstate-restore-rerun-")
    runs: list[dict[str, Any]] = []
    try:
        pristine: dict[str, tuple[str, str, int]] = {}
        for _name, _v, kept in variants:
            if kept in pristine:
                continue
            here = os.path.join(args.work, f"{kept}-r{args.round}")
            if not os.path.isdir(os.path.join(here, "ck")):
                raise SystemExit(f"restore_rerun: no kept checkpoint {here}/ck")
            ck = os.path.join(scratch, f"{kept}-before")
            shutil.copytree(os.path.join(here, "ck"), ck)  # copytree keeps modification times
            batch = _last_batch(ck)
            age_s = time.time() - os.path.getmtime(os.path.join(ck, "commits", str(batch)))
            if age_s > 50 * 60:
                print(f"restore_rerun: warning: {kept}'s batches ran {age_s / 60:.0f} minutes ago; with "
                      "a TTL of 1h their entries expire, and a ttlstate restore then also cleans up",
                      flush=True)
            _remove_batch(ck, batch)
            pristine[kept] = (ck, os.path.join(here, "input"), batch)
        for repeat in range(args.repeats):
            order = variants if repeat % 2 == 0 else list(reversed(variants))
            for name, v, kept in order:
                source, input_dir, batch = pristine[kept]
                ck = os.path.join(scratch, "ck")
                shutil.rmtree(ck, ignore_errors=True)
                shutil.copytree(source, ck)
                if args.cold:
                    _evict_from_page_cache(ck)
                params = _child_params(v, args, "restore", input_dir, ck)
                log = os.path.join(scratch, f"{name.replace('@', '-at-')}.log")
                out, rss = run_child("benchmarks.workloads.growth_child", params, v.env(), log, args.timeout)
                b = out["batch"]
                if b["batch_id"] != batch:
                    raise SystemExit(f"restore_rerun: {name} ran batch {b['batch_id']}, expected {batch}")
                row = {"variant": name, "repeat": repeat, "batch_ms": b["batch_ms"],
                       "add_batch_ms": b["add_batch_ms"], "commit_ms": b["commit_ms"],
                       "load_ms": b["custom"].get(LOAD_METRIC[_kind(v)]), "state_rows": b["state_rows"],
                       "replayed_changelogs": _replayed(b), **_in_place(b), **rss.as_dict()}
                print(json.dumps(row), flush=True)
                runs.append(row)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    reference = variants[0][0]
    medians = {name: statistics.median(r["batch_ms"] for r in runs if r["variant"] == name)
               for name, _v, _k in variants}
    summary = [{"variant": name, "median_restore_ms": medians[name],
                "restore_ms_per_repeat": [r["batch_ms"] for r in runs if r["variant"] == name],
                "median_load_ms": statistics.median(r["load_ms"] or 0 for r in runs if r["variant"] == name),
                f"ratio_to_{reference}": ratio(medians[name], medians[reference])}
               for name, _v, _k in variants]
    for s in summary:
        print(json.dumps(s), flush=True)
    result = {"benchmark": "restore_rerun", "work": args.work, "cold": args.cold, "runs": runs,
              "summary": summary}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    return result


if __name__ == "__main__":
    main()
