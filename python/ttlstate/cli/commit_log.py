"""What Spark's commit log says of a query's state: the newest committed batch and, on
checkpoint format 2, the checkpoint ids it recorded per operator and partition.

A format 2 checkpoint can hold several attempts of one version (`<v>_<id>.*`); only the commit
log says which one the query built on, so offline tools read it before picking files.
"""

from __future__ import annotations

import json
import os


def _root(checkpoint: str) -> str:
    if os.path.basename(os.path.normpath(checkpoint)) == "state":
        return os.path.dirname(os.path.normpath(checkpoint))
    return checkpoint


def newest_commit(checkpoint: str) -> tuple[int, dict[str, object]] | None:
    """(batch id, the entry's JSON) of the newest readable commit log entry, or None."""
    commits = os.path.join(_root(checkpoint), "commits")
    try:
        batches = sorted((int(n) for n in os.listdir(commits) if n.isdigit()), reverse=True)
    except OSError:
        return None
    for batch in batches:
        try:
            with open(os.path.join(commits, str(batch))) as f:
                f.readline()  # the log's version line
                return batch, json.loads(f.readline() or "{}")
        except (OSError, ValueError):
            continue
    return None


def committed_ids(checkpoint: str, operator: str, partition: str) -> tuple[int, list[str]] | None:
    """(state version, ids of the partition's stores) the newest commit recorded (format 2)."""
    newest = newest_commit(checkpoint)
    if newest is None:
        return None
    batch, entry = newest
    by_operator = entry.get("stateUniqueIds")
    if not isinstance(by_operator, dict):
        return None
    partitions = by_operator.get(operator)
    if not isinstance(partitions, list) or not partition.isdigit() or int(partition) >= len(partitions):
        return None
    ids = partitions[int(partition)]
    return batch + 1, [str(i) for i in ids] if isinstance(ids, list) else []
