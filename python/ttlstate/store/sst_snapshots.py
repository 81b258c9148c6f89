"""One store's SST snapshots (checkpoint/sst_manifest.py): which SST files of the local DB are
already in the checkpoint, uploading the others, placing a snapshot's files into an empty DB
directory, and which uploaded files no snapshot names any more.

The local DB's SST files are immutable and named by number, so a file uploaded once is never
uploaded again while the DB lives; a DB restored from a snapshot starts out knowing all of its
files are there. Each local DB (each lineage) uploads under its own random token, so two
writers of one store (a retried task, a second driver) never overwrite each other's files.
"""

from __future__ import annotations

import logging
import os
import secrets
import threading
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass

from ttlstate.checkpoint import names
from ttlstate.checkpoint.errors import CheckpointError, SnapshotFilesUnusable
from ttlstate.checkpoint.record_file import KIND_SNAPSHOT, SST_MANIFEST_FORMAT, RecordFileError
from ttlstate.checkpoint.sst_manifest import (
    SstFile,
    SstManifest,
    file_crc32,
    is_sst_file,
    read_manifest,
    split_checkpoint,
    sst_file_name,
)
from ttlstate.engine.select import native_module
from ttlstate.store.in_place import (
    InPlace,
    InPlaceCheck,
    LinkedFile,
    MappedCheck,
    MappedFile,
    check_copy,
    is_placed,
    link_in_place,
    place_mapped,
)
from ttlstate.store.store_files import StoreFiles

log = logging.getLogger(__name__)

# An SST file no snapshot names is deleted only once it has been seen so for this long: a
# writer uploads a snapshot's files before the snapshot itself, so an upload in progress (this
# provider's or another writer's) looks just like that.
ORPHAN_GRACE_S = 600.0


@dataclass(frozen=True)
class PreparedUpload:
    """A checkpoint directory of the local DB, and what of it the checkpoint already holds."""

    directory: str
    token: str
    known: dict[str, SstFile]  # by local SST name: those already uploaded
    ssts: list[str]
    small: list[str]
    keys: int


class SstSnapshots:
    def __init__(self, files: StoreFiles) -> None:
        self._files = files
        self._mu = threading.Lock()
        self._token = secrets.token_hex(6)
        self._uploaded: dict[str, SstFile] = {}  # by local name, of the current local DB
        self._named: dict[str, frozenset[str]] = {}  # snapshot file -> the SST files it names
        self._orphan_since: dict[str, float] = {}
        self.grace_s = ORPHAN_GRACE_S
        # Files read in place (in_place.py): their background checks, and the checkpoint files
        # they found damaged, which no restore or snapshot uses again.
        self._checks: list[InPlaceCheck] = []
        self.damaged: dict[str, str] = {}
        # The placeholders the last restore opened (in_place.py), checked whole only on demand.
        self._mapped: MappedCheck | None = None

    # -- the local DB's lineage -------------------------------------------------------------
    def new_lineage(self, manifest: SstManifest | None = None) -> None:
        """A new local DB: built from nothing or record files (no file of it is uploaded), or
        opened from `manifest`'s files (all of them are)."""
        with self._mu:
            self._token = secrets.token_hex(6)
            self._uploaded = {f.local: f for f in manifest.ssts} if manifest else {}
            if manifest is None:
                self._mapped = None

    # -- writing a snapshot -----------------------------------------------------------------
    def prepare(self, directory: str, keys: int) -> PreparedUpload:
        """Called with the store held, right after the checkpoint of the version was taken."""
        ssts, small = split_checkpoint(directory)
        with self._mu:
            return PreparedUpload(directory, self._token, dict(self._uploaded), ssts, small, keys)

    def upload(self, prepared: PreparedUpload, version: int, snapshot_name: str) -> SstManifest:
        """Uploads the SST files the checkpoint does not hold yet (without holding the store);
        returns the manifest naming them all."""
        files: list[SstFile] = []
        # A file uploaded before may have been deleted since (another writer's retention, once no
        # snapshot named it): a manifest must never name a file that is not there.
        present = set(self._files.location.list_files()) if prepared.known else set()
        # A file read in place is named again only once its check found it whole.
        known_names = frozenset(f.name for f in prepared.known.values())
        self._collect(lambda check: bool(check.names & known_names))
        for local in prepared.ssts:
            known = prepared.known.get(local)
            if known is not None and known.name in self.damaged:
                raise CheckpointError(self._files.store_id, version, snapshot_name,
                                      f"is not written: the local DB reads SST file "
                                      f"{self._files.describe(known.name)}, which "
                                      f"{self.damaged[known.name]}; the next load repairs the state")
            if known is None or known.name not in present:
                path = os.path.join(prepared.directory, local)
                if is_placed(path):  # read in place: the checkpoint's file was all there was
                    where = known.name if known is not None else local
                    raise CheckpointError(self._files.store_id, version, snapshot_name,
                                          f"is not written: the local DB reads SST file "
                                          f"{self._files.describe(where)} in place, and it was "
                                          "deleted from the checkpoint; the next load rebuilds the state")
                name = known.name if known is not None else sst_file_name(prepared.token, local)
                known = SstFile(local, name, os.path.getsize(path), file_crc32(path))
                self._files.upload(path, known.name)
            files.append(known)
        small = []
        for local in prepared.small:
            with open(os.path.join(prepared.directory, local), "rb") as f:
                small.append((local, f.read()))
        return SstManifest(tuple(files), tuple(small), prepared.keys)

    def uploaded_files(self) -> dict[str, SstFile]:
        """The local DB's files the checkpoint holds, by local name."""
        with self._mu:
            return dict(self._uploaded)

    def published(self, snapshot_name: str, prepared: PreparedUpload, manifest: SstManifest) -> None:
        """The snapshot naming `manifest` is in the checkpoint now."""
        with self._mu:
            if prepared.token == self._token:  # the same local DB still: these are its files now
                self._uploaded = {f.local: f for f in manifest.ssts}
            self._named[snapshot_name] = manifest.names

    # -- restoring one ----------------------------------------------------------------------
    def place(self, manifest: SstManifest, db_dir: str, version: int, snapshot_name: str,
              in_place: InPlace | None = None) -> int:
        """Places the snapshot's files into the empty directory `db_dir`: fetched and checked
        whole, or (`in_place`) read where they lie (in_place.py): linked when their size is
        right and checked whole in the background, or placeholders read through the shim.
        Returns how many are read in place."""
        os.makedirs(db_dir, exist_ok=True)
        # Restoring files an earlier restore linked, whose check still runs: that restore failed
        # or was dropped, maybe on one of them. Its finding decides, not a second try at them.
        self._collect(lambda check: bool(check.names & manifest.names))
        linked: list[LinkedFile] = []
        mapped: list[MappedFile] = []
        self._mapped = None
        present = self._present(manifest) if in_place is not None and in_place.socket is not None else set()
        for f in manifest.ssts:
            if f.name in self.damaged:
                raise SnapshotFilesUnusable(
                    self._files.store_id, version, snapshot_name,
                    f"names SST file {self._files.describe(f.name)}, which {self.damaged[f.name]}")
            local = os.path.join(db_dir, f.local)
            try:
                if in_place is not None and in_place.socket is not None:
                    if f.name not in present:
                        raise FileNotFoundError(f.name)
                    mapped.append(MappedFile(in_place.socket, in_place.source(f.name), f))
                    place_mapped(in_place.socket, in_place.source(f.name), local, f)
                    continue
                if in_place is not None:
                    source = in_place.source(f.name)
                    if link_in_place(source, local, f):
                        linked.append(LinkedFile(source, f))
                        continue
                self._files.location.fetch(f.name, local)
            except FileNotFoundError:
                raise SnapshotFilesUnusable(
                    self._files.store_id, version, snapshot_name,
                    f"names SST file {self._files.describe(f.name)}, which is missing") from None
            size = os.path.getsize(local)
            if size > f.size and _intact_prefix(local, f):
                log.warning("ttlstate store %s: SST file %s has %d bytes after the %d its snapshot %s "
                            "recorded (appended by another writer or a copy tool?): they are ignored; "
                            "the file before them verifies", self._files.store_id,
                            self._files.describe(f.name), size - f.size, f.size, snapshot_name)
                os.truncate(local, f.size)
                size = f.size
            if size != f.size or file_crc32(local) != f.crc32:
                found = f"{size} bytes" if size != f.size else "other bytes (checksum mismatch)"
                raise SnapshotFilesUnusable(
                    self._files.store_id, version, snapshot_name,
                    f"names SST file {self._files.describe(f.name)} with {f.size} bytes; it has "
                    f"{found}: truncated, corrupt or replaced")
        for local, data in manifest.small:
            with open(os.path.join(db_dir, local), "wb") as out:
                out.write(data)
        with self._mu:
            self._named[snapshot_name] = manifest.names
        if linked:
            check = InPlaceCheck(self._files.store_id, version, linked)
            with self._mu:
                self._checks.append(check)
            log.info("ttlstate store %s: version %d opened on %d SST files (%d bytes) of %s in "
                     "place; their checksums are read in the background", self._files.store_id,
                     version, len(linked), sum(f.file.size for f in linked), snapshot_name)
        if mapped:
            self._mapped = MappedCheck(self._files.store_id, version, mapped)
            log.info("ttlstate store %s: version %d opened on %d SST files (%d bytes) of %s in place, "
                     "read through the shim", self._files.store_id, version, len(mapped),
                     sum(m.file.size for m in mapped), snapshot_name)
        return len(linked) + len(mapped)

    def restored_in_place(self) -> tuple[MappedFile, ...]:
        """The placeholders the last restore opened, unless a check read them since."""
        check = self._mapped
        return check.files if check is not None else ()

    def found_whole(self, name: str) -> None:
        """A read of the checkpoint's SST file `name` whole found it intact (local_fill.py): a
        retry of the restore need not read it again."""
        with self._mu:
            if self._mapped is not None:
                self._mapped = self._mapped.without(name)

    def record_damage(self, name: str, problem: str) -> None:
        """A read of the checkpoint's SST file `name` whole found `problem` (local_fill.py): the
        next load passes over every snapshot naming it."""
        with self._mu:
            self.damaged[name] = problem

    def _present(self, manifest: SstManifest) -> set[str]:
        """The manifest's files the checkpoint holds, from the load's listing (no remote call per
        file), listed afresh when it lacks any (it holds no SST file this provider uploaded)."""
        listing = set(self._files.listing(refresh=False))
        if not manifest.names <= listing:
            listing = set(self._files.listing(refresh=True))
        return listing & manifest.names

    def found_damaged(self, manifest: SstManifest, version: int, snapshot_name: str,
                      failure: str) -> SnapshotFilesUnusable | None:
        """The error for RocksDB's finding (`failure`, while a load opened or built on the DB)
        that a file read in place is corrupt; None if it is not about a file of `manifest`.
        RocksDB names the file by its local name, or not at all (a bad properties block): then
        the restore's check, waited for, names it."""
        if "Corruption" not in failure:
            return None
        named = [f for f in manifest.ssts
                 if f"{os.sep}{f.local} " in failure or failure.endswith(f"{os.sep}{f.local}")]
        with self._mu:
            for f in named:
                self.damaged[f.name] = f"RocksDB found corrupt reading it in place ({failure})"
        if not named:
            self._collect(lambda check: check.version == version and bool(check.names & manifest.names))
            self._check_mapped(lambda check: check.version == version)
            named = [f for f in manifest.ssts if f.name in self.damaged]
        if not named:
            return None
        return SnapshotFilesUnusable(
            self._files.store_id, version, snapshot_name,
            f"names SST file {self._files.describe(named[0].name)}, which {self.damaged[named[0].name]}")

    def damage_found(self, loading: int, local: int | None) -> bool:
        """Whether the local DB may read a file a background check found damaged (the caller
        drops the DB: the load repairs). Loading the version a restore opened in place, which
        the DB still holds (a retried task), waits for that restore's check."""
        if not self._checks and not self.damaged and self._mapped is None:  # every load asks: no work
            return False
        def retried(check: InPlaceCheck | MappedCheck) -> bool:
            return local is not None and local == loading == check.version
        self._collect(retried)
        self._check_mapped(retried)
        with self._mu:
            return any(f.name in self.damaged for f in self._uploaded.values())

    def corruption_found(self, directory: str, place_of: Callable[[], InPlace | None]) -> bool:
        """Whether RocksDB found a file of the local DB `directory` corrupt since the last load
        (the read or write of a batch that failed: native, corruptions.h); the caller drops the
        DB and the load restores from the checkpoint. A file of the checkpoint's read in place
        (a restored placeholder or link, an evicted file) has its copy read whole first: a
        damaged one is passed over by that load, as when a restore's check finds it, so a
        retried task repairs instead of reading the damage again."""
        native = native_module()
        found = native.take_corruptions(directory) if native is not None else []
        place = place_of() if found else None
        store_id = self._files.store_id
        for path, message in found:
            with self._mu:
                f = self._uploaded.get(os.path.basename(path))
            problem = check_copy(place, f, store_id) if f is not None and place is not None else None
            if f is None or problem is None:
                log.warning("ttlstate store %s: RocksDB found %s corrupt (%s); the local state is "
                            "restored from the checkpoint", store_id, path, message)
                continue
            with self._mu:
                self.damaged[f.name] = f"{problem} (RocksDB found it corrupt reading it: {message})"
            log.warning("ttlstate store %s: SST file %s, read in place, %s; the next load passes over "
                        "every snapshot naming it", store_id, self._files.describe(f.name), problem)
        return bool(found)

    @staticmethod
    def corruption_handled(directory: str) -> None:
        """A load of the local DB in `directory` succeeded: what corruption it met, it repaired
        (or it would have failed), so that is no news to the next load."""
        native = native_module()
        if native is not None:
            native.take_corruptions(directory)

    def _collect(self, wait_for: Callable[[InPlaceCheck], bool]) -> None:
        """Takes the findings of the checks that are done, and of those `wait_for` picks once
        they are (waited for without holding the lock: a snapshot's upload and a load may both)."""
        with self._mu:
            running = [c for c in self._checks if not c.done and wait_for(c)]
        for check in running:
            check.wait()
        with self._mu:
            for check in [c for c in self._checks if c.done]:
                self._checks.remove(check)
                self.damaged.update(check.damaged)

    def _check_mapped(self, wanted: Callable[[MappedCheck], bool]) -> None:
        """Reads the last restore's placeholders' files whole when `wanted` says so, once."""
        check = self._mapped
        if check is None or not wanted(check):
            return
        damaged = check.run()  # not under the lock: it reads the whole files
        with self._mu:
            self.damaged.update(damaged)
            if self._mapped is check:
                self._mapped = None

    # -- retention --------------------------------------------------------------------------
    def deletable(self, listing: list[str], now: float | None = None) -> list[str]:
        """The SST files of `listing` (the store's files, after a cleanup) that no snapshot in it
        names and that have been so for `grace_s`. Deletes nothing when a snapshot cannot be
        read (it might name any of them)."""
        if not any(map(is_sst_file, listing)):
            return []
        now = time.monotonic() if now is None else now
        snapshots = [f for f in names.parse_all(listing) if f.kind == names.SNAPSHOT]
        named: set[str] = set()
        for f in snapshots:
            with self._mu:
                known = self._named.get(f.name)
            if known is None:
                known = self._names_in(f.name, f.version)
                if known is None:
                    return []
                with self._mu:
                    self._named[f.name] = known
            named |= known
        with self._mu:
            live = {f.name for f in snapshots}
            self._named = {k: v for k, v in self._named.items() if k in live}
            orphans = {n for n in listing if is_sst_file(n) and n not in named}
            self._orphan_since = {n: self._orphan_since.get(n, now) for n in orphans}
            return sorted(n for n, since in self._orphan_since.items() if now - since >= self.grace_s)

    def deleted(self, doomed: list[str]) -> None:
        with self._mu:
            for n in doomed:
                self._orphan_since.pop(n, None)

    def _names_in(self, snapshot_name: str, version: int) -> frozenset[str] | None:
        try:
            local, header = self._files.fetch_verified(snapshot_name, KIND_SNAPSHOT, version)
        except CheckpointError:
            return None
        try:
            if header.format != SST_MANIFEST_FORMAT:
                return frozenset()
            return read_manifest(local, header).names
        except RecordFileError:
            return None
        finally:
            os.unlink(local)


def _intact_prefix(path: str, f: SstFile) -> bool:
    """Whether the first `f.size` bytes of `path` are the file its manifest recorded."""
    crc, remaining = 0, f.size
    with open(path, "rb") as src:
        while remaining:
            chunk = src.read(min(1 << 20, remaining))
            if not chunk:
                return False
            crc = zlib.crc32(chunk, crc)
            remaining -= len(chunk)
    return crc == f.crc32
