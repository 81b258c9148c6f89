"""The state data source's change feed: the records of one version's changelog, as written (a
store with column families logs every put, delete and append in the order made, as Spark's
RocksDB provider does, so its feed is Spark's).

On checkpoint format 2 a version's changelog is named by its checkpoint id, found by following
the lineage recorded in the changelogs from a later (version, id) down to it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

from ttlstate.checkpoint import names
from ttlstate.checkpoint.errors import VersionNotFound
from ttlstate.checkpoint.id_plan import EMPTY
from ttlstate.checkpoint.record_file import KIND_CHANGELOG, Operation
from ttlstate.checkpoint.record_reader import read_operations
from ttlstate.store.column_families import family_prefix
from ttlstate.store.context import StoreContext


def changelog_records(ctx: StoreContext, version: int, end: tuple[int, str] | None = None,
                      family: str | None = None) -> Iterator[Operation]:
    """The records of the changelog of `version` with their ops in file order, after verifying the whole file
    and that it is this store's. `end`: on checkpoint format 2, the (version, id) whose lineage
    names the changelog to read. `family`: only the records of that column family (a store with
    column families: its keys as stored, behind the family's name), as Spark's RocksDB provider
    reads one family's changes."""
    prefix = family_prefix(family) if family is not None else b""
    with ctx.lock:
        name = names.changelog_name(version, _id_on_lineage(ctx, version, end) if end else "")
        local, header = ctx.files.fetch_verified(name, KIND_CHANGELOG, version)
    try:
        for op, key, value in read_operations(local, header):
            if key.startswith(prefix):
                yield op, key, value
    finally:
        os.unlink(local)


def _id_on_lineage(ctx: StoreContext, version: int, end: tuple[int, str]) -> str:
    """Format 2: the checkpoint id of `version` on the lineage of `end` (version, id)."""
    at, at_id = end
    while at > version:
        name = names.changelog_name(at, at_id)
        local, header = ctx.files.fetch_verified(name, KIND_CHANGELOG, version)
        os.unlink(local)
        older = [(v, i) for v, i in header.lineage or () if i != EMPTY]
        for v, i in older:
            if v == version:
                return i
        if not older:
            break
        at, at_id = older[-1]
    if at == version:
        return at_id
    raise VersionNotFound(ctx.store_id, version, names.changelog_name(version, "<id>"),
                          f"is not on the lineage of version {end[0]} ({end[1]})")
