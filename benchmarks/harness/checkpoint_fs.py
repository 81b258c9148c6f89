"""Where a benchmark keeps its checkpoints (local disk or a real HDFS), and what each batch wrote.

`checkpoint_root` is the parent side: a local folder, or with `hdfs` a MiniDFSCluster (two
DataNodes, replication 2) started from the integration tier's components for the length of the
benchmark, so Spark's and ttlstate's checkpoint files travel through Hadoop's
DistributedFileSystem as in production; or, given an `hdfs://` URL, a folder of its own on an
HDFS that is already running (the integration tier's, which saves starting another).

`CheckpointFiles` is the child side: it lists a checkpoint through the Hadoop FileSystem of the
child's JVM (file:// or hdfs:// alike) whenever asked, remembers every file it ever saw (so a
file that cleanup deleted later still counts), and attributes each file's bytes to the batch in
whose interval its modification time falls: from the batch's trigger start to the next batch's
(the last batch: until the last listing). So a snapshot that maintenance wrote between two
batches counts for the batch before it.
"""

from __future__ import annotations

import argparse
import bisect
import contextlib
import datetime as dt
import os
import re
import time
from collections.abc import Iterator
from typing import Any

FILESYSTEMS = ("local", "hdfs")


def filesystem(value: str) -> str:
    """A `--checkpoint-fs` value: one of FILESYSTEMS, or the hdfs:// URL of a running HDFS."""
    if value in FILESYSTEMS or value.startswith("hdfs://"):
        return value
    raise argparse.ArgumentTypeError(f"{value!r}: expected local, hdfs or an hdfs:// URL")


def add_option(ap: argparse.ArgumentParser) -> None:
    """The `--checkpoint-fs` option, the same for every benchmark that takes it."""
    ap.add_argument("--checkpoint-fs", type=filesystem, default="local", metavar="{local,hdfs,hdfs://...}",
                    help="where the checkpoints live: the local disk, a MiniDFSCluster started for the run "
                         "(its jars come from scripts/integration_deps.sh, fetched with Maven once), or "
                         "a folder of its own on the running HDFS at that URL")


@contextlib.contextmanager
def checkpoint_root(fs: str, local_dir: str) -> Iterator[str]:
    """A folder (local path or hdfs:// URL) under which the benchmark puts its checkpoints."""
    if fs == "local":
        yield local_dir
        return
    if fs.startswith("hdfs://"):
        yield join(fs, "benchmarks", os.path.basename(local_dir.rstrip("/")))  # the run's own folder
        return
    if fs != "hdfs":
        raise ValueError(f"checkpoint file system {fs!r}: expected local, hdfs or an hdfs:// URL")
    from integration.components import MiniHdfs

    cluster = MiniHdfs(datanodes=2, replication=2)
    try:
        yield f"{cluster.url}/benchmarks"
    finally:
        cluster.stop()


def join(root: str, *parts: str) -> str:
    """A path under root, for local folders and URLs alike."""
    return "/".join([root.rstrip("/"), *parts]) if "://" in root else os.path.join(root, *parts)


def progress_start_ms(progress: dict[str, Any]) -> int:
    """A progress's trigger start (its `timestamp`, e.g. 2026-11-24T18:00:00.123Z) in epoch ms,
    the clock of Spark's event log too (the driver's wall clock). Rounded: a float's product can
    fall a hair below the millisecond."""
    when = dt.datetime.strptime(progress["timestamp"], "%Y-%m-%dT%H:%M:%S.%fZ")
    return round(when.replace(tzinfo=dt.UTC).timestamp() * 1000)


class CheckpointFiles:
    """Every file seen under one checkpoint folder: path -> (bytes, modification time in ms)."""

    def __init__(self, spark: Any, path: str) -> None:
        jvm = spark.sparkContext._jvm
        self._path = jvm.org.apache.hadoop.fs.Path(path)
        self._fs = self._path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
        self.seen: dict[str, tuple[int, int]] = {}

    def scan(self) -> int:
        """Lists the folder now (if it exists yet); returns the bytes of the files present.

        A listing races the running query: a temporary file listed can be renamed away before
        its status is read (the local file system then fails the whole listing), so a failed
        listing is retried."""
        for attempt in range(5):
            try:
                return self._scan_once()
            except Exception:  # noqa: BLE001  (a py4j error wrapping the file system's)
                if attempt == 4:
                    raise
                time.sleep(0.05)
        return 0

    def _scan_once(self) -> int:
        if not self._fs.exists(self._path):
            return 0
        present = 0
        files = self._fs.listFiles(self._path, True)
        while files.hasNext():
            s = files.next()
            self.seen[s.getPath().toString()] = (int(s.getLen()), int(s.getModificationTime()))
            present += int(s.getLen())
        return present


def _batch(starts_ms: list[int], mtime: int) -> int:
    """The batch whose interval holds mtime; files older than the first batch count for it."""
    return max(0, bisect.bisect_right(starts_ms, mtime) - 1)


def bytes_per_batch(seen: dict[str, tuple[int, int]], starts_ms: list[int]) -> list[int]:
    """Bytes of the files whose modification time falls in each batch's interval (see the
    module)."""
    out = [0] * len(starts_ms)
    for size, mtime in seen.values() if starts_ms else ():
        out[_batch(starts_ms, mtime)] += size
    return out


def bytes_per_batch_by_kind(seen: dict[str, tuple[int, int]], starts_ms: list[int]) -> list[dict[str, int]]:
    """bytes_per_batch split by the file's extension (ttlstate: changelog, snapshot; Spark's
    RocksDB provider: zip, sst, changelog), so a batch's bytes say what they were."""
    out: list[dict[str, int]] = [{} for _ in starts_ms]
    for path, (size, mtime) in seen.items() if starts_ms else ():
        kind = path.rsplit("/", 1)[-1].rsplit(".", 1)[-1] if "." in path.rsplit("/", 1)[-1] else "other"
        per = out[_batch(starts_ms, mtime)]
        per[kind] = per.get(kind, 0) + size
    return out


# ---- a batch taken back, so that it runs again (a restore measured more than once) ----

BATCH_LOGS = ("offsets", "commits")


def log_entry_names(batch: int) -> tuple[str, str]:
    """A batch's entry in a log of the checkpoint (offsets, commits, a file source's), and its
    Hadoop checksum file."""
    return str(batch), f".{batch}.crc"


def committed_version(batch: int) -> re.Pattern[str]:
    """The names of the state files of the version `batch` committed (version batch + 1), and
    their checksum files, in any provider's layout."""
    return re.compile(rf"^\.?{batch + 1}\.")


def rewind(spark: Any, ck: str, batch: int) -> int:
    """Takes batch `batch` out of the checkpoint `ck` (any Hadoop file system: the child's JVM
    reaches it): its log entries and the state files of the version it committed, so the next
    run of the query runs it again on the state before it. Returns the files removed."""
    jvm = spark.sparkContext._jvm
    path = jvm.org.apache.hadoop.fs.Path
    fs = path(ck).getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    doomed = [join(ck, log, name) for log in BATCH_LOGS for name in log_entry_names(batch)]
    sources = path(join(ck, "sources"))
    for source in fs.listStatus(sources) if fs.exists(sources) else []:
        entries = source.getPath().toString()
        if fs.exists(path(join(entries, f"{batch}.compact"))):
            raise RuntimeError(f"batch {batch}'s source log entry is a compaction of all earlier ones: "
                               "it cannot be taken back; grow with another --batches")
        doomed += [join(entries, name) for name in log_entry_names(batch)]
    version = committed_version(batch)
    files = fs.listFiles(path(join(ck, "state")), True)
    while files.hasNext():
        f = files.next().getPath()
        if version.match(f.getName()):
            doomed.append(f.toString())
    return sum(1 for d in doomed if fs.delete(path(d), False))
