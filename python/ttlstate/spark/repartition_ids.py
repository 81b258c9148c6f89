"""Checkpoint format 2 (`checkpointFormatVersion=2`) in `ttlstate repartition`: which attempt of
each old store the job reads, and the commit log entry that names the new stores' attempts.

On format 2 every commit of a store has a unique id (its files are `<v>_<id>.*`), and Spark's
commit log entry of a batch records, per operator and partition, the ids of the partition's
stores (`stateUniqueIds`: operator -> one list per partition -> one id per store, in the order
the operator lists its stores); a restarted query loads exactly those. So the job reads each old
store at the id the last committed batch recorded, the new stores' commits make new ids, and the
switch rewrites that batch's commit log entry with one list per new partition. Which of a
partition's ids is which store's is found by its files (ids are unique), and the order of a new
partition's list is the order the old entry had (the operator's, the same in every partition).
"""

from __future__ import annotations

import json

from ttlstate.checkpoint import names

STATE_IDS = "stateUniqueIds"


class IdsError(ValueError):
    """The commit log entry does not name the stores' attempts as format 2 needs."""


def commit_entry(text: str) -> dict:
    """The JSON of a commit log entry (`v1` or `v2`, then one JSON line)."""
    lines = text.split("\n")
    try:
        entry = json.loads(lines[1])
    except (IndexError, ValueError):
        raise IdsError("its commit log entry has no JSON line") from None
    if not isinstance(entry, dict):
        raise IdsError("its commit log entry is not a JSON object")
    return entry


def records_ids(text: str) -> bool:
    """Whether a commit log entry records state checkpoint ids: Spark writes them on format 2
    only (the offset log does not pin the format)."""
    try:
        return isinstance(commit_entry(text).get(STATE_IDS), dict)
    except IdsError:
        return False


def partition_ids(entry: dict, operator: int) -> list[list[str]]:
    """The ids the entry recorded for `operator`, one list per partition."""
    recorded = entry.get(STATE_IDS)
    ids = recorded.get(str(operator)) if isinstance(recorded, dict) else None
    if not isinstance(ids, list) or not all(isinstance(p, list) for p in ids):
        raise IdsError(f"its last committed batch's commit log entry records no state checkpoint ids "
                       f"({STATE_IDS}) for operator {operator}")
    return [[str(i) for i in p] for p in ids]


def store_id(candidates: list[str], listing: list[str], version: int) -> str | None:
    """Which of `candidates` (a partition's recorded ids) is the store's whose folder lists
    `listing`: the one whose file of `version` it holds (None: none)."""
    held = {(f.version, f.ckpt_id) for f in names.parse_all(listing)}
    found = [i for i in candidates if (version, i) in held]
    return found[0] if len(found) == 1 else None


def store_order(ids: list[str], store_ids: dict[str, str]) -> list[str]:
    """The stores in the order of one partition's recorded `ids` (`store_ids`: store -> its id)."""
    by_id = {i: s for s, i in store_ids.items()}
    return [by_id[i] for i in ids if i in by_id]


def with_ids(text: str, new_ids: dict[int, list[list[str]]]) -> str:
    """The commit log entry `text` with each operator of `new_ids` recording those partitions'
    ids, all else as it was."""
    lines = text.split("\n")
    entry = commit_entry(text)
    recorded = entry.setdefault(STATE_IDS, {})
    for operator, ids in new_ids.items():
        recorded[str(operator)] = ids
    lines[1] = json.dumps(entry, separators=(",", ":"))
    return "\n".join(lines)


def new_ids(report: list[dict], order: dict[str, list[str]]) -> dict[int, list[list[str]]]:
    """Per operator, one list of ids per new partition, each in the operator's store order
    (`order`: operator -> store names), from the job's report (a `ckptId` per new store)."""
    by_store = {(int(r["operator"]), int(r["partition"]), str(r["store"])): str(r["ckptId"]) for r in report}
    out: dict[int, list[list[str]]] = {}
    for operator, stores in ((int(o), s) for o, s in order.items()):
        count = 1 + max(p for (o, p, _s) in by_store if o == operator)
        out[operator] = [[by_store[(operator, p, s)] for s in stores] for p in range(count)]
    return out
