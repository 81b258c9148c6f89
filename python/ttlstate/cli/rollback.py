"""The `ttlstate rollback` subcommand: a stopped query whose newest state cannot be rebuilt (a
damaged changelog nothing older replaces) goes back to the newest batch every store rebuilds,
and its sources replay the rest on restart (rollback_plan.py says how that batch is found)."""

from __future__ import annotations

import argparse
import os
import time

DESCRIPTION = """\
Roll a STOPPED query back to the newest batch after which every ttlstate store of its checkpoint
rebuilds its state, when a damaged checkpoint file stops it at every restart (a changelog of
the newest versions that no older file replaces: ttlstate repairs damaged snapshots itself).

The batches after that one leave the checkpoint: their entries of the offset, commit and source
logs, and every store's files of the versions above it. On restart Spark re-runs them from the
last committed offsets, as after a crash, so the sources must still hold that data (Kafka's
retention, the input files). Nothing is deleted: the files move to
<checkpoint>/_ttlstate_rollback/<UTC time>/, from where they can be put back. A sink that is not
idempotent sees those batches' output twice.

Each store is checked by rebuilding versions in a temporary directory, as a restarted query
would (the checkpoint is only read until the move). --dry-run says what it would move, and why.
It reads local paths only (a directory, or a file: URI)."""

ROLLED_BACK = "_ttlstate_rollback"


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("checkpoint", help="the stopped query's checkpoint location: a local path or a file: URI")
    ap.add_argument("--to-batch", type=int, default=None, metavar="B",
                    help="roll back to batch B or older, even if newer batches rebuild (default: the "
                         "newest batch every store rebuilds)")
    ap.add_argument("--dry-run", action="store_true",
                    help="say which batch it would roll back to and which files it would move; "
                         "change nothing")


def run(args: argparse.Namespace, ap: argparse.ArgumentParser) -> int:
    from ttlstate.cli.inspect_checkpoint import (
        NotATtlstateCheckpoint,
        find_store_dirs,
        local_path,
        query_id_of,
    )
    from ttlstate.cli.rollback_plan import CannotRollBack, Store, plan

    try:
        checkpoint = local_path(args.checkpoint)
        if not os.path.isdir(os.path.join(checkpoint, "commits")):
            ap.exit(2, f"ttlstate rollback: {checkpoint} is not a query's checkpoint location (it has no "
                       "commits/ directory; give the directory holding offsets/, commits/ and state/)\n")
        stores = [Store(*found) for found in find_store_dirs(checkpoint)]
        found = plan(checkpoint, stores, query_id_of(checkpoint), args.to_batch)
    except (NotATtlstateCheckpoint, CannotRollBack) as e:
        ap.exit(1, f"ttlstate rollback: {e}\n")
    for line in found.why:
        print(f"cannot resume at {line}")
    if not found.needed:
        print(f"nothing to roll back: every store rebuilds the state after batch {found.newest_batch}, "
              "the newest committed batch")
        return 0
    dest = os.path.join(checkpoint, ROLLED_BACK, time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()))
    verb = "would move" if args.dry_run else "moving"
    print(f"rolling back from batch {found.newest_batch} to batch {found.target_batch}: the query "
          f"resumes at batch {found.target_batch + 1}, re-running batches {found.target_batch + 1} to "
          f"{found.newest_batch} from its sources")
    print(f"{verb} {len(found.moves)} files to {dest}:")
    for rel in found.moves:
        print(f"  {rel}")
        if not args.dry_run:
            target = os.path.join(dest, rel)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            os.replace(os.path.join(checkpoint, rel), target)
    if args.dry_run:
        print("dry run: nothing was changed")
    return 0
