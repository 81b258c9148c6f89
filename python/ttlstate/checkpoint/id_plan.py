"""Which files rebuild version v committed under checkpoint id X (checkpoint format 2).

On format 2 every commit has a unique id and its files carry it (`<v>_<id>.changelog`), so two
attempts of one version (a retried or speculative task, a zombie, a second driver) never
overwrite each other, and Spark's commit log names the attempt each next batch builds on. Each
changelog records its lineage: the (version, id) of every version below it, newest first, down
to a snapshot its writer had, to the empty state (id ""), or to a version written on format 1
(id "-": a query that moved to format 2 on restart). A load of (v, X) reads
`<v>_<X>.changelog`'s lineage and takes the newest base on it (the local DB if it holds exactly
that version and id, an `<k>_<id>.snapshot`, or the empty state), then the changelogs above it.
Kept apart from I/O so the rule is easy to read and to test.
"""

from __future__ import annotations

from collections.abc import Sequence

from ttlstate.checkpoint import names
from ttlstate.checkpoint.errors import VersionNotFound
from ttlstate.checkpoint.restore_plan import RestorePlan, plan_restore, snapshot_missing

EMPTY = ""  # the id of the empty state a lineage ends in
FORMAT1 = "-"  # the id of a version written on checkpoint format 1 (found by version alone)


def plan_by_id(store_id: str, files: list[str], version: int, ckpt_id: str,
               lineage: Sequence[tuple[int, str]], local: tuple[int, str] | None,
               from_snapshot: tuple[int, str | None] | None = None) -> RestorePlan:
    """The plan for (version, ckpt_id) whose changelog records `lineage`. `from_snapshot`:
    (version, id or None) of exactly the snapshot to start from (snapshotStartBatchId)."""
    present = {(f.version, f.ckpt_id) for f in names.parse_all(files) if f.kind == names.SNAPSHOT}
    chain = [(version, ckpt_id), *lineage]
    if from_snapshot is not None and from_snapshot[0] == version:
        if from_snapshot[1] not in (None, ckpt_id) or (version, ckpt_id) not in present:
            raise VersionNotFound(store_id, version, names.snapshot_name(version, ckpt_id),
                                  snapshot_missing([v for v, _i in present]))
        return RestorePlan(version, names.snapshot_name(version, ckpt_id), (), False)
    for i, (k, kid) in enumerate(chain):
        if i == 0 and from_snapshot is None and (k, kid) in present:
            return RestorePlan(k, names.snapshot_name(k, kid), (), False)
        if i == 0:
            continue
        if from_snapshot is not None:
            if k != from_snapshot[0]:
                continue
            if from_snapshot[1] is not None and from_snapshot[1] != kid:
                raise VersionNotFound(store_id, version, names.snapshot_name(k, from_snapshot[1]),
                                      f"is not on the lineage of version {version} ({ckpt_id}), "
                                      f"which was built on {names.snapshot_name(k, kid)}")
        above = tuple(names.changelog_name(v, vid) for v, vid in reversed(chain[:i]))
        if kid == EMPTY:
            return RestorePlan(k, None, above, False)
        if kid == FORMAT1:
            below = plan_restore(store_id, files, k, None)
            return RestorePlan(below.base_version, below.snapshot, below.changelogs + above, False)
        if from_snapshot is None and local == (k, kid):
            return RestorePlan(k, None, above, True)
        if (k, kid) in present:
            return RestorePlan(k, names.snapshot_name(k, kid), above, False)
        if from_snapshot is not None:
            raise VersionNotFound(store_id, version, names.snapshot_name(k, kid),
                                  snapshot_missing([v for v, i in present if (v, i) in chain]))
    oldest = chain[-1]
    raise VersionNotFound(store_id, version, names.snapshot_name(*oldest),
                          f"is missing (version {version} ({ckpt_id}) is built on it, and no "
                          "newer base is left)")
