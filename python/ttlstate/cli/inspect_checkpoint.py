"""`ttlstate inspect CHECKPOINT`: what a (stopped) query's ttlstate checkpoint holds.

Per operator (its id, and its name as progress reports it, from Spark's state metadata in the
checkpoint), partition and store: the versions present, snapshot and changelog files, bytes,
the TTL recorded in the files, and, for the latest version (rebuilt in a temporary directory
with the portable engine, so the checkpoint is only read), the rows and how many of them are
expired at a given time (`--at`: now, an ISO timestamp, a duration ago or ahead, epoch ms).

`--ages` adds a TTL advisor (cli/ages.py): per operator, the distribution of the entries' last
access ages and what `--ttl` would remove now, optionally drawn into a PNG (`--plot`).

It reads local paths only (a directory, or a `file:` URI): for a checkpoint on HDFS, S3, GCS
or ABFS, copy it to a local disk first.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import tempfile
import time
from array import array
from dataclasses import asdict, dataclass, field
from urllib.parse import unquote, urlparse

from ttlstate.checkpoint import names
from ttlstate.checkpoint.errors import CheckpointError
from ttlstate.checkpoint.identity import FileIdentity, store_label
from ttlstate.checkpoint.location import LocalCheckpointLocation
from ttlstate.checkpoint.record_file import (
    KIND_CHANGELOG,
    KIND_SNAPSHOT,
    SST_MANIFEST_FORMAT,
    RecordFileError,
    RecordFileHeader,
    verify_record_file,
)
from ttlstate.checkpoint.sst_manifest import is_sst_file, read_manifest
from ttlstate.cli.ages import StoreAges, operator_ages, plot_ages, render_ages
from ttlstate.cli.at_time import AT_HELP, iso_utc, parse_at
from ttlstate.cli.commit_log import committed_ids
from ttlstate.cli.operator_metadata import operator_names
from ttlstate.config.keys import EngineKind
from ttlstate.config.parse import ConfError, format_duration_ms, parse_duration_ms
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
    operator_name: str | None = None  # as progress reports it (Spark's state metadata)


@dataclass
class OperatorReport:
    operator: str
    name: str | None
    stores: int
    rows: int
    expired_rows: int | None
    ttl_ms: list[int | None] = field(default_factory=list)  # the distinct TTLs of its stores


REMOTE_HINT = ("ttlstate inspect reads local paths only (a directory, or a file: URI). Copy the "
               "checkpoint to a local disk first (e.g. `hadoop fs -copyToLocal <uri> /tmp/ck`, "
               "`aws s3 cp --recursive`, `gsutil -m cp -r`) and inspect the copy")


def local_path(location: str) -> str:
    """A local path for `location`: a path, or a `file:` URI (`file:///x`, `file:/x`, as Spark
    prints checkpoint locations, or `file://localhost/x`). Any other URI is refused."""
    if os.path.exists(location):
        return location
    url = urlparse(location)
    if url.scheme == "file":
        if url.netloc not in ("", "localhost"):
            raise NotATtlstateCheckpoint(f"{location} names the host {url.netloc!r}: {REMOTE_HINT}")
        return unquote(url.path)
    if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", location):
        raise NotATtlstateCheckpoint(f"{location} is a remote location ({url.scheme}): {REMOTE_HINT}")
    return location


def find_store_dirs(checkpoint: str) -> list[tuple[str, str, str, str]]:
    """(operator, partition, store name, directory) for every directory holding our files."""
    if not os.path.exists(checkpoint):
        raise NotATtlstateCheckpoint(f"{checkpoint} does not exist (inspect reads local paths only)")
    if not os.path.isdir(checkpoint):
        raise NotATtlstateCheckpoint(f"{checkpoint} is a file, not a query's checkpoint directory")
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


def state_root_of(checkpoint: str) -> str:
    """`<checkpoint>/state` (or `checkpoint` itself when it is that directory)."""
    if os.path.basename(os.path.normpath(checkpoint)) == "state":
        return checkpoint
    return os.path.join(checkpoint, "state")


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
        if header.format == SST_MANIFEST_FORMAT:
            problems += _sst_problems(directory, path, header)
    return problems, ttl


def _sst_problems(directory: str, path: str, header: RecordFileHeader) -> list[str]:
    """What an SST snapshot names that is not there as named."""
    try:
        manifest = read_manifest(path, header)
    except RecordFileError as e:
        return [f"{path} {e}"]
    problems = []
    for f in manifest.ssts:
        sst = os.path.join(directory, f.name)
        size = os.path.getsize(sst) if os.path.exists(sst) else None
        if size != f.size:
            state = "is missing" if size is None else f"has {size} bytes, not {f.size}"
            problems.append(f"{path} names SST file {sst}, which {state}")
    return problems


def inspect_store(op: str, part: str, store: str, directory: str, at_ms: int,
                  ttl_ms: int | None, query_id: str | None = None,
                  operator_name: str | None = None, ages_out: list[StoreAges] | None = None,
                  committed: tuple[int, list[str]] | None = None) -> StoreReport:
    """The report of one store; with `ages_out`, also appends its entries' last-access
    timestamps and the newest version's recorded batch time (`--ages`). `committed`: on
    checkpoint format 2, the version and checkpoint ids Spark's commit log recorded for this
    store's partition (see commit_log.py): the attempt that is rebuilt."""
    files = names.parse_all(os.listdir(directory))
    latest = max(f.version for f in files)
    store_id = store_label(op, part, store)
    problems, recorded_ttl = check_files(directory, files, store_id, query_id)
    ckpt_id = None
    if any(f.ckpt_id for f in files):
        if committed is not None:
            latest = committed[0]
        attempts = {f.ckpt_id for f in files if f.version == latest} & set(committed[1] if committed else [])
        if not attempts:
            attempts = {f.ckpt_id for f in files if f.version == latest}
        if len(attempts) == 1:
            ckpt_id = attempts.pop()
        else:
            problems.append(f"version {latest} has {len(attempts)} attempts ({', '.join(sorted(attempts))}) "
                            "and the commit log names none of them")
    ttl = ttl_ms if ttl_ms is not None else recorded_ttl
    rows: int | None = None
    expired = 0
    oldest = newest = None
    tmp = tempfile.mkdtemp(prefix="ttlstate-inspect-")
    try:
        # TTL off for the rebuild: we want every stored row, and count expiry ourselves.
        cfg = StoreConfig(ttl=TtlConfig(), engine=EngineKind.ROCKSDICT)
        p = StoreProvider(store_id, tmp, LocalCheckpointLocation(directory), cfg,
                          ManualClock(at_ms), query_id=query_id, checkpoint_ids=ckpt_id is not None)
        try:
            p.get_store(latest, read_only=True, ckpt_id=ckpt_id).release()
            rows = 0
            stamps = array("q")
            for _key, raw in p.engine.iterate():
                rows += 1
                ts = ttl_value.timestamp(raw)
                if ages_out is not None:
                    stamps.append(ts)
                oldest = ts if oldest is None else min(oldest, ts)
                newest = ts if newest is None else max(newest, ts)
                if ttl is not None and is_expired(ts, ttl, at_ms):
                    expired += 1
            if ages_out is not None:
                ages_out.append(StoreAges(op, operator_name, p.recorded_time_ms(latest), stamps))
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
        sum(os.path.getsize(os.path.join(directory, n)) for n in os.listdir(directory)
            if names.parse(n) is not None or is_sst_file(n)),
        latest, rows, expired if ttl is not None and rows is not None else None, ttl, oldest, newest,
        problems, operator_name)


def operator_reports(reports: list[StoreReport]) -> list[OperatorReport]:
    """Per operator: its stores, rows and expired rows summed, and the TTLs its stores have."""
    out: dict[str, OperatorReport] = {}
    for r in reports:
        o = out.setdefault(r.operator, OperatorReport(r.operator, r.operator_name, 0, 0, 0))
        o.stores += 1
        o.rows += r.rows or 0
        o.expired_rows = (None if o.expired_rows is None or r.expired_rows is None
                          else o.expired_rows + r.expired_rows)
        if r.ttl_ms not in o.ttl_ms:
            o.ttl_ms.append(r.ttl_ms)
    return sorted(out.values(), key=lambda o: (len(o.operator), o.operator))


def _ranges(vs: list[int]) -> str:
    if not vs:
        return "-"
    out, start, prev = [], vs[0], vs[0]
    for v in vs[1:] + [None]:
        if v is not None and v == prev + 1:
            prev = v
            continue
        out.append(str(start) if start == prev else f"{start}-{prev}")
        if v is not None:
            start = prev = v
    return ",".join(out)


def _ttls(ttls: list[int | None]) -> str:
    return "/".join(format_duration_ms(t) for t in ttls) or "-"


def render(reports: list[StoreReport], at_ms: int | None = None) -> str:
    lines = []
    if at_ms is not None:
        lines.append(f"expired rows counted at {iso_utc(at_ms)} ({at_ms} ms)")
    name_w = max([len(r.operator_name or "-") for r in reports] + [4])
    head = (f"{'op':>3} {'name':<{name_w}} {'part':>4} {'store':<26} {'versions':<12} {'snapshots':<10} "
            f"{'rows':>8} {'expired':>8} {'ttl':>6} {'bytes':>10}")
    lines.append(head)
    for r in reports:
        expired = "-" if r.expired_rows is None else str(r.expired_rows)
        rows = "?" if r.rows is None else str(r.rows)
        lines.append(f"{r.operator:>3} {r.operator_name or '-':<{name_w}} {r.partition:>4} {r.store:<26} "
                     f"{_ranges(r.versions):<12} {_ranges(r.snapshots):<10} {rows:>8} {expired:>8} "
                     f"{format_duration_ms(r.ttl_ms):>6} {r.bytes:>10}")
    lines.append("per operator:")
    for o in operator_reports(reports):
        expired = "-" if o.expired_rows is None else str(o.expired_rows)
        lines.append(f"  operator {o.operator} ({o.name or 'name unknown'}): {o.stores} stores, "
                     f"{o.rows} rows, {expired} expired, TTL {_ttls(o.ttl_ms)}")
    total_rows = sum(r.rows or 0 for r in reports)
    total_bytes = sum(r.bytes for r in reports)
    lines.append(f"{len(reports)} stores, {total_rows} rows, {total_bytes} bytes")
    problems = [p for r in reports for p in r.problems]
    if problems:
        lines.append(f"{len(problems)} problem(s):")
        lines += [f"  {p}" for p in problems]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="ttlstate inspect", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("checkpoint", help="the query's checkpoint location (or its state/ dir): a local "
                                       "path or a file: URI")
    ap.add_argument("--at", default="now", help=AT_HELP)
    ap.add_argument("--ttl", default=None,
                    help="TTL to count expiry with (default: the TTL recorded in the files)")
    ap.add_argument("--json", action="store_true", help="machine-readable output")
    ap.add_argument("--ages", action="store_true",
                    help="per operator: the entries' last-access ages, measured from the newest "
                         "version's batch time, and what --ttl would remove now")
    ap.add_argument("--plot", metavar="PNG", default=None,
                    help="with --ages: draw each operator's age histogram into this PNG (matplotlib)")
    args = ap.parse_args(argv)
    if args.plot and not args.ages:
        ap.error("--plot draws the --ages histogram: add --ages")
    try:
        at = parse_at(args.at, time.time_ns() // 1_000_000)
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
                             committed_ids(checkpoint, op, part))
               for op, part, store, d in stores]
    by_operator = operator_ages(ages, ttl_ms) if ages is not None else None
    if args.json:
        out: dict[str, object] = {"checkpoint": os.path.abspath(checkpoint), "atMs": at, "at": iso_utc(at),
                                  "operators": [asdict(o) for o in operator_reports(reports)],
                                  "stores": [asdict(r) for r in reports]}
        if by_operator is not None:
            out["ages"] = [{k: v for k, v in asdict(o).items() if k != "ages_ms"} for o in by_operator]
        print(json.dumps(out, indent=1))
    else:
        print(render(reports, at))
        if by_operator is not None:
            print(render_ages(by_operator))
    if args.plot and by_operator is not None:
        plot_ages(args.plot, by_operator)
    return 1 if any(r.problems for r in reports) else 0
