"""The facts the other languages take from Python, read from their single definitions."""

from __future__ import annotations

from dataclasses import dataclass

from ttlstate.config import keys as K
from ttlstate.config import parse, store_config
from ttlstate.server import protocol
from ttlstate.store import metric_names
from ttlstate.ttl import ttl_value


@dataclass(frozen=True)
class NamedKey:
    name: str  # the Python name in config/keys.py
    key: K.ConfKey


def protocol_constants() -> dict[str, int]:
    return protocol.constants()


def conf_keys() -> list[NamedKey]:
    """Every key of ALL_KEYS whose suffix is a name (not a pattern such as operator.<id>.ttl)."""
    names = {id(v): n for n, v in vars(K).items() if isinstance(v, K.ConfKey)}
    return [NamedKey(names[id(k)], k) for k in K.ALL_KEYS if "<" not in k.suffix]


def conf_minimums_ms() -> dict[str, int]:
    """Lower bounds the shim applies itself before the server validates the value."""
    return {"MIN_REQUEST_TIMEOUT_MS": store_config.MIN_REQUEST_TIMEOUT_MS,
            "MIN_REAL_TIME_CLOCK_INTERVAL_MS": store_config.MIN_REAL_TIME_CLOCK_INTERVAL_MS}


def metrics() -> list[tuple[str, metric_names.MetricName]]:
    names = {id(v): n for n, v in vars(metric_names).items() if isinstance(v, metric_names.MetricName)}
    return [(names[id(m)], m) for m in metric_names.ALL_METRICS]


UNIT_US = parse.UNIT_US
UNIT_BYTES = parse.UNIT_BYTES
TIMESTAMP_SIZE = ttl_value.TIMESTAMP_SIZE
