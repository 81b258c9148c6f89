"""`ttlstate inspect CHECKPOINT`: what a (stopped) query's ttlstate checkpoint holds, per store.

Per operator (its id, and its name as progress reports it, from Spark's state metadata in the
checkpoint), partition and store: the versions present, snapshot and changelog files, bytes,
the TTL recorded in the files, and, for the latest version (rebuilt in a temporary directory
with the portable engine and the settings the checkpoint recorded, so the checkpoint is only
read), the rows and how many of them are expired at the inspected time (`at_time.py`). The
command itself is `inspect_command.py`; the table, `inspect_render.py`.

It reads local paths only (a directory, or a `file:` URI): for a checkpoint on HDFS, S3, GCS
or ABFS, copy it to a local disk first.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import time
from array import array
from dataclasses import dataclass, field
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
from ttlstate.cli.ages import StoreAges, operator_key
from ttlstate.cli.at_time import AtTime
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
    operator_name: str | None = None  # as progress reports it (Spark's state metadata)
    counted_at_ms: int | None = None  # the time `expired_rows` is counted at (see at_time.py)
    last_batch_ms: int | None = None  # the time the checkpoint recorded for `latest_version`


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
    found.sort(key=lambda f: (operator_key(f[0]), operator_key(f[1]), f[2]))
    if not found:
        raise NotATtlstateCheckpoint(
            f"{checkpoint} is not a ttlstate checkpoint: no <version>.changelog or "
            "<version>.snapshot files under it (Spark's HDFS provider writes .delta files, its "
            "RocksDB provider .zip files)")
    return found


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


def inspect_store(op: str, part: str, store: str, directory: str, at: AtTime | int,
                  ttl_ms: int | None, query_id: str | None = None,
                  operator_name: str | None = None, ages_out: list[StoreAges] | None = None,
                  committed: tuple[int, list[str]] | None = None, now_ms: int | None = None) -> StoreReport:
    """The report of one store, its expired rows counted at `at` (an AtTime, resolved against
    the time the checkpoint recorded for the newest version, or an instant in epoch ms); with
    `ages_out`, also appends its entries' last-access timestamps and that time (`--ages`).
    `committed`: on checkpoint format 2, the version and checkpoint ids Spark's commit log
    recorded for this store's partition (see commit_log.py): the attempt that is rebuilt."""
    when = at if isinstance(at, AtTime) else AtTime(instant_ms=at)
    now_ms = time.time_ns() // 1_000_000 if now_ms is None else now_ms
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
    oldest = newest = last_batch = at_ms = None
    tmp = tempfile.mkdtemp(prefix="ttlstate-inspect-")
    try:
        # Opened as the state data source opens a version: with the settings the checkpoint
        # recorded (no warning that they differ from ours). Every stored row is iterated from
        # the engine, and expiry counted here.
        cfg = StoreConfig(ttl=TtlConfig(), engine=EngineKind.ROCKSDICT)
        p = StoreProvider(store_id, tmp, LocalCheckpointLocation(directory), cfg, ManualClock(now_ms),
                          query_id=query_id, checkpoint_ids=ckpt_id is not None, reader=True)
        try:
            p.get_store(latest, read_only=True, ckpt_id=ckpt_id).release()
            last_batch = p.recorded_time_ms(latest)
            at_ms = when.resolve(last_batch, now_ms)
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
                ages_out.append(StoreAges(op, operator_name, at_ms, stamps))
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
        problems, operator_name, at_ms, last_batch)


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
    return sorted(out.values(), key=lambda o: operator_key(o.operator))


def main(argv: list[str] | None = None) -> int:
    """`ttlstate inspect ARGS...` (kept for callers of this module)."""
    from ttlstate.cli.main import main as cli

    return cli(["inspect", *(argv or [])])
