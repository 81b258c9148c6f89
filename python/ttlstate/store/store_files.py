"""One store's files in its checkpoint folder, as its provider reads and writes them.

The listing is cached between loads (a listing is a round trip to the checkpoint's file
system) and kept up to date with what this provider publishes and deletes. A fetched file is
verified whole, and checked to be this store's and this version's, before anything reads it.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager

from ttlstate.checkpoint import names
from ttlstate.checkpoint.errors import CheckpointError, VersionNotFound
from ttlstate.checkpoint.identity import FileIdentity
from ttlstate.checkpoint.location import CheckpointLocation
from ttlstate.checkpoint.record_file import (
    RecordFileError,
    RecordFileHeader,
    intact_length,
    verify_record_file,
)
from ttlstate.store.planes.base import Fetched

log = logging.getLogger(__name__)


class StoreFiles:
    def __init__(self, store_id: str, query_id: str | None, location: CheckpointLocation,
                 staging: str) -> None:
        self.store_id = store_id
        self.query_id = query_id
        self.location = location
        self.staging = staging
        os.makedirs(staging, mode=0o700, exist_ok=True)
        self._listed: set[str] | None = None

    def describe(self, name: str) -> str:
        """The file's full path or URI, for messages."""
        return self.location.describe(name)

    def staging_path(self, name: str) -> str:
        return os.path.join(self.staging, name)

    def listing(self, refresh: bool) -> list[str]:
        """The store's file names, sorted; `refresh`: list again instead of the cached listing."""
        if refresh or self._listed is None:
            self._listed = set(self.location.list_files())
        return sorted(self._listed)

    def listed(self, name: str) -> bool:
        """Whether the cached listing holds `name` (listing first if there is none yet)."""
        return name in self.listing(refresh=False)

    @contextmanager
    def staged(self) -> Iterator[list[Fetched]]:
        """The (name, local path, header) of the checkpoint files a load attempt fetched into
        the staging directory; removed when the attempt ends, whatever its outcome."""
        fetched: list[Fetched] = []
        try:
            yield fetched
        finally:
            for _name, local_path, _header in fetched:
                if os.path.exists(local_path):
                    os.unlink(local_path)

    def fetch_verified(self, name: str, kind: bytes, version: int) -> tuple[str, RecordFileHeader]:
        """Fetches `name` into staging and verifies it (`version`: the one being loaded, for
        messages); returns the local path and the header."""
        local = self.staging_path(name)
        try:
            self.location.fetch(name, local)
        except FileNotFoundError:
            raise VersionNotFound(self.store_id, version, name, "is missing") from None
        try:
            header = self._verified(local, name, kind)
        except RecordFileError as e:
            os.unlink(local)
            raise CheckpointError(self.store_id, version, name, str(e)) from None
        parsed = names.parse(name)
        expected = FileIdentity(self.store_id, kind, parsed.version if parsed else -1, self.query_id)
        wrong = expected.mismatch(FileIdentity.of(header))
        if wrong:
            os.unlink(local)
            raise CheckpointError(self.store_id, version, name,
                                  f"({self.describe(name)}) {wrong}: it was copied or "
                                  "moved here from another place; restore this store's own file")
        return local, header

    def _verified(self, local: str, name: str, kind: bytes) -> RecordFileHeader:
        """The header of the fetched file `local`, verified whole. A file with bytes appended
        after its end is read up to that end (the local copy is cut there; the checkpoint's file
        stays as it is), with a WARN: everything the file is verifies, what follows is not its."""
        try:
            return verify_record_file(local, kind)
        except RecordFileError:
            end = intact_length(local)
            if end is None:
                raise
            extra = os.path.getsize(local) - end
            log.warning("ttlstate store %s: checkpoint file %s has %d bytes after its end (appended "
                        "by another writer or a copy tool?): they are ignored; the file before them "
                        "verifies", self.store_id, self.describe(name), extra)
            os.truncate(local, end)
            return verify_record_file(local, kind)

    def publish(self, local: str, name: str) -> None:
        """Makes the local file `local` the checkpoint file `name` (atomically), then removes
        the local file, whatever the outcome."""
        try:
            self.location.publish(local, name)
        finally:
            os.unlink(local)
        if self._listed is not None:
            self._listed.add(name)

    def upload(self, local: str, name: str) -> None:
        """`publish` without holding the store: the cached listing (which the store's lock guards)
        is left alone, so only for files no restore plan lists (SST files; retention lists afresh)."""
        try:
            self.location.publish(local, name)
        finally:
            os.unlink(local)

    def delete(self, doomed: list[str]) -> None:
        self.location.delete(doomed)
        if self._listed is not None:
            self._listed.difference_update(doomed)
