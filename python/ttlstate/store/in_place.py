"""SST files read where they lie in the checkpoint (`snapshot.readInPlace`).

A restore from an SST snapshot places each of its files into the empty local DB directory
without copying it, so RocksDB opens them there and reads only the blocks it needs, and the
restore's time does not grow with the state:
- In a `file:` checkpoint the state server reads itself, as a symbolic link to the
  checkpoint's file.
- Where only the shim reaches the checkpoint (HDFS, S3A, ...), as a placeholder: a sparse file
  of the same size, which the native data plane reads as byte ranges of the checkpoint's file
  that the shim's range service reads through Hadoop (native/include/ttlstate/mapped_files.h).
  RocksDB's block cache is what stays local of it.
The checkpoint's files stay as they are:
- RocksDB never writes to an SST file it has finished, and removes one a compaction made
  obsolete by unlinking its name: the link goes, the checkpoint's file stays.
- Removing the local DB directory (shutil.rmtree) removes the links, never what they point to;
  a placeholder is a local file, so removing it touches nothing remote.
- A RocksDB checkpoint of the local DB (a snapshot) hard-links the links, so the next snapshot
  names the same uploaded files and uploads only what the DB wrote since.
- Retention keeps every SST file a snapshot names (sst_snapshots.py), and a snapshot of this
  DB names every file it still reads.

A copying restore checks each file whole (size and checksum) before the DB opens it. A link's
size is checked at the restore and its checksum in the background after it (`InPlaceCheck`),
while RocksDB checks the checksum of each block it reads. A placeholder's file is not read whole
after a restore (that would be the download in place avoids): RocksDB's block checksums, and its
checks of each file's footer and properties when it opens it, find its damage; a load that
retries the restore's own version (the task that read the damage failed) reads them whole
first (`MappedCheck`). A file found damaged any way makes the next load pass over every
snapshot naming it (repair.py), as the copying restore would at once; the load that retries the
restore's own version waits for the check, so a retried task repairs instead of reading the
damage again.
"""

from __future__ import annotations

import logging
import os
import stat
import threading
from dataclasses import dataclass

from ttlstate.checkpoint.location import CheckpointLocation, LocalCheckpointLocation
from ttlstate.checkpoint.sst_manifest import SstFile, file_crc32
from ttlstate.config.store_config import StoreConfig
from ttlstate.engine.select import native_module
from ttlstate.errors import JvmCheckpointIOError
from ttlstate.faults import crash_point

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class InPlace:
    """The checkpoint folder a restore reads SST files of in place: a local one (`socket`
    None), or one the shim's range service at `socket` reads (its URI)."""

    directory: str
    socket: str | None = None

    def source(self, name: str) -> str:
        if self.socket is None:
            return os.path.join(self.directory, name)
        return f"{self.directory.rstrip('/')}/{name}"


def in_place_directory(config: StoreConfig, location: CheckpointLocation, store_id: str) -> InPlace | None:
    """Where a restore reads the SST files in place, or None: copy them. A location the shim
    serves offers a range service when the shim started one for the store (`range_socket`)."""
    if not config.snapshot_read_in_place:
        return None
    if isinstance(location, LocalCheckpointLocation):
        return InPlace(location.directory)
    socket = getattr(location, "range_socket", None)
    directory = getattr(location, "directory", "")
    if socket and directory:
        return InPlace(directory, socket)
    _say_not_applying(store_id, location)
    return None


_told: set[str] = set()


def _say_not_applying(store_id: str, location: CheckpointLocation) -> None:
    """Once per process and checkpoint folder: the key is on, and does not apply here."""
    where = location.describe("")
    if where in _told:
        return
    _told.add(where)
    log.info("ttlstate store %s: snapshot.readInPlace is on, but the shim offered no range "
             "service for %s (a shim older than the server?), so restores copy the SST files",
             store_id, where)


@dataclass(frozen=True)
class LinkedFile:
    source: str  # the checkpoint's file
    file: SstFile


def place_mapped(socket: str, uri: str, local: str, f: SstFile) -> None:
    """Creates `local` as a placeholder of the manifest's size for `uri` (mapped_files.h)."""
    native = native_module()
    if native is None:  # an SST snapshot is the native engine's; this is unreachable without it
        raise RuntimeError("ttlstate: reading SST files in place needs the native engine")
    native.add_mapped_file(local, socket, uri, f.size)


def is_placed(path: str) -> bool:
    """Whether the local SST file `path` is read in place: a link, or a placeholder (registered
    with the native side: a restore's, or an evicted file, which may keep a block or two of its
    file system's own; or a sparse file without a block, also once the placeholders were
    forgotten: its bytes are zeros)."""
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        return True
    native = native_module()
    if native is not None and native.mapped_file_source(path) is not None:
        return True
    return st.st_size > 0 and st.st_blocks == 0


@dataclass(frozen=True)
class MappedFile:
    socket: str
    uri: str
    file: SstFile


class MappedCheck:
    """The whole checksum of each placeholder's file a restore opened, read only when a load
    retries that restore's version (or RocksDB found a file corrupt without naming it)."""

    def __init__(self, store_id: str, version: int, files: list[MappedFile]) -> None:
        self.version = version
        self.names = frozenset(mapped.file.name for mapped in files)
        self.files = tuple(files)
        self._store_id = store_id

    def without(self, name: str) -> MappedCheck | None:
        """This check but of the checkpoint file `name` (read whole since); None: nothing left."""
        rest = [mapped for mapped in self.files if mapped.file.name != name]
        return MappedCheck(self._store_id, self.version, rest) if rest else None

    def run(self) -> dict[str, str]:
        """Checkpoint file name -> what is wrong with it. A file that cannot be read is no
        finding (the DFS may be down for a while): the JvmCheckpointIOError naming it fails
        the load (a checkpoint error for the shim, not an internal one)."""
        damaged: dict[str, str] = {}
        for mapped in self.files:
            f = mapped.file
            problem = _check_mapped(mapped, f"{self._store_id}: SST file {mapped.uri}, read in place "
                                              f"since the restore of version {self.version},")
            if problem is not None:
                damaged[f.name] = problem
                log.warning("ttlstate store %s: SST file %s, read in place since the restore of "
                            "version %d, %s; the next load passes over every snapshot naming it",
                            self._store_id, mapped.uri, self.version, problem)
        return damaged


def _check_mapped(mapped: MappedFile, what: str) -> str | None:
    """What is wrong with the checkpoint file `mapped` names, read whole through the range
    service; None: nothing. `what` names it in the error when it cannot be read."""
    native = native_module()
    assert native is not None  # placeholders exist only with it
    f = mapped.file
    try:
        whole = native.mapped_file_crc32(mapped.socket, mapped.uri, f.size)
    except RuntimeError as e:
        raise JvmCheckpointIOError(f"ttlstate store {what} cannot be read to check it whole: {e}") from None
    return whole_file_problem(whole, f)


def whole_file_problem(whole: tuple[int, int] | str, f: SstFile) -> str | None:
    """What the read of `f`'s checkpoint file whole found wrong with it (the native side's answer:
    its size and checksum, or what kept it from being read); None: nothing."""
    if isinstance(whole, str):
        return whole
    return _compare(min(whole[0], f.size), whole[1], f)  # bytes appended after it are read past


def check_copy(place: InPlace, f: SstFile, store_id: str) -> str | None:
    """What is wrong with the checkpoint's copy of `f` in `place`, read whole; None: nothing."""
    source = place.source(f.name)
    if place.socket is None:
        return _check(LinkedFile(source, f))
    return _check_mapped(MappedFile(place.socket, source, f), f"{store_id}: SST file {source}")


@dataclass(frozen=True)
class SstReads:
    """Reads of a local DB's SST files (that RocksDB's block cache missed) since last taken."""

    in_place: int = 0  # of checkpoint files: placeholders (restored or evicted) and links
    in_place_bytes: int = 0
    local: int = 0  # of the local disk
    local_bytes: int = 0


def take_sst_reads(directory: str) -> SstReads:
    """The reads of the SST files in the local DB directory since the last call."""
    native = native_module()
    return SstReads(*native.take_mapped_reads(directory)) if native is not None else SstReads()


def forget_placed(directory: str) -> None:
    """The local DB directory `directory` is being removed: its placeholders are forgotten."""
    native = native_module()
    if native is not None:
        native.forget_mapped_files(directory)


def link_in_place(source: str, local: str, f: SstFile) -> bool:
    """Links `local` to the checkpoint's `source` when it has the size the manifest recorded;
    False when it has another (the caller copies it, which truncates appended bytes or names
    the damage). FileNotFoundError when it is missing."""
    if os.stat(source).st_size != f.size:
        return False
    os.symlink(source, local)
    return True


class InPlaceCheck:
    """The whole checksum of each file a restore linked, read in a background thread."""

    def __init__(self, store_id: str, version: int, files: list[LinkedFile]) -> None:
        self.version = version
        self.names = frozenset(linked.file.name for linked in files)
        self._store_id = store_id
        self._files = files
        self._done = threading.Event()
        self.damaged: dict[str, str] = {}  # checkpoint file name -> what is wrong with it
        self._thread = threading.Thread(target=self._run, name=f"ttlstate-in-place-check-{store_id}",
                                        daemon=True)
        self._thread.start()

    @property
    def done(self) -> bool:
        return self._done.is_set()

    def wait(self) -> None:
        self._done.wait()

    def _run(self) -> None:
        try:
            crash_point("in-place-check")  # tests only: a check still running when a retry comes
            for linked in self._files:
                problem = _check(linked)
                if problem is not None:
                    self.damaged[linked.file.name] = problem
                    log.warning("ttlstate store %s: SST file %s, read in place since the restore of "
                                "version %d, %s; the next load passes over every snapshot naming it",
                                self._store_id, linked.source, self.version, problem)
        finally:
            self._done.set()


def _check(linked: LinkedFile) -> str | None:
    f = linked.file
    try:
        size = os.path.getsize(linked.source)
        crc = file_crc32(linked.source)  # zlib.crc32 releases the GIL on its 1 MiB chunks
    except OSError as e:
        return f"cannot be read ({e})"
    return _compare(size, crc, f)


def _compare(size: int, crc: int, f: SstFile) -> str | None:
    if size != f.size:
        return f"has {size} bytes where its snapshot recorded {f.size}: truncated or replaced"
    if crc != f.crc32:
        return "has other bytes than its snapshot recorded (checksum mismatch): corrupt or replaced"
    return None
