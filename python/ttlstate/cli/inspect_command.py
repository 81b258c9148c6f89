"""The `ttlstate inspect` subcommand: its arguments and what it prints (table, `--ages`, JSON,
`--plot`)."""

from __future__ import annotations

import argparse
import json
import os
import time
from dataclasses import asdict

DESCRIPTION = """\
What a stopped query's ttlstate checkpoint holds: per operator (its id and the name progress
reports) and per store, the versions, snapshot and changelog files, bytes, the TTL the files
recorded, and, for the newest version (rebuilt in a temporary directory: the checkpoint is only
read), its rows and how many of them are expired. Expiry is counted at one time, by default
the last batch's time (see --at), and the first line of the output says which.

--ages adds a TTL advisor: per operator, how long before that time the entries were last
accessed (percentiles and a histogram), and what --ttl would have removed by then; --plot draws
it into a PNG (needs matplotlib).

It reads local paths only (a directory, or a file: URI): copy a checkpoint on HDFS, S3, GCS or
ABFS to a local disk first. Exit status 1 when a file is damaged or misplaced."""


def add_arguments(ap: argparse.ArgumentParser) -> None:
    from ttlstate.cli.at_time import AT_HELP

    ap.add_argument("checkpoint", help="the query's checkpoint location (or its state/ dir): a local "
                                       "path or a file: URI")
    ap.add_argument("--at", default="last", help=AT_HELP)
    ap.add_argument("--ttl", default=None,
                    help="TTL to count expiry with, e.g. 1h or '30 minutes' (default: each store's TTL "
                         "as its files recorded it)")
    ap.add_argument("--json", action="store_true", help="machine-readable output instead of the table")
    ap.add_argument("--ages", action="store_true",
                    help="per operator: the entries' last-access ages at the --at time, and what --ttl "
                         "would have removed by then")
    ap.add_argument("--plot", metavar="PNG", default=None,
                    help="with --ages: draw each operator's age histogram into this PNG (needs "
                         "matplotlib) (default: no plot)")


def run(args: argparse.Namespace, ap: argparse.ArgumentParser) -> int:
    from ttlstate.cli.age_plot import plot_ages
    from ttlstate.cli.ages import StoreAges, operator_ages, render_ages
    from ttlstate.cli.at_time import parse_at
    from ttlstate.cli.commit_log import committed_ids
    from ttlstate.cli.inspect_checkpoint import (
        NotATtlstateCheckpoint,
        find_store_dirs,
        inspect_store,
        local_path,
        operator_reports,
        query_id_of,
        state_root_of,
    )
    from ttlstate.cli.inspect_render import counted_at, render
    from ttlstate.cli.operator_metadata import operator_names
    from ttlstate.config.parse import ConfError, parse_duration_ms

    if args.plot and not args.ages:
        ap.error("--plot draws the --ages histogram: add --ages")
    if args.plot:
        try:
            import matplotlib  # noqa: F401 - checked before the checkpoint is read, not after
        except ImportError:
            ap.exit(2, "ttlstate inspect: --plot draws the histogram with matplotlib, which is not installed "
                       "here. Install it with `pip install 'ttlstate[demo]'` (or `pip install matplotlib`), "
                       "or leave out --plot: the histogram is printed as text anyway.\n")
    now = time.time_ns() // 1_000_000
    try:
        at = parse_at(args.at, now)
    except ValueError as e:
        ap.error(str(e))
    ttl_ms = None
    if args.ttl is not None:
        try:
            ttl_ms = parse_duration_ms("--ttl", args.ttl)
        except ConfError as e:
            ap.error(str(e))
    try:
        checkpoint = local_path(args.checkpoint)
        stores = find_store_dirs(checkpoint)
    except NotATtlstateCheckpoint as e:
        ap.exit(2, f"ttlstate inspect: {e}\n")
    query = query_id_of(checkpoint)
    names = operator_names(state_root_of(checkpoint))
    ages: list[StoreAges] | None = [] if args.ages else None
    reports = [inspect_store(op, part, store, d, at, ttl_ms, query,
                             names.get(int(op)) if op.isdigit() else None, ages,
                             committed_ids(checkpoint, op, part), now_ms=now)
               for op, part, store, d in stores]
    by_operator = operator_ages(ages, ttl_ms) if ages is not None else None
    when = counted_at(reports, at)
    if args.json:
        times = {r.counted_at_ms for r in reports if r.counted_at_ms is not None}
        at_ms = times.pop() if len(times) == 1 else None
        out: dict[str, object] = {"checkpoint": os.path.abspath(checkpoint), "countedAt": when, "atMs": at_ms,
                                  "operators": [asdict(o) for o in operator_reports(reports)],
                                  "stores": [asdict(r) for r in reports]}
        if by_operator is not None:
            out["ages"] = [{k: v for k, v in asdict(o).items() if k != "ages_ms"} for o in by_operator]
        print(json.dumps(out, indent=1))
    else:
        print(render(reports, at))
        if by_operator is not None:
            print(render_ages(by_operator, when))
    if args.plot and by_operator is not None:
        plot_ages(args.plot, by_operator)
    return 1 if any(r.problems for r in reports) else 0
