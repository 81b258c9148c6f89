"""Errors of the checkpoint layer; each names the file and the version it concerns."""

from __future__ import annotations


class CheckpointError(RuntimeError):
    """A checkpoint file is missing, truncated or corrupt; the load is refused as a whole."""

    def __init__(self, store_id: str, version: int, file_name: str, reason: str) -> None:
        self.store_id = store_id
        self.version = version
        self.file_name = file_name
        super().__init__(
            f"ttlstate store {store_id}: cannot load version {version}: "
            f"checkpoint file {file_name} {reason}")


class VersionNotFound(CheckpointError):
    """The requested version does not exist in the checkpoint (Spark says 'does not exist')."""

    def __init__(self, store_id: str, version: int, file_name: str, reason: str = "") -> None:
        super().__init__(store_id, version, file_name,
                         reason or "does not exist (version does not exist in the checkpoint)")
