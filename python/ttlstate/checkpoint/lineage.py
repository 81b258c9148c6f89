"""Which checkpoint files continue which state: one timeline of a store, on checkpoint format 1.

A version can be committed more than once: Spark re-runs a batch whose commit-log entry is
missing, a retried or zombie task re-commits, and a second driver started on a running query's
checkpoint re-runs batches before Spark stops it. Format 1 names files by version alone, so a
re-commit overwrites `<v>.changelog` and can leave files of the other attempt beside it, above
all a `<v>.snapshot` written from the state the re-commit replaced. A commit never deletes such
files (they may be another writer's committed versions, and deleting them lost state); instead
every file says which state it continues, and a load follows only a consistent chain:

- the *state id* of a version is the fingerprint of its changelog (checksum and length of the
  file), so a deterministic re-run of a batch, which writes the same bytes, keeps the same id;
- a changelog records `parent`, the state id of the version it was written on;
- a snapshot records `state`, the state id of the version it holds.

A base (a snapshot, or the local DB) whose state id is not the parent of the first changelog
after it belongs to another attempt: the load skips it and takes an older base. Two changelogs
that do not chain were written by two writers with different output; Spark's commit log accepts
one timeline, and the files cannot tell which one, so the load goes on as Spark's own providers
do and logs the break. Files written before lineage was recorded carry no ids and are never
judged.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ttlstate.checkpoint.record_file import RecordFileHeader


@dataclass(frozen=True)
class Chain:
    breaks: tuple[int, ...]  # indexes of changelogs whose parent is not the state before them
    state: str | None        # the state id the chain ends in (None: unknown)


def follow(base_state: str | None, changelogs: Sequence[RecordFileHeader]) -> Chain:
    """Walk `changelogs` (in version order) from a base whose state id is `base_state`."""
    breaks: list[int] = []
    state = base_state
    for i, header in enumerate(changelogs):
        if state is not None and header.parent is not None and header.parent != state:
            breaks.append(i)
        state = header.fingerprint
    return Chain(tuple(breaks), state)


def continues(snapshot: RecordFileHeader, changelog: RecordFileHeader) -> bool:
    """Whether `snapshot` holds the state that `changelog` of the same version wrote."""
    return snapshot.state is None or snapshot.state == changelog.fingerprint
