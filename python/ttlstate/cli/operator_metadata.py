"""The names of a query's stateful operators, from the state metadata Spark writes into its
checkpoint for every stateful operator: `<checkpoint>/state/<operatorId>/_metadata/metadata`
(version 1: a line `v1`, then one JSON object whose `operatorInfo` has `operatorId` and
`operatorName`, the name progress reports), or, for operators with version 2 metadata, the
newest file of `_metadata/v2/`. The shim reads the same files (`OperatorNames.scala`) to match
`operator.<name>.ttl` keys.
"""

from __future__ import annotations

import json
import os


def parse_operator_metadata(text: str) -> tuple[int, str] | None:
    """(operator id, name) of an operator metadata file's text (None if it is not one)."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if len(lines) < 2 or lines[0] not in ("v1", "v2"):
        return None
    try:
        info = json.loads(lines[1])["operatorInfo"]
        return int(info["operatorId"]), str(info["operatorName"])
    except (ValueError, KeyError, TypeError):
        return None


def _metadata_file(operator_dir: str) -> str | None:
    v1 = os.path.join(operator_dir, "_metadata", "metadata")
    if os.path.isfile(v1):
        return v1
    v2 = os.path.join(operator_dir, "_metadata", "v2")
    batches = sorted((int(f), f) for f in os.listdir(v2) if f.isdigit()) if os.path.isdir(v2) else []
    return os.path.join(v2, batches[-1][1]) if batches else None


def operator_names(state_root: str) -> dict[int, str]:
    """Operator id -> name for every operator directory under `state_root` (`<checkpoint>/state`)
    whose metadata can be read."""
    names: dict[int, str] = {}
    if not os.path.isdir(state_root):
        return names
    for entry in os.listdir(state_root):
        if not entry.isdigit():
            continue
        path = _metadata_file(os.path.join(state_root, entry))
        if path is None:
            continue
        try:
            with open(path, encoding="utf-8") as f:
                parsed = parse_operator_metadata(f.read(1 << 20))
        except (OSError, UnicodeDecodeError):
            continue
        if parsed is not None and parsed[0] == int(entry):
            names[parsed[0]] = parsed[1]
    return names
