"""Which stores get TTL: those holding one independent value per key.

Stream-stream join stores keep counts across four stores (keyToNumValues must match
keyWithIndexToValue), and streaming limit's single row is the limit's count: expiring an entry
there would corrupt results, so those stores run on ttlstate without TTL. So do stores with
column families (transformWithState's): their state variables, timers and TTL indexes refer to
each other, and their values expire by Spark's `TTLConfig`. The shim sends the store name, the
key/value schemas (Spark's StructType JSON) and whether the store has column families with every
store it opens.
"""

from __future__ import annotations

import json

JOIN_STORE_SUFFIXES = ("-keyToNumValues", "-keyWithIndexToValue")


def _fields(schema_json: str) -> list[tuple[str, object]]:
    try:
        schema = json.loads(schema_json)
        return [(f["name"], f["type"]) for f in schema.get("fields", [])]
    except (ValueError, TypeError, KeyError):
        return []


def is_join_store(store_name: str) -> bool:
    return store_name.endswith(JOIN_STORE_SUFFIXES)


def is_limit_store(key_schema_json: str, value_schema_json: str) -> bool:
    """Streaming limit: key `struct<key:void>`, value `struct<value:bigint>`."""
    return (_fields(key_schema_json) == [("key", "void")]
            and _fields(value_schema_json) == [("value", "long")])


def ttl_applies(store_name: str, key_schema_json: str, value_schema_json: str,
                column_families: bool = False) -> bool:
    return (not column_families and not is_join_store(store_name)
            and not is_limit_store(key_schema_json, value_schema_json))
