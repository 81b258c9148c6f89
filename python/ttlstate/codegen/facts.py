"""The facts the other languages take from Python, read from their single definitions."""

from __future__ import annotations

from dataclasses import dataclass

from ttlstate.checkpoint import record_format
from ttlstate.config import keys as K
from ttlstate.config import parse
from ttlstate.server import protocol
from ttlstate.store import metric_names
from ttlstate.ttl import ttl_value


@dataclass(frozen=True)
class NamedKey:
    name: str  # the Python name in config/keys.py
    key: K.ConfKey


def protocol_constants() -> dict[str, int]:
    return protocol.constants()


def record_file_constants() -> dict[str, int]:
    """The record file's format numbers and record ops (checkpoint/record_format.py)."""
    names = ("FORMAT_VERSION", "SST_MANIFEST_FORMAT", "APPENDS_FORMAT", "OP_PUT", "OP_DELETE", "OP_APPEND")
    return {n: int(getattr(record_format, n)) for n in names}


def conf_keys(patterns: bool = False) -> list[NamedKey]:
    """Every key of ALL_KEYS whose suffix is a name, and with `patterns` also those whose suffix is
    a pattern (operator.<operatorId>.ttl)."""
    names = {id(v): n for n, v in vars(K).items() if isinstance(v, K.ConfKey)}
    return [NamedKey(names[id(k)], k) for k in K.ALL_KEYS if patterns or "<" not in k.suffix]


def conf_spec(k: K.ConfKey) -> dict[str, object]:
    """What the shim's `ConfKeys.Spec` of `k` holds (and the cross-language test compares)."""
    return {"key": k.key, "kind": k.kind.value, "default": k.default, "bounds": k.bounds,
            "exclusive": k.exclusive, "off": k.off, "choices": list(k.choice_values), "allowed": k.allowed}


def metrics() -> list[tuple[str, metric_names.MetricName]]:
    names = {id(v): n for n, v in vars(metric_names).items() if isinstance(v, metric_names.MetricName)}
    return [(names[id(m)], m) for m in metric_names.ALL_METRICS]


UNIT_US = parse.UNIT_US
UNIT_BYTES = parse.UNIT_BYTES
OFF_WORDS = K.OFF_WORDS
TIMESTAMP_SIZE = ttl_value.TIMESTAMP_SIZE
