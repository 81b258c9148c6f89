"""Which checkpoint states the local version descends from: the snapshots this writer trusts,
and on checkpoint format 2 the (version, checkpoint id) lineage its next commit records.

A snapshot is trusted when it holds this writer's timeline (it wrote it, or a load checked it
against the changelog after it): retention counts back only to trusted snapshots and deletes
only the files older than them, so the changelogs that rebuild the versions a snapshot of
another attempt claims to hold are never deleted. Format 2 records each commit's lineage in
its changelog, down to the first trusted snapshot (checkpoint/id_plan.py reads it).
"""

from __future__ import annotations

from ttlstate.checkpoint.id_plan import EMPTY, FORMAT1

Lineage = tuple[tuple[int, str], ...]  # (version, checkpoint id), newest first


class Timeline:
    def __init__(self) -> None:
        self.trusted: set[int] = set()  # versions of trusted snapshots
        self.v2_lineage: Lineage = ()  # of the local version
        self.state_format1 = False  # the local version's state id is a format 1 fingerprint
        # (new id, base id) of the last commit, format 2 (Spark's StateStoreCheckpointInfo)
        self.last_commit_ids: tuple[str | None, str | None] = (None, None)

    def newest_trusted(self, version: int) -> int:
        """The newest trusted snapshot at or below `version` (0: none)."""
        return max((v for v in self.trusted if v <= version), default=0)

    def opened_empty(self) -> None:
        self.v2_lineage = ()
        self.trusted.clear()

    def loaded(self, version: int, base_version: int, base_trusted: bool) -> None:
        """A load built `version` on `base_version`: snapshots above it hold other timelines."""
        self.trusted = {v for v in self.trusted if v <= version}
        if base_trusted:
            self.trusted.add(base_version)

    def loaded_lineage(self, v2_lineage: Lineage, format1: bool) -> None:
        self.v2_lineage, self.state_format1 = v2_lineage, format1

    def commit_lineage(self, version: int, state_id: str | None) -> list[tuple[int, str]]:
        """Format 2: the lineage a commit on `version` (whose state is `state_id`) records,
        newest first, down to the first snapshot this writer trusts, or to the empty state."""
        if self.state_format1 and state_id:
            full = [(version, FORMAT1)]  # built on format 1 files: found by version alone
        else:
            full = [(version, state_id or EMPTY), *self.v2_lineage]
        for i, (k, kid) in enumerate(full):
            if kid == EMPTY or k in self.trusted:
                return full[: i + 1]
        return full

    def committed(self, new_version: int, new_id: str, base_state: str | None,
                  v2_lineage: list[tuple[int, str]] | None) -> None:
        """A commit made `new_version` (checkpoint id `new_id`, "" on format 1) on the state
        `base_state`."""
        base_id = None if self.state_format1 else base_state  # Spark's id of the base
        self.last_commit_ids = (new_id, base_id) if new_id else (None, None)
        self.state_format1 = not new_id
        if v2_lineage is not None:
            self.v2_lineage = tuple(v2_lineage)
        self.trusted = {v for v in self.trusted if v < new_version}
