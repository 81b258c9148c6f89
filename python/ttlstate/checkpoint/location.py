"""Where a store's durable files live.

The store only reads and writes local files; a `CheckpointLocation` moves them. Embedded use
and tests use `LocalCheckpointLocation`; the state server uses one whose operations are calls
back into the JVM shim, which uses Hadoop's FileSystem so HDFS, S3A, ABFS and GCS work.
"""

from __future__ import annotations

import os
import shutil
import tempfile
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


class LocalCheckpointLocation:
    def __init__(self, directory: str) -> None:
        self.directory = directory
        os.makedirs(directory, exist_ok=True)

    def list_files(self) -> list[str]:
        return [n for n in os.listdir(self.directory)
                if os.path.isfile(os.path.join(self.directory, n))]

    def fetch(self, name: str, local_path: str) -> None:
        src = os.path.join(self.directory, name)
        if not os.path.exists(src):
            raise FileNotFoundError(f"checkpoint file {src} does not exist")
        shutil.copyfile(src, local_path)

    def publish(self, local_path: str, name: str) -> None:
        fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=self.directory)
        os.close(fd)
        try:
            shutil.copyfile(local_path, tmp)
            with open(tmp, "rb+") as f:
                os.fsync(f.fileno())
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
