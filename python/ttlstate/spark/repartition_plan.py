"""What `ttlstate repartition` does to a checkpoint, decided before anything changes: which
operators and stores move, how each key finds its new partition, what the new files record,
and every reason to refuse. Pure: it reads what the command gathered (checkpoint.py's view), so
its rules are tested without Spark.

How Spark places a stateful operator's state: the operator's input is hash-partitioned by the
operator's key columns (Spark's HashPartitioning: Murmur3 of the columns, modulo
`spark.sql.shuffle.partitions` as the offset log pinned it), and partition p's task keeps the
state of its keys in store p. So a key moves to the partition that hash gives for the new count:

- aggregation (stateStoreSave in Spark's operator metadata), dropDuplicates (dedupe,
  dedupeWithinWatermark), flatMapGroupsWithState and applyInPandasWithState: the whole state key;
- session window (sessionWindowStateStoreSaveExec): the key without its session, the prefix
  columns ttlstate stores apart;
- stream-stream join (symmetricHashJoin): the join key, which is all of keyToNumValues' key and
  all of keyWithIndexToValue's but its index;
- streaming limit (globalLimit): none, its one store stays in partition 0;
- transformWithState served by ttlstate (operator metadata v2): its grouping key, which each
  column family's key begins with or contains (repartition_families.py).

On checkpoint format 2 the stores are read at the ids the last commit recorded, and the commit
log entry gets the new stores' (repartition_ids.py).

Spark 3.5 writes no operator metadata: join stores are known by their names, and a session
window's keys by their layout (Route `auto`, KeyRouter.scala).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace

from ttlstate.config import keys as K
from ttlstate.spark import repartition_families as RF

SHUFFLE_PARTITIONS = "spark.sql.shuffle.partitions"
STRICT_DISTRIBUTION = "spark.sql.streaming.statefulOperator.useStrictDistribution"
FORMAT_VERSION = "spark.sql.streaming.stateStore.checkpointFormatVersion"
MAX_PARTITIONS = 2**31 - 1  # a partition id is a Java int

WHOLE_KEY_OPERATORS = frozenset({"stateStoreSave", "dedupe", "dedupeWithinWatermark",
                                 "flatMapGroupsWithState", "applyInPandasWithState"})
SESSION_WINDOW = "sessionWindowStateStoreSaveExec"
JOIN = "symmetricHashJoin"
LIMIT = "globalLimit"
EMPTY_STRUCT = json.dumps({"type": "struct", "fields": []})
# What the new stores are opened with besides the recorded TTL: nothing may leave them while they
# are written (no cleanup), so they hold exactly the old stores' entries.
WRITE_ONLY = {K.FULL_SNAPSHOT.key: "false", K.INCREMENTAL_SIZE.key: "0",
              K.INCREMENTAL_PER_RECORD.key: "false", K.FILTER_ENABLED.key: "false",
              K.READER_INCLUDE_EXPIRED.key: "false"}


class Refused(ValueError):
    """The checkpoint cannot be repartitioned as asked; the message says why and what to do."""


@dataclass(frozen=True)
class Store:
    """One store of an operator in the old layout (StateLayout.scala's description)."""

    name: str
    num_cols_prefix_key: int  # -1: not recorded (Spark 3.5)
    key_schema: str | None
    value_schema: str | None
    bytes: int
    schema_file: str = ""  # a store with column families (transformWithState's): its schema file
    families: tuple[dict, ...] = ()  # and its families (name, keySchema, encoder)


@dataclass(frozen=True)
class Operator:
    id: int
    name: str | None  # None: Spark 3.5 records none
    metadata_version: int  # 0: none, 1, 2 (transformWithState's)
    partitions: tuple[int, ...]
    stores: tuple[Store, ...]


def operators_of(layout_json: str) -> list[Operator]:
    layout = json.loads(layout_json)
    return [Operator(int(o["id"]), o["name"], int(o["metadataVersion"]), tuple(o["partitions"]),
                     tuple(Store(s["name"], int(s["numColsPrefixKey"]), s["keySchema"], s["valueSchema"],
                                 int(s["bytes"]), s.get("schemaFile", ""), tuple(s.get("families", ())))
                           for s in o["stores"]))
            for o in layout["operators"]]


@dataclass
class Checkpoint:
    """What the command read of a checkpoint: its logs' batch ids, the offset log entry of the
    last committed batch, its state layout, and the header of each store's file of the version
    to move (`headers[(operator, partition, store)]`, None when it has none)."""

    location: str
    offsets: list[int]
    commits: list[int]
    offset_text: str | None
    operators: list[Operator]
    headers: dict[tuple[int, int, str], dict | None] = field(default_factory=dict)
    # Checkpoint format 2 (repartition_ids.py): each store's id at the version to move, and each
    # operator's stores in the order its commit log entry lists their ids.
    format2: bool = False  # pinned, or its last commit log entry records ids
    ids: dict[tuple[int, int, str], str] = field(default_factory=dict)
    id_order: dict[int, list[str]] = field(default_factory=dict)


@dataclass
class Plan:
    batch: int
    version: int
    old_partitions: int
    new_partitions: int
    groups: list[dict]
    rows: int | None  # the rows to move, when every file recorded its count
    bytes: int
    lines: list[str]  # what it does, operator by operator
    id_order: dict[int, list[str]] | None = None  # format 2: each operator's stores in id order

    def job(self, state_root: str, staging_root: str, read_confs: dict[str, str]) -> str:
        """The Spark job's plan (Plan.scala)."""
        return json.dumps({"stateRoot": state_root, "stagingRoot": staging_root, "version": self.version,
                           "groups": self.groups, "readConfs": read_confs,
                           "checkpointIds": self.id_order is not None})


def offset_confs(text: str) -> dict[str, str]:
    """The confs an offset log entry pins (its second line's `conf`)."""
    lines = text.split("\n")
    try:
        meta = json.loads(lines[1])
    except (IndexError, ValueError):
        raise Refused("its last committed batch's offset log entry has no metadata line") from None
    conf = meta.get("conf") if isinstance(meta, dict) else None
    if not isinstance(conf, dict):
        raise Refused("its last committed batch's offset log entry pins no confs (a checkpoint from "
                      "before Spark 2.1?)")
    return {str(k): str(v) for k, v in conf.items()}


def with_partitions(text: str, partitions: int) -> str:
    """The offset log entry `text` with `spark.sql.shuffle.partitions` set to `partitions`, all
    else as it was."""
    lines = text.split("\n")
    meta = json.loads(lines[1])
    meta["conf"][SHUFFLE_PARTITIONS] = str(partitions)
    lines[1] = json.dumps(meta, separators=(",", ":"))
    return "\n".join(lines)


def operator_metadata_with_partitions(text: str, partitions: int) -> str:
    """Spark's v1 operator metadata (`v1` then one JSON line) with every store's numPartitions set."""
    lines = text.rstrip("\n").split("\n")
    meta = json.loads(lines[-1])
    for store in meta.get("stateStoreInfo", []):
        store["numPartitions"] = partitions
    lines[-1] = json.dumps(meta, separators=(",", ":"))
    return "\n".join(lines) + "\n"


def check_partitions(value: object) -> int:
    """The new partition count as Spark takes `spark.sql.shuffle.partitions`: a positive int."""
    try:
        n = int(str(value))
    except ValueError:
        raise Refused(f"--partitions {value!r}: a partition count is a whole number") from None
    if not 1 <= n <= MAX_PARTITIONS:
        raise Refused(f"--partitions {n}: Spark takes {SHUFFLE_PARTITIONS} from 1 to {MAX_PARTITIONS}")
    return n


def route(op: Operator, store: Store) -> str:
    """How a key of `store` finds its new partition (Plan.scala's Route)."""
    if store.name.endswith("-keyWithIndexToValue"):
        return "dropLast"
    if store.name.endswith("-keyToNumValues"):
        return "key"
    if op.name is None:  # Spark 3.5: no operator metadata
        if store.key_schema is not None and _is_limit_key(store.key_schema):
            return "single"
        return "auto"
    if op.name in WHOLE_KEY_OPERATORS:
        return "key"
    if op.name == SESSION_WINDOW and store.num_cols_prefix_key > 0:
        return f"prefix:{store.num_cols_prefix_key}"
    if op.name == LIMIT:
        return "single"
    raise Refused(f"operator {op.id} is a '{op.name}', whose state ttlstate repartition does not know how to "
                  "move; the checkpoint is unchanged")


def _is_limit_key(key_schema: str) -> bool:
    """A streaming limit's key: one column of the null type (Spark's StreamingGlobalLimitExec)."""
    fields = json.loads(key_schema).get("fields", [])
    return len(fields) == 1 and fields[0].get("type") == "null"


_SETTING_VALUES: dict[str, frozenset[str]] = {
    "updateType": frozenset(v.value for v in K.UpdateType),
    "stateVisibility": frozenset(v.value for v in K.StateVisibility),
    "timeSource": frozenset(v.value for v in K.TimeSource),
}


def _whole(v: object, least: int | None = None) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and (least is None or v >= least)


def header_problem(header: dict) -> str | None:
    """What is wrong with a file header's fields the plan reads (its TTL settings, batch time and
    key count), as ttlstate never writes them; None when nothing is. A header whose JSON still
    parses after damage says so here, not as TTL settings that differ between partitions."""
    for key, least in (("batchTimeMs", None), ("ttlMs", 0), ("keys", 0)):
        v = header.get(key)
        if v is not None and not _whole(v, least):
            return f"{key} is {v!r}, not null or a whole number" + ("" if least is None else f" from {least}")
    if "settings" not in header:
        return None
    settings = header["settings"]
    if not isinstance(settings, dict):
        return f"settings is {settings!r}, not an object"
    if settings.get("ttlMs") is not None and not _whole(settings["ttlMs"], 0):
        return f"settings.ttlMs is {settings['ttlMs']!r}, not null or a whole number from 0"
    for key, allowed in _SETTING_VALUES.items():
        if key in settings and not (isinstance(settings[key], str) and settings[key] in allowed):
            return f"settings.{key} is {settings[key]!r}, not one of {', '.join(sorted(allowed))}"
    return None


def recorded_settings(header: dict) -> dict[str, object]:
    """The TTL settings a file header recorded (`settings`; only `ttlMs` in files from before
    they were recorded, the rest then as configured by default)."""
    settings = header.get("settings")
    if isinstance(settings, dict):
        return dict(settings)
    return {"ttlMs": header.get("ttlMs"), "updateType": K.UPDATE_TYPE.default,
            "stateVisibility": K.STATE_VISIBILITY.default, "timeSource": K.TIME_SOURCE.default}


def settings_text(header: dict) -> str:
    """The recorded settings as one comparable text (JSON, keys sorted)."""
    return json.dumps(recorded_settings(header), sort_keys=True)


def confs_recording(settings: dict[str, object]) -> dict[str, str]:
    """The ttlstate confs under which a new store records `settings`, and drops nothing."""
    ttl = settings.get("ttlMs")
    return {K.TTL.key: "off" if ttl is None else f"{int(str(ttl))}ms",
            K.UPDATE_TYPE.key: str(settings.get("updateType", K.UPDATE_TYPE.default)),
            K.STATE_VISIBILITY.key: str(settings.get("stateVisibility", K.STATE_VISIBILITY.default)),
            K.TIME_SOURCE.key: str(settings.get("timeSource", K.TIME_SOURCE.default)), **WRITE_ONLY}


def is_format2(pinned: dict[str, str]) -> bool:
    """Whether the confs an offset log entry pins make checkpoint format 2."""
    return pinned.get(FORMAT_VERSION, "1") == "2"


def last_committed(ck: Checkpoint) -> int:
    if not ck.commits:
        raise Refused(f"{ck.location} has no committed batch: there is no state to move yet")
    last = ck.commits[-1]
    if ck.offsets and ck.offsets[-1] > last:
        raise Refused(f"batch {ck.offsets[-1]} of {ck.location} was planned but never committed (the query "
                      "stopped or failed in it): restart the query to let it finish that batch, stop it, "
                      "then repartition")
    if last not in ck.offsets or ck.offset_text is None:
        raise Refused(f"{ck.location} has no offset log entry for its last committed batch {last}")
    return last


def plan(ck: Checkpoint, partitions: int) -> Plan:
    """The repartition of `ck` to `partitions`, or Refused."""
    batch = last_committed(ck)
    assert ck.offset_text is not None
    pinned = offset_confs(ck.offset_text)
    provider = pinned.get(K.PROVIDER_CLASS_KEY, "")
    if provider != K.PROVIDER_CLASS:
        raise Refused(f"{ck.location} keeps its state in {provider or 'the HDFS state store provider'}, "
                      f"not ttlstate: run `ttlstate migrate {ck.location} <new checkpoint>` to move it to "
                      "ttlstate first, then repartition the new checkpoint")
    if pinned.get(FORMAT_VERSION, "1") not in ("1", "2"):
        raise Refused(f"{ck.location} uses state checkpoint format version {pinned[FORMAT_VERSION]} "
                      f"({FORMAT_VERSION}); ttlstate repartition moves format 1 and 2 checkpoints")
    if pinned.get(STRICT_DISTRIBUTION, "true") != "true":
        raise Refused(f"{ck.location} was started with {STRICT_DISTRIBUTION}=false (before Spark 3.3): "
                      "its state is partitioned as each query's plan happened to be, not by its keys' hash")
    old = int(pinned.get(SHUFFLE_PARTITIONS, "0"))
    if partitions == old:
        raise Refused(f"{ck.location} already has {old} state partitions: nothing to do")
    out = Plan(batch, batch + 1, old, partitions, [], 0, 0, [],
               {o.id: ck.id_order.get(o.id, []) for o in ck.operators} if ck.format2 else None)
    for op in ck.operators:
        if op.metadata_version == 2 and not all(s.families for s in op.stores):
            raise Refused(f"operator {op.id} is a transformWithState ('{op.name}') whose operator metadata "
                          "names no schema file of column families for its stores: their keys cannot be "
                          "placed; the checkpoint is unchanged")
        if out.id_order is not None and sorted(out.id_order[op.id]) != sorted(s.name for s in op.stores):
            raise Refused(f"operator {op.id}: its last committed batch's commit log entry records the "
                          f"checkpoint ids of stores {out.id_order[op.id]} in partition {op.partitions[:1]}, "
                          f"not of its stores {[s.name for s in op.stores]}")
        for store in op.stores:
            _add_group(out, ck, op, store)
    return out


def _add_group(out: Plan, ck: Checkpoint, op: Operator, store: Store) -> None:
    """One store of one operator into `out`: its route, its new stores' confs and batch time."""
    families: dict[str, list[int] | None] = {}
    if store.families:  # routed by each family's grouping key (repartition_families.py)
        try:
            families, grouping = RF.routes(op.id, list(store.families))
        except RF.FamilyRefused as e:
            raise Refused(str(e)) from None
        store = replace(store, key_schema=grouping, value_schema=EMPTY_STRUCT, num_cols_prefix_key=0)
    r = "families" if families else route(op, store)
    old = (0,) if r == "single" else tuple(range(out.old_partitions))
    if op.partitions != old:
        raise Refused(f"operator {op.id} has state partitions {list(op.partitions)} where "
                      f"{SHUFFLE_PARTITIONS}={out.old_partitions} makes {list(old)}: the checkpoint is "
                      "incomplete")
    if store.key_schema is None or store.value_schema is None:
        raise Refused(f"operator {op.id}, store {store.name} has no schema file (Spark writes one unless "
                      "spark.sql.streaming.stateStore.stateSchemaCheck is false): without its key's "
                      "columns its keys cannot be placed")
    headers = {p: ck.headers.get((op.id, p, store.name)) for p in old}
    found = [h for h in headers.values() if h is not None]
    if len(found) < len(old):
        raise Refused(f"operator {op.id}, store {store.name}: partitions "
                      f"{[p for p, h in headers.items() if h is None]} hold no version {out.version} (the "
                      f"state after batch {out.batch})")
    settings = {settings_text(h) for h in found}
    if len(settings) > 1:
        raise Refused(f"operator {op.id}, store {store.name}: its partitions recorded different TTL "
                      f"settings ({', '.join(sorted(settings))}); restart the query once so that every "
                      "partition writes its own, stop it, then repartition")
    counts = [h.get("keys") for h in found]
    rows = None if None in counts else sum(int(str(c)) for c in counts)
    out.rows = None if out.rows is None or rows is None else out.rows + rows
    out.bytes += store.bytes
    new = 1 if r == "single" else out.new_partitions
    ids = []
    if out.id_order is not None:
        ids = [ck.ids.get((op.id, p, store.name)) for p in old]
        if None in ids:
            missing = [p for p, i in zip(old, ids, strict=True) if i is None]
            raise Refused(f"operator {op.id}, store {store.name}: partitions {missing} hold no file of "
                          f"version {out.version} under the checkpoint id its last committed batch recorded")
    by_family = {"families": families, "schemaFile": store.schema_file} if families else {}
    out.groups.append({**by_family, "oldIds": ids, "operator": op.id, "store": store.name,
                       "keySchema": store.key_schema,
                       "valueSchema": store.value_schema,
                       "numColsPrefixKey": max(store.num_cols_prefix_key, 0), "route": r,
                       "oldPartitions": list(old), "newPartitions": new,
                       "confs": confs_recording(json.loads(settings.pop())),
                       "batchTimeMs": max((int(str(h["batchTimeMs"])) for h in found
                                           if h.get("batchTimeMs") is not None), default=0)})
    name = f"operator {op.id}" + (f" ({op.name})" if op.name else "")
    size = f"{store.bytes} bytes" + ("" if rows is None else f", {rows} rows")
    kept = [f for f, path in families.items() if path is not None]
    by = f", column families {', '.join(sorted(kept))} by their grouping key" if kept else ""
    out.lines.append(f"{name}, store {store.name}: {len(old)} -> {new} partitions ({size}){by}")
