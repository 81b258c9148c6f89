"""Where a store's durable files live.

The store only reads and writes local files; a `CheckpointLocation` moves them. Embedded use
and tests use `LocalCheckpointLocation`; the state server uses one whose operations are calls
back into the JVM shim, which uses Hadoop's FileSystem so HDFS, S3A, ABFS and GCS work.
"""

from __future__ import annotations

import os
import shutil
import uuid
from typing import Protocol


class CheckpointLocation(Protocol):
    def list_files(self) -> list[str]: ...

    def fetch(self, name: str, local_path: str) -> None:
        """Copy `name` to `local_path`; FileNotFoundError naming the file if it is missing."""

    def publish(self, local_path: str, name: str) -> None:
        """Make `name` durable with the content of `local_path`, atomically, overwriting."""

    def delete(self, names: list[str]) -> None: ...

    def describe(self, name: str) -> str:
        """The file's full path or URI, for error messages."""


def _checksum_name(name: str) -> str:
    """The checksum file Hadoop's local file system keeps beside `name` when it wrote it."""
    return f".{name}.crc"


class LocalCheckpointLocation:
    """A checkpoint folder on a local (or mounted) file system, read and written directly.

    The state server uses it for `file:` checkpoints (`checkpoint.localFiles`): as Hadoop's
    local file system sees them, minus its cost per file. Names starting with a dot are not
    listed (Hadoop's `.crc` files, temporary files); a `.crc` that Hadoop wrote for a file
    this replaces or deletes goes with it, so a later read through Hadoop never checks the new
    content against the old checksum. The folder is created by the first publish, not before
    (a state reader's load must not create folders in a checkpoint)."""

    def __init__(self, directory: str) -> None:
        self.directory = directory

    def list_files(self) -> list[str]:
        try:
            names = os.listdir(self.directory)
        except FileNotFoundError:
            return []
        return [n for n in names
                if not n.startswith(".") and os.path.isfile(os.path.join(self.directory, n))]

    def fetch(self, name: str, local_path: str) -> None:
        src = os.path.join(self.directory, name)
        try:
            shutil.copyfile(src, local_path)
        except FileNotFoundError:
            if os.path.exists(src):
                raise  # the local side is what is missing
            raise FileNotFoundError(f"checkpoint file {src} does not exist") from None

    def publish(self, local_path: str, name: str) -> None:
        os.makedirs(self.directory, exist_ok=True)
        # Created as any file is (the umask's mode, as Hadoop's would be), not mkstemp's 0600:
        # another user's state reader must be able to read the checkpoint.
        tmp = os.path.join(self.directory, f".{name}.{uuid.uuid4().hex}.tmp")
        try:
            shutil.copyfile(local_path, tmp)
            with open(tmp, "rb+") as f:
                os.fsync(f.fileno())
            self._remove_checksum(name)
            os.replace(tmp, os.path.join(self.directory, name))
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise

    def describe(self, name: str) -> str:
        return os.path.abspath(os.path.join(self.directory, name))

    def delete(self, names: list[str]) -> None:
        for name in names:
            try:
                os.unlink(os.path.join(self.directory, name))
            except FileNotFoundError:
                pass
            self._remove_checksum(name)

    def _remove_checksum(self, name: str) -> None:
        try:
            os.unlink(os.path.join(self.directory, _checksum_name(name)))
        except FileNotFoundError:
            pass
