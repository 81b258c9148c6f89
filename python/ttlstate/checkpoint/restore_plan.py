"""Which checkpoint files rebuild version v: the newest snapshot <= v, then changelogs up to v.

Kept apart from I/O so the rule is easy to read and to test.
"""

from __future__ import annotations

from dataclasses import dataclass

from ttlstate.checkpoint import names
from ttlstate.checkpoint.errors import VersionNotFound


@dataclass(frozen=True)
class RestorePlan:
    base_version: int          # state to start from: 0 (empty), the snapshot's, or the local one
    snapshot: str | None       # snapshot file to restore, None to start empty or from local
    changelogs: tuple[str, ...]
    from_local: bool           # replay on top of the local DB instead of wiping it


def plan_restore(store_id: str, files: list[str], version: int,
                 local_version: int | None, skip_snapshots: frozenset[int] = frozenset()
                 ) -> RestorePlan:
    """`skip_snapshots`: snapshots found to hold another attempt's state (see lineage.py)."""
    if version == 0:
        return RestorePlan(0, None, (), False)
    parsed = [f for f in names.parse_all(files) if not f.ckpt_id]  # format 1's files
    changelogs = {f.version for f in parsed if f.kind == names.CHANGELOG}
    snapshots = {f.version for f in parsed if f.kind == names.SNAPSHOT} - skip_snapshots
    if version not in changelogs and version not in snapshots and version not in skip_snapshots:
        held = _ranges(sorted(changelogs | snapshots))
        raise VersionNotFound(store_id, version, names.changelog_name(version),
                              "does not exist (version does not exist in the checkpoint, which "
                              f"holds versions {held or 'none'}: batch ids one lower)")
    if local_version is not None and local_version <= version and all(
            v in changelogs for v in range(local_version + 1, version + 1)):
        return RestorePlan(local_version, None, _changelogs(local_version, version), True)
    base = max((s for s in snapshots if s <= version), default=0)
    missing = [v for v in range(base + 1, version + 1) if v not in changelogs]
    if missing:
        raise VersionNotFound(store_id, version, names.changelog_name(missing[0]),
                              f"is missing (needed to rebuild version {version} from "
                              f"{'snapshot ' + names.snapshot_name(base) if base else 'empty state'})")
    snapshot = names.snapshot_name(base) if base > 0 else None
    return RestorePlan(base, snapshot, _changelogs(base, version), False)


def plan_from_snapshot(store_id: str, files: list[str], snapshot_version: int,
                       version: int) -> RestorePlan:
    """Version `version` rebuilt from exactly `snapshot_version`'s snapshot and the changelogs
    after it (the state data source's snapshotStartBatchId), never from another base."""
    parsed = [f for f in names.parse_all(files) if not f.ckpt_id]
    if version < snapshot_version:
        raise VersionNotFound(store_id, version, names.snapshot_name(snapshot_version),
                              f"cannot be the base of version {version}: it is a later version")
    if snapshot_version == 0:
        snapshot = None
    elif any(f.kind == names.SNAPSHOT and f.version == snapshot_version for f in parsed):
        snapshot = names.snapshot_name(snapshot_version)
    else:
        raise VersionNotFound(store_id, version, names.snapshot_name(snapshot_version),
                              snapshot_missing([f.version for f in parsed if f.kind == names.SNAPSHOT]))
    changelogs = {f.version for f in parsed if f.kind == names.CHANGELOG}
    missing = [v for v in range(snapshot_version + 1, version + 1) if v not in changelogs]
    if missing:
        raise VersionNotFound(store_id, version, names.changelog_name(missing[0]),
                              f"is missing (needed to rebuild version {version} from "
                              f"{names.snapshot_name(snapshot_version)})")
    return RestorePlan(snapshot_version, snapshot, _changelogs(snapshot_version, version), False)


def snapshot_missing(snapshot_versions: list[int]) -> str:
    """Why a snapshotStartBatchId cannot be served, naming those that can."""
    batches = ", ".join(str(v - 1) for v in sorted(set(snapshot_versions))) or "none yet"
    return (f"is missing (the snapshot to replay from; snapshotStartBatchId can be one of the "
            f"batches with a snapshot: {batches})")


def _ranges(versions: list[int]) -> str:
    """1-3,5,7-9"""
    out: list[str] = []
    for v in versions:
        if out and v == int(out[-1].split("-")[-1]) + 1:
            out[-1] = f"{out[-1].split('-')[0]}-{v}"
        else:
            out.append(str(v))
    return ",".join(out)


def _changelogs(after: int, upto: int) -> tuple[str, ...]:
    return tuple(names.changelog_name(v) for v in range(after + 1, upto + 1))


def deletable_files(files: list[str], min_versions_to_retain: int, current: int,
                    trusted_snapshots: set[int]) -> list[str]:
    """Files no longer needed to rebuild any of the `min_versions_to_retain` versions up to
    `current`, the version this writer serves, even if the newest snapshot they would be rebuilt
    from is found damaged later: the files kept reach back to the second-newest snapshot at or
    below the oldest version to retain, so a repair (store/repair.py) can rebuild from that one.
    Retention counts back from `current`, never from the newest file: a file above it may be
    another writer's (a second driver, a zombie task), and counting back from such a file would
    delete what `current` is rebuilt from. Only a snapshot in `trusted_snapshots` (known to hold
    this writer's timeline: see lineage.py) can be the base older files are deleted for."""
    parsed = [f for f in names.parse_all(files) if f.version <= current]
    if not parsed:
        return []
    earliest_to_keep = max(current - min_versions_to_retain + 1, 1)
    snapshots = sorted({f.version for f in parsed if f.kind == names.SNAPSHOT
                        and f.version <= earliest_to_keep and f.version in trusted_snapshots})
    if len(snapshots) < 2:
        return []
    base = snapshots[-2]
    return [f.name for f in parsed if f.version < base or (f.version == base and f.kind == names.CHANGELOG)]
