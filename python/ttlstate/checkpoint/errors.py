"""Errors of the checkpoint layer; each names the file and the version it concerns."""

from __future__ import annotations

from ttlstate.errors import ERR_VERSION_NOT_FOUND, CheckpointFileError


class CheckpointError(CheckpointFileError):
    """A checkpoint file is missing, truncated or corrupt; the load is refused as a whole."""

    def __init__(self, store_id: str, version: int, file_name: str, reason: str,
                 where: str | None = None) -> None:
        self.store_id = store_id
        self.version = version
        self.file_name = file_name
        self.reason = reason
        self.where = where  # the file's full path or URI, once known
        super().__init__(
            f"ttlstate store {store_id}: cannot load version {version}: "
            f"checkpoint file {where or file_name} {reason}")

    def located(self, where: str) -> CheckpointError:
        """The same error, naming the file by its full path (an operator must find it)."""
        located = type(self).__new__(type(self))
        CheckpointError.__init__(located, self.store_id, self.version, self.file_name, self.reason,
                                 where)
        return located


class VersionNotFound(CheckpointError):
    """The requested version does not exist in the checkpoint (Spark says 'does not exist')."""

    code = ERR_VERSION_NOT_FOUND

    def __init__(self, store_id: str, version: int, file_name: str, reason: str = "") -> None:
        super().__init__(store_id, version, file_name,
                         reason or "does not exist (version does not exist in the checkpoint)")


class SnapshotFilesUnusable(CheckpointError):
    """An SST snapshot names a file the checkpoint no longer holds, or holds with other bytes:
    the snapshot is unusable, a load falls back to an older base (see sst_manifest.py)."""
