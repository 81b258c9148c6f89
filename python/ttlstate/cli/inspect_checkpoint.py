"""`ttlstate inspect CHECKPOINT`: what a (stopped) query's ttlstate checkpoint holds.

Per operator, partition and store: the versions present, snapshot and changelog files, bytes,
and, for the latest version (rebuilt in a temporary directory with the portable engine, so
the checkpoint is only read), the rows and how many of them are expired at a given time.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from dataclasses import asdict, dataclass

from ttlstate.checkpoint import names
from ttlstate.checkpoint.errors import CheckpointError
from ttlstate.checkpoint.identity import FileIdentity, store_label
from ttlstate.checkpoint.location import LocalCheckpointLocation
from ttlstate.checkpoint.record_file import (
    KIND_CHANGELOG,
    KIND_SNAPSHOT,
    RecordFileError,
    verify_record_file,
)
from ttlstate.config.keys import EngineKind
from ttlstate.config.store_config import StoreConfig, TtlConfig
from ttlstate.store.provider import StoreProvider
from ttlstate.ttl import ttl_value
from ttlstate.ttl.clock import ManualClock
from ttlstate.ttl.expiry import is_expired


class NotATtlstateCheckpoint(ValueError):
    pass


@dataclass
class StoreReport:
    operator: str
    partition: str
    store: str
    versions: list[int]
    snapshots: list[int]
    changelogs: list[int]
    bytes: int
    latest_version: int
    rows: int | None
    expired_rows: int | None
    ttl_ms: int | None
    oldest_access_ms: int | None
    newest_access_ms: int | None
    problems: list[str]  # misplaced or damaged files, or why the latest version cannot be rebuilt


def find_store_dirs(checkpoint: str) -> list[tuple[str, str, str, str]]:
    """(operator, partition, store name, directory) for every directory holding our files."""
    if not os.path.isdir(checkpoint):
        raise NotATtlstateCheckpoint(f"{checkpoint} is not a directory")
    state = os.path.join(checkpoint, "state")
    if os.path.isdir(state):
        root = state
    elif os.path.basename(os.path.normpath(checkpoint)) == "state" or any(
            names.parse(f) for f in os.listdir(checkpoint)):
        root = checkpoint
    else:
        raise NotATtlstateCheckpoint(f"{checkpoint} is not a query checkpoint: it has no state/ "
                                     "directory")
    found = []
    for dirpath, _dirs, files in os.walk(root):
        if any(names.parse(f) for f in files):
            rel = os.path.relpath(dirpath, root).split(os.sep)
            op, part = (rel + ["?", "?"])[:2]
            store = rel[2] if len(rel) > 2 else "default"
            found.append((op, part, store, dirpath))
    if not found:
        raise NotATtlstateCheckpoint(
            f"{checkpoint} is not a ttlstate checkpoint: no <version>.changelog or "
            "<version>.snapshot files under it (Spark's HDFS provider writes .delta files, its "
            "RocksDB provider .zip files)")
    return sorted(found)


def query_id_of(checkpoint: str) -> str | None:
    """The query id Spark keeps in `<checkpoint>/metadata` (None if there is none)."""
    if os.path.basename(os.path.normpath(checkpoint)) == "state":
        checkpoint = os.path.dirname(os.path.normpath(checkpoint))
    try:
        with open(os.path.join(checkpoint, "metadata")) as f:
            return str(json.loads(f.readline())["id"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def check_files(directory: str, files: list[names.CheckpointFile], store_id: str,
                query_id: str | None) -> tuple[list[str], int | None]:
    """Problems of each file (damaged, or another store's, query's or version's) and the TTL
    recorded in the newest good file."""
    problems: list[str] = []
    ttl: int | None = None
    for f in files:
        kind = KIND_SNAPSHOT if f.kind == names.SNAPSHOT else KIND_CHANGELOG
        path = os.path.join(directory, f.name)
        try:
            header = verify_record_file(path, kind)
        except RecordFileError as e:
            problems.append(f"{path} {e}")
            continue
        wrong = FileIdentity(store_id, kind, f.version, query_id).mismatch(FileIdentity.of(header))
        if wrong:
            problems.append(f"{path} is misplaced: it {wrong}")
        else:
            ttl = header.ttl_ms
    return problems, ttl


def inspect_store(op: str, part: str, store: str, directory: str, at_ms: int,
                  ttl_ms: int | None, query_id: str | None = None) -> StoreReport:
    files = names.parse_all(os.listdir(directory))
    latest = max(f.version for f in files)
    store_id = store_label(op, part, store)
    problems, recorded_ttl = check_files(directory, files, store_id, query_id)
    ttl = ttl_ms if ttl_ms is not None else recorded_ttl
    rows: int | None = None
    expired = 0
    oldest = newest = None
    tmp = tempfile.mkdtemp(prefix="ttlstate-inspect-")
    try:
        # TTL off for the rebuild: we want every stored row, and count expiry ourselves.
        cfg = StoreConfig(ttl=TtlConfig(), engine=EngineKind.ROCKSDICT)
        p = StoreProvider(store_id, tmp, LocalCheckpointLocation(directory), cfg,
                          ManualClock(at_ms), query_id=query_id)
        try:
            p.get_store(latest, read_only=True).release()
            rows = 0
            for _key, raw in p.engine.iterate():
                rows += 1
                ts = ttl_value.timestamp(raw)
                oldest = ts if oldest is None else min(oldest, ts)
                newest = ts if newest is None else max(newest, ts)
                if ttl is not None and is_expired(ts, ttl, at_ms):
                    expired += 1
        except CheckpointError as e:
            problems.append(f"version {latest} cannot be rebuilt: {e}")
        finally:
            p.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return StoreReport(
        op, part, store, sorted({f.version for f in files}),
        [f.version for f in files if f.kind == names.SNAPSHOT],
        [f.version for f in files if f.kind == names.CHANGELOG],
        sum(os.path.getsize(os.path.join(directory, f.name)) for f in files),
        latest, rows, expired if ttl is not None and rows is not None else None, ttl, oldest, newest,
        problems)


def _ranges(vs: list[int]) -> str:
    if not vs:
        return "-"
    out, start, prev = [], vs[0], vs[0]
    for v in vs[1:] + [None]:  # type: ignore[list-item]
        if v is not None and v == prev + 1:
            prev = v
            continue
        out.append(str(start) if start == prev else f"{start}-{prev}")
        if v is not None:
            start = prev = v
    return ",".join(out)


def render(reports: list[StoreReport]) -> str:
    head = (f"{'op':>3} {'part':>4} {'store':<26} {'versions':<12} {'snapshots':<10} "
            f"{'rows':>8} {'expired':>8} {'bytes':>10}")
    lines = [head]
    for r in reports:
        expired = "-" if r.expired_rows is None else str(r.expired_rows)
        rows = "?" if r.rows is None else str(r.rows)
        lines.append(f"{r.operator:>3} {r.partition:>4} {r.store:<26} {_ranges(r.versions):<12} "
                     f"{_ranges(r.snapshots):<10} {rows:>8} {expired:>8} {r.bytes:>10}")
    total_rows = sum(r.rows or 0 for r in reports)
    total_bytes = sum(r.bytes for r in reports)
    lines.append(f"{len(reports)} stores, {total_rows} rows, {total_bytes} bytes")
    problems = [p for r in reports for p in r.problems]
    if problems:
        lines.append(f"{len(problems)} problem(s):")
        lines += [f"  {p}" for p in problems]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="ttlstate inspect", description=__doc__)
    ap.add_argument("checkpoint", help="the query's checkpoint location (or its state/ dir)")
    ap.add_argument("--at", type=int, default=None,
                    help="time in epoch ms at which to count expired rows (default: now)")
    ap.add_argument("--ttl", default=None,
                    help="TTL to count expiry with (default: the TTL recorded in the files)")
    ap.add_argument("--json", action="store_true", help="machine-readable output")
    args = ap.parse_args(argv)
    at = args.at if args.at is not None else time.time_ns() // 1_000_000
    ttl_ms = None
    if args.ttl is not None:
        from ttlstate.config.parse import ConfError, parse_duration_ms

        try:
            ttl_ms = parse_duration_ms("--ttl", args.ttl)
        except ConfError as e:
            ap.error(str(e))
    try:
        stores = find_store_dirs(args.checkpoint)
    except NotATtlstateCheckpoint as e:
        ap.exit(2, f"ttlstate inspect: {e}\n")
    query = query_id_of(args.checkpoint)
    reports = [inspect_store(op, part, store, d, at, ttl_ms, query) for op, part, store, d in stores]
    if args.json:
        print(json.dumps({"checkpoint": os.path.abspath(args.checkpoint), "atMs": at,
                          "stores": [asdict(r) for r in reports]}, indent=1))
    else:
        print(render(reports))
    return 1 if any(r.problems for r in reports) else 0
