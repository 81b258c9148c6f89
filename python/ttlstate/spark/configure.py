"""`ttlstate.configure(builder, ttl=...)`: one call turns a SparkSession builder into ttlstate.

It adds the shim jar to `spark.jars`, sets the provider class, our conf keys (validated here,
so a bad value fails before any query starts) and the state server's interpreter (this one).
"""

from __future__ import annotations

import os
import sys
from typing import Any

from ttlstate.config import keys as K
from ttlstate.config.store_config import store_config_from_confs

SUPPORTED_PYSPARK = "4.3"
MIN_PYTHON = (3, 10)
_OPTION_KEYS = {
    "ttl": K.TTL, "update_type": K.UPDATE_TYPE, "state_visibility": K.STATE_VISIBILITY,
    "time_source": K.TIME_SOURCE, "full_snapshot": K.FULL_SNAPSHOT,
    "incremental_size": K.INCREMENTAL_SIZE, "incremental_per_record": K.INCREMENTAL_PER_RECORD,
    "compaction_filter": K.FILTER_ENABLED, "query_time_after_num_entries": K.FILTER_QUERY_TIME_AFTER,
    "periodic_compaction": K.FILTER_PERIODIC_COMPACTION, "compact_every": K.FILTER_COMPACT_EVERY,
    "engine": K.ENGINE,
    "snapshot_interval": K.SNAPSHOT_INTERVAL, "python": K.PYTHON, "workers": K.WORKERS,
    "write_batch_bytes": K.WRITE_BATCH_SIZE, "key_filter_max_keys": K.KEY_FILTER_MAX_KEYS,
    "memory_max_bytes": K.MEMORY_MAX_BYTES, "memory_write_buffer_ratio": K.MEMORY_WRITE_BUFFER_RATIO,
    "cache_max_bytes": K.CACHE_MAX_BYTES, "request_timeout": K.REQUEST_TIMEOUT,
}


class UnsupportedEnvironment(RuntimeError):
    pass


def jar_path() -> str:
    """The shim jar inside the installed package."""
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "jars",
                        "ttlstate-shim.jar")
    if not os.path.exists(path):
        raise FileNotFoundError(f"ttlstate shim jar not found at {path}: run `make setup` (or "
                                "`make jar`) in the ttlstate source tree")
    return path


def check_environment() -> None:
    import pyspark

    if not pyspark.__version__.startswith(SUPPORTED_PYSPARK + "."):
        raise UnsupportedEnvironment(
            f"ttlstate is built against Spark {SUPPORTED_PYSPARK}.x (its state store API changes "
            f"between minor releases); this is pyspark {pyspark.__version__}. Install "
            f"pyspark=={SUPPORTED_PYSPARK}.*.")
    if sys.version_info < MIN_PYTHON:
        raise UnsupportedEnvironment(
            f"ttlstate needs Python >= {'.'.join(map(str, MIN_PYTHON))}; this is {sys.version.split()[0]}")


def settings(**options: Any) -> dict[str, str]:
    """The Spark confs for these options (names as in `configure`), validated."""
    unknown = set(options) - set(_OPTION_KEYS) - {"operator_ttl"}
    if unknown:
        raise TypeError(f"unknown ttlstate option(s) {sorted(unknown)}; known: {sorted(_OPTION_KEYS)}, "
                        "operator_ttl")
    confs = {K.PROVIDER_CLASS_KEY: K.PROVIDER_CLASS, K.PYTHON.key: sys.executable}
    for name, value in options.items():
        if name == "operator_ttl":
            for op_id, ttl in dict(value).items():
                confs[K.operator_ttl_key(int(op_id))] = str(ttl)
        elif value is not None:
            v = str(value).lower() if isinstance(value, bool) else str(value)
            confs[_OPTION_KEYS[name].key] = v
    store_config_from_confs(confs)
    return confs


def configure(builder: Any, **options: Any) -> Any:
    """Configure a `SparkSession.Builder` for ttlstate; returns the builder.

    Options: ttl ("30m"), update_type, state_visibility, time_source, full_snapshot,
    incremental_size, incremental_per_record, compaction_filter, query_time_after_num_entries,
    periodic_compaction, compact_every, engine, snapshot_interval, python, workers, write_batch_bytes,
    key_filter_max_keys, memory_max_bytes, memory_write_buffer_ratio, cache_max_bytes, request_timeout,
    and operator_ttl ({operator_id: "10m" or "off"}). See the README's conf table.
    """
    check_environment()
    confs = settings(**options)
    existing = builder._options.get("spark.jars", "") if hasattr(builder, "_options") else ""
    jars = [j for j in existing.split(",") if j] + [jar_path()]
    builder = builder.config("spark.jars", ",".join(dict.fromkeys(jars)))
    for key, value in confs.items():
        builder = builder.config(key, value)
    return builder
