"""`ttlstate.configure(builder, ttl=...)`: one call turns a SparkSession builder into ttlstate.

It adds the shim jar to `spark.jars`, the start-time checks to `spark.sql.extensions`, sets the
provider class, our conf keys (validated here, so a bad value fails before any query starts)
and the state server's interpreter (this one).

`spark.jars` reaches the driver only when this Python process launches the JVM (`python
job.py`). Under `spark-submit job.py`, in the `pyspark` shell or in a notebook whose session
already exists, the driver JVM is running already: there the shim must have been given at
launch (`--jars`, spark-defaults.conf), and `configure` checks that the JVM can load it,
raising at once with the exact fix if it cannot.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from ttlstate.config import keys as K
from ttlstate.config.store_config import store_config_from_confs

SUPPORTED_PYSPARK = "4.3"
EXTENSIONS_KEY = "spark.sql.extensions"
EXTENSIONS_CLASS = "ttlstate.spark.TtlStateExtensions"
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


class ShimNotLoadable(RuntimeError):
    """The driver JVM is running and cannot load the shim: spark.jars set now would not reach it."""


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
        import difflib

        known = sorted([*_OPTION_KEYS, "operator_ttl"])
        hints = [f"{u!r} (did you mean {close[0]!r}?)" if (close := difflib.get_close_matches(u, known, 1))
                 else repr(u) for u in sorted(unknown)]
        raise TypeError(f"unknown ttlstate option(s) {', '.join(hints)}; known: {', '.join(known)}")
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
    pending = getattr(builder, "_options", {})
    jvm = _running_jvm()
    if jvm is None:  # this process launches the JVM: spark.jars reaches the driver and executors
        jars = [j for j in pending.get("spark.jars", "").split(",") if j] + [jar_path()]
        builder = builder.config("spark.jars", ",".join(dict.fromkeys(jars)))
    else:
        _require_loadable(jvm)
    session = _active_session()
    if session is None:
        extensions = [e for e in pending.get(EXTENSIONS_KEY, "").split(",") if e] + [EXTENSIONS_CLASS]
        builder = builder.config(EXTENSIONS_KEY, ",".join(dict.fromkeys(extensions)))
    elif EXTENSIONS_CLASS not in session.sparkContext.getConf().get(EXTENSIONS_KEY, ""):
        import warnings

        warnings.warn(
            f"ttlstate: this SparkSession was created without {EXTENSIONS_KEY}={EXTENSIONS_CLASS} "
            "(a static conf: it cannot be added to a running session), so ttlstate's start-time checks "
            "(a checkpoint pinned to another provider, conf errors before the first batch) are off in "
            f"it. Launch with --conf {EXTENSIONS_KEY}={EXTENSIONS_CLASS}.", stacklevel=2)
    for key, value in confs.items():
        builder = builder.config(key, value)
    return builder


def _running_jvm() -> Any:
    """The driver JVM's py4j view if the JVM is already running (an existing SparkContext, or
    `spark-submit` / the `pyspark` shell, which start the JVM before Python); None if this
    process will launch it."""
    from pyspark import SparkContext

    if SparkContext._jvm is None and os.environ.get("PYSPARK_GATEWAY_PORT"):
        SparkContext._ensure_initialized()  # connects to the running JVM; creates no context
    return SparkContext._jvm


def _active_session() -> Any:
    from pyspark.sql import SparkSession

    return SparkSession.getActiveSession()


def launch_fix(jar: str) -> str:
    """How to give the running driver the shim: the lines the error message and the README show."""
    return (f"  spark-submit --jars {jar} --conf {EXTENSIONS_KEY}={EXTENSIONS_CLASS} job.py\n"
            f"  pyspark --jars {jar} --conf {EXTENSIONS_KEY}={EXTENSIONS_CLASS}\n"
            "or these lines in $SPARK_HOME/conf/spark-defaults.conf:\n"
            f"  spark.jars            {jar}\n"
            f"  {EXTENSIONS_KEY}  {EXTENSIONS_CLASS}\n"
            "In a notebook: restart the kernel and call ttlstate.configure(...).getOrCreate() before "
            "anything else starts Spark, or set PYSPARK_SUBMIT_ARGS=\"--jars "
            f"{jar} pyspark-shell\" before the first session.")


def _require_loadable(jvm: Any) -> None:
    try:
        jvm.org.apache.spark.util.Utils.classForName(K.PROVIDER_CLASS, False, False)
    except Exception:  # py4j's Py4JJavaError: ClassNotFoundException
        jar = jar_path()
        raise ShimNotLoadable(
            "ttlstate: the driver JVM is already running (spark-submit, the pyspark shell, or an existing "
            f"SparkSession) and cannot load {K.PROVIDER_CLASS}; spark.jars set now would not reach it "
            "(Spark reads it only when the JVM starts), and every stateful query would fail with "
            "ClassNotFoundException. Give the JVM the shim jar when it starts:\n" + launch_fix(jar)
        ) from None
