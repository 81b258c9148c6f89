"""How `ttlstate repartition` places the column families of a transformWithState store that
ttlstate serves: each family's keys by the grouping key they begin with or contain.

A transformWithState operator's input is hash-partitioned by its grouping key, and every family
of its store (one per state variable, and Spark's internal ones) keys its entries by that grouping
key, alone or inside a composite key row. Spark's layouts (the operator's schema file lists each
family with its key schema and key encoder):

- a ValueState or ListState `v`, and ListState's internal `$rowCounter_v` and, with a TTLConfig,
  `$min_v` and `$count_v`: the key row is the grouping key;
- a MapState `v`: `(key: grouping key, userKey)`, prefix-scanned by `key`;
- the TTL index `$ttl_v`: `(expirationMs, elementKey)`, elementKey being `v`'s key (the grouping
  key, or a MapState's `(key, userKey)`);
- timers, `$procTimers_keyToTimestamp` / `$eventTimers_keyToTimestamp`: `(key, expiryTimestampMs)`,
  and their secondary indexes `..._timestampToKey`: `(expiryTimestampMs, key)`;
- `default`: holds nothing.

Each family gets a path, the ordinals of the struct columns leading to its grouping key (empty:
the whole key row); the job (FamilyRouter.scala) decodes a key with the family's encoder, follows
the path and hashes the grouping key's columns as Spark's shuffle does. A family of any other
name or layout, or whose grouping key differs from the others', is refused by name: a schema
Spark changed must never place keys wrongly.
"""

from __future__ import annotations

import json

DEFAULT = "default"
TIMER_FAMILIES = {f"${kind}Timers_{index}": index
                  for kind in ("proc", "event") for index in ("keyToTimestamp", "timestampToKey")}
WHOLE_KEY_PREFIXES = ("$rowCounter_", "$min_", "$count_")
TTL_PREFIX = "$ttl_"
NO_PREFIX = "noPrefix"


class FamilyRefused(ValueError):
    """A family whose grouping key cannot be found."""


def _fields(schema: dict) -> list[dict]:
    fields = schema.get("fields") if isinstance(schema, dict) else None
    return fields if isinstance(fields, list) else []


def _shape(schema: dict) -> list[tuple[str, object]]:
    """A struct's columns as (name, type): what hashing and nesting depend on."""
    return [(str(f.get("name")), f.get("type")) for f in _fields(schema)]


def _column(schema: dict, index: int, name: str, struct: bool) -> dict | None:
    """Column `index` of `schema` when it is named `name` (and a struct, if `struct`)."""
    fields = _fields(schema)
    if index >= len(fields) or fields[index].get("name") != name:
        return None
    t = fields[index].get("type")
    if struct:
        return t if isinstance(t, dict) and t.get("type") == "struct" else None
    return {"type": t}


def _is_map(family: dict) -> bool:
    """A MapState's family: `(key, userKey)`, prefix-scanned by the grouping key."""
    schema = json.loads(family["keySchema"])
    return (family.get("encoder") == "prefixScan:1" and len(_fields(schema)) == 2
            and _column(schema, 0, "key", True) is not None
            and _column(schema, 1, "userKey", True) is not None)


def _path(family: dict, by_name: dict[str, dict]) -> list[int] | None:
    """The path to `family`'s grouping key, or None when its layout is not Spark's as known."""
    name, schema = family["name"], json.loads(family["keySchema"])
    if name in TIMER_FAMILIES:
        at_end = TIMER_FAMILIES[name] == "timestampToKey"
        ts, key = (0, 1) if at_end else (1, 0)
        ok = (len(_fields(schema)) == 2 and _column(schema, key, "key", True) is not None
              and _column(schema, ts, "expiryTimestampMs", False) == {"type": "long"})
        return [key] if ok else None
    if name.startswith(TTL_PREFIX):
        variable = by_name.get(name[len(TTL_PREFIX):])
        element = _column(schema, 1, "elementKey", True)
        if (variable is None or element is None or len(_fields(schema)) != 2
                or _column(schema, 0, "expirationMs", False) != {"type": "long"}):
            return None
        if _is_map(variable):
            return [1, 0] if _shape(element) == _shape(json.loads(variable["keySchema"])) else None
        return [1]
    if name.startswith("$"):
        if name.startswith(WHOLE_KEY_PREFIXES) and family.get("encoder") == NO_PREFIX:
            return []
        return None
    if _is_map(family):
        return [0]
    return [] if family.get("encoder") == NO_PREFIX else None


def _at(schema: dict, path: list[int]) -> dict:
    for i in path:
        schema = _fields(schema)[i]["type"]
    return schema


def routes(operator: int, families: list[dict]) -> tuple[dict[str, list[int] | None], str]:
    """Each family's path to its grouping key (None: `default`, which must hold nothing), and
    the grouping key's schema (JSON), or FamilyRefused naming the family."""
    by_name = {f["name"]: f for f in families}
    paths: dict[str, list[int] | None] = {}
    grouping: dict | None = None
    for family in families:
        name = family["name"]
        if name == DEFAULT:
            paths[name] = None
            continue
        path = _path(family, by_name)
        if path is None:
            raise FamilyRefused(f"operator {operator}: column family '{name}' (key schema "
                                f"{family['keySchema']}, key encoder {family.get('encoder')}) is not one "
                                "whose grouping key ttlstate repartition knows how to find; the checkpoint "
                                "is unchanged")
        key = _at(json.loads(family["keySchema"]), path)
        if grouping is not None and _shape(key) != _shape(grouping):
            raise FamilyRefused(f"operator {operator}: column family '{name}' keys its entries by "
                                f"{json.dumps(key)}, not by the grouping key {json.dumps(grouping)} of the "
                                "others; the checkpoint is unchanged")
        grouping = grouping or key
        paths[name] = path
    if grouping is None:
        raise FamilyRefused(f"operator {operator}: its schema file lists no column family with a grouping "
                            "key")
    return paths, json.dumps(grouping)
