"""Which store, query, kind and version a checkpoint file belongs to.

Every record file carries its identity in its header, and a load compares it with the place
the file was found in: a valid file of another partition, operator, query or version (a
botched manual recovery, a copy tool, two queries sharing a checkpoint path) is refused
instead of silently mixing another store's rows into this one.
"""

from __future__ import annotations

from dataclasses import dataclass

from ttlstate.checkpoint.record_file import KIND_CHANGELOG, RecordFileHeader

_KIND_NAMES = {KIND_CHANGELOG: "changelog"}


def store_label(operator_id: int | str, partition_id: int | str, store_name: str) -> str:
    """The store id written into every file header (and shown in every error message)."""
    return f"op={operator_id},part={partition_id},store={store_name}"


def _kind_name(kind: bytes) -> str:
    return _KIND_NAMES.get(kind, "snapshot")


@dataclass(frozen=True)
class FileIdentity:
    store_id: str
    kind: bytes
    version: int
    query_id: str | None = None  # None: unknown, not compared

    def describe(self) -> str:
        query = f", query {self.query_id}" if self.query_id else ""
        return f"the {_kind_name(self.kind)} of version {self.version} of store {self.store_id}{query}"

    @classmethod
    def of(cls, header: RecordFileHeader) -> FileIdentity:
        return cls(header.store_id, header.kind, header.version, header.query_id)

    def mismatch(self, claimed: FileIdentity) -> str | None:
        """None if `claimed` (a file's header) may be loaded as `self`; else why not."""
        differs = (claimed.store_id != self.store_id or claimed.kind != self.kind
                   or claimed.version != self.version
                   or (self.query_id is not None and claimed.query_id is not None
                       and claimed.query_id != self.query_id))
        if not differs:
            return None
        return f"is {claimed.describe()}, but {self.describe()} was expected"
