"""Where `ttlstate repartition` finds the grouping key in each column family of a served
transformWithState store (spark/repartition_families.py): Spark's layouts of every family kind,
and a refusal naming the family for any other name or layout, or a grouping key that differs."""

from __future__ import annotations

import json

import pytest

from ttlstate.spark.repartition_families import FamilyRefused, routes


def struct(*fields: tuple[str, object]) -> dict:
    return {"type": "struct",
            "fields": [{"name": n, "type": t, "nullable": True, "metadata": {}} for n, t in fields]}


GROUPING = struct(("value", "string"))
MAP_KEY = struct(("key", GROUPING), ("userKey", struct(("value", "integer"))))


def family(name: str, key: dict, encoder: str = "noPrefix") -> dict:
    return {"name": name, "keySchema": json.dumps(key), "encoder": encoder}


# Spark 4.3's families of a processor with a ValueState, a MapState and a ListState with TTLConfigs
# and processing-time timers (TransformWithStateQueries.features).
TTL_KEY = struct(("expirationMs", "long"), ("elementKey", GROUPING))
FEATURES = [
    family("default", struct(("key", "binary"))),
    family("seen", GROUPING),
    family("recent", GROUPING),
    family("$ttl_recent", TTL_KEY, "rangeScan:0"),
    family("perValue", MAP_KEY, "prefixScan:1"),
    family("$ttl_perValue", struct(("expirationMs", "long"), ("elementKey", MAP_KEY)), "rangeScan:0"),
    family("history", GROUPING),
    family("$rowCounter_history", GROUPING),
    family("$min_history", GROUPING),
    family("$count_history", GROUPING),
    family("$ttl_history", TTL_KEY, "rangeScan:0"),
    family("$procTimers_keyToTimestamp", struct(("key", GROUPING), ("expiryTimestampMs", "long")),
           "prefixScan:1"),
    family("$procTimers_timestampToKey", struct(("expiryTimestampMs", "long"), ("key", GROUPING)),
           "rangeScan:0"),
]


def test_every_family_kind_is_routed_by_its_grouping_key() -> None:
    paths, grouping = routes(0, FEATURES)
    assert json.loads(grouping) == GROUPING
    assert paths == {"default": None, "seen": [], "recent": [], "$ttl_recent": [1], "perValue": [0],
                     "$ttl_perValue": [1, 0], "history": [], "$rowCounter_history": [], "$min_history": [],
                     "$count_history": [], "$ttl_history": [1], "$procTimers_keyToTimestamp": [0],
                     "$procTimers_timestampToKey": [1]}


@pytest.mark.parametrize("changed, why", [
    (family("$newIndex_seen", GROUPING), "column family '\\$newIndex_seen'"),
    (family("$procTimers_keyToTimestamp", struct(("expiryTimestampMs", "long"), ("key", GROUPING)),
            "prefixScan:1"), "column family '\\$procTimers_keyToTimestamp'"),
    (family("$ttl_gone", TTL_KEY, "rangeScan:0"), "column family '\\$ttl_gone'"),
    (family("seen", struct(("value", "string"), ("other", "long"))), "'seen' keys its entries by"),
    (family("recent", GROUPING, "rangeScan:0"), "column family 'recent'"),
])
def test_a_family_spark_changed_is_refused_by_name(changed: dict, why: str) -> None:
    families = [f for f in FEATURES if f["name"] != changed["name"]] + [changed]
    with pytest.raises(FamilyRefused, match=why):
        routes(3, families)
