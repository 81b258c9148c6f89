"""`make bench`: every benchmark in one run, one JSON file, plots and a markdown summary.

Sections: embedded store operations per engine; round trips through the state server;
compaction throughput with the filter off and on; Spark providers side by side; growth (state
growing batch after batch, each provider in its own JVM, then a restore); state size over time
under churn with and without TTL.
`--quick` shrinks every section to CI size. `--baseline REF` adds, to the Spark sections, ttlstate
as of an older commit, run in the same invocation. Results go to `benchmarks/results/<date>/`.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import time
from collections.abc import Callable

from benchmarks.harness.machine import describe

SECTIONS = ("store", "bridge", "compaction", "spark", "growth", "churn")
RESULTS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "results")


def _section(name: str, fn: Callable[[], object], report: dict[str, object]) -> None:
    print(f"\n=== {name} ===", flush=True)
    started = time.monotonic()
    report[name] = fn()
    print(f"=== {name}: done in {time.monotonic() - started:.1f}s ===", flush=True)


def _churn(quick: bool, out_dir: str) -> dict[str, object]:
    from ttlstate.demo.runner import run
    from ttlstate.demo.workload import ChurnWorkload

    batches = 10 if quick else 40
    stats = run(batches, 1.0, "3s", ChurnWorkload(new_sessions=100 if quick else 400),
                os.path.join(out_dir, "churn"))
    return {"batches": [s.__dict__ for s in stats]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", help="comma-separated sections: " + ",".join(SECTIONS))
    ap.add_argument("--baseline", metavar="REF",
                    help="also run ttlstate from this older commit in the spark and growth sections")
    args = ap.parse_args(argv)
    stamp = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H%M%SZ")
    out_dir = os.path.join(RESULTS, stamp + ("-quick" if args.quick else ""))
    os.makedirs(out_dir, exist_ok=True)
    quick = ["--quick"] if args.quick else []
    baseline = ["--baseline", args.baseline] if args.baseline else []
    wanted = set(args.only.split(",")) if args.only else set(SECTIONS)
    report: dict[str, object] = {"machine": describe(), "quick": args.quick, "started": stamp}

    if "store" in wanted:
        from benchmarks.workloads import store_ops

        _section("store", lambda: store_ops.main(quick), report)
    if "bridge" in wanted:
        from benchmarks.workloads import bridge_ops

        _section("bridge", lambda: bridge_ops.main(quick), report)
    if "compaction" in wanted:
        from benchmarks.workloads import compaction_throughput

        _section("compaction", lambda: compaction_throughput.main(quick), report)
    if "spark" in wanted:
        from benchmarks.workloads import spark_side_by_side

        _section("spark", lambda: spark_side_by_side.main(quick + baseline), report)
    if "growth" in wanted:
        from benchmarks.workloads import growth

        _section("growth", lambda: growth.main(
            quick + baseline + ["--plot", os.path.join(out_dir, "growth.png")]), report)
    if "churn" in wanted:
        _section("churn", lambda: _churn(args.quick, out_dir), report)

    path = os.path.join(out_dir, "results.json")
    with open(path, "w") as f:
        json.dump(report, f, indent=2, default=str)
    from benchmarks.harness.report import write_summary

    summary = write_summary(report, out_dir)
    print(f"\nresults: {path}\nsummary: {summary}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
