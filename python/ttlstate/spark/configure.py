"""`ttlstate.configure(builder, ttl=...)`: one call turns a SparkSession builder into ttlstate.

It adds the shim jar to `spark.jars`, the start-time checks to `spark.sql.extensions`, the
executors' early state server start to `spark.plugins`, sets the provider class and our conf
keys (validated here, so a bad value fails before any query starts), reserves the state
server's memory in the executors' containers (`spark.executor.memoryOverhead`, see
executor_memory.py), and says which
interpreter runs the state server: the `python` option if given, else the driver's
PYSPARK_PYTHON (the interpreter PySpark itself gives the executors' Python workers; without
either the shim follows `spark.pyspark.python`); and, for local mode and for the checks at
query start, this one (`localModePython`, which executors of a cluster never use).

`spark.jars` reaches the driver only when this Python process launches the JVM (`python
job.py`). Under `spark-submit job.py`, in the `pyspark` shell or in a notebook whose session
already exists, the driver JVM is running already: there the shim must have been given at
launch (`--jars`, spark-defaults.conf), and `configure` checks that the JVM can load it,
raising at once with the exact fix if it cannot.

The keyword arguments are the `configure()` option column of the configuration reference
(docs/configuration.md), defined once with the keys (`ConfKey.option`).
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping
from typing import Any

from ttlstate.config import keys as K
from ttlstate.config.store_config import operator_of_key, store_config_from_confs
from ttlstate.spark.jars import jar_path, spark_line, spark_version, tools_jar_path
from ttlstate.spark.lines import OPERATOR_NAMES_SINCE, UnsupportedSpark, minor_of, operator_names_known
from ttlstate.spark.options import (
    OPERATOR_TTL_OPTION,
    OPTION_KEYS,
    conf_value,
    operator_ttl_confs,
    options_doc,
)

EXTENSIONS_KEY = "spark.sql.extensions"
EXTENSIONS_CLASS = "ttlstate.spark.TtlStateExtensions"
PLUGINS_KEY = "spark.plugins"
PLUGIN_CLASS = "ttlstate.spark.StateServerPlugin"  # starts each executor's state server early


def _requires_python() -> tuple[int, int] | None:
    """The lowest Python ttlstate supports: pyproject's `requires-python` (`>=3.11`, pyspark
    4.3's floor), as the installed package's metadata carries it, so it is stated once. None when
    ttlstate runs from a source tree without being installed (nothing then checked it either)."""
    import importlib.metadata
    import re

    try:
        spec = importlib.metadata.metadata("ttlstate")["Requires-Python"] or ""
    except importlib.metadata.PackageNotFoundError:
        return None
    m = re.fullmatch(r"\s*>=\s*(\d+)\.(\d+)\s*", spec)
    return (int(m.group(1)), int(m.group(2))) if m else None


MIN_PYTHON = _requires_python()
log = logging.getLogger("ttlstate.configure")


class UnsupportedEnvironment(RuntimeError):
    pass


__all__ = ["UnsupportedSpark", "configure", "jar_path", "settings", "spark_version", "tools_jar_path"]


class ShimNotLoadable(RuntimeError):
    """The driver JVM is running and cannot load the shim: spark.jars set now would not reach it."""


def check_environment() -> None:
    """Fails at once, naming the supported Spark lines, on a Spark no shim jar serves, and on a
    Python older than the package's floor."""
    try:
        spark_line()
    except UnsupportedSpark as e:
        raise UnsupportedEnvironment(str(e)) from None
    if MIN_PYTHON is not None and sys.version_info < MIN_PYTHON:
        raise UnsupportedEnvironment(
            f"ttlstate needs Python >= {'.'.join(map(str, MIN_PYTHON))}; this is {sys.version.split()[0]}")


def check_interpreter(option: str, python: str) -> None:
    """An absolute interpreter path must exist here, or every task fails at its first batch. A
    relative one (`./environment/bin/python` of an `--archives` venv) is resolved in each
    executor's working directory, and a bare name on its PATH: neither can be checked here."""
    if os.path.isabs(python) and not (os.path.isfile(python) and os.access(python, os.X_OK)):
        raise ValueError(f"{option}={python!r}: no executable file at that path on this machine; give "
                         "an interpreter with ttlstate installed, or a path relative to the executors' "
                         "working directory such as ./environment/bin/python (a venv shipped with "
                         "--archives venv.tar.gz#environment)")


def settings(**options: Any) -> dict[str, str]:
    """The Spark confs for these options (names as in `configure`), validated."""
    unknown = set(options) - set(OPTION_KEYS) - {OPERATOR_TTL_OPTION}
    if unknown:
        import difflib

        known = sorted([*OPTION_KEYS, OPERATOR_TTL_OPTION])
        hints = [f"{u!r} (did you mean {close[0]!r}?)" if (close := difflib.get_close_matches(u, known, 1))
                 else repr(u) for u in sorted(unknown)]
        raise TypeError(f"unknown ttlstate option(s) {', '.join(hints)}; known: {', '.join(known)}")
    for name in (K.PYTHON.option, K.LOCAL_MODE_PYTHON.option):
        if options.get(name) is not None:
            check_interpreter(name, str(options[name]))
    confs = {K.PROVIDER_CLASS_KEY: K.PROVIDER_CLASS, K.LOCAL_MODE_PYTHON.key: sys.executable}
    pyspark_python = os.environ.get("PYSPARK_PYTHON")
    if pyspark_python:
        confs[K.PYTHON.key] = pyspark_python
    for name, value in options.items():
        if value is None:
            continue
        if name == OPERATOR_TTL_OPTION:
            confs.update(operator_ttl_confs(value))
        else:
            confs[OPTION_KEYS[name].key] = conf_value(OPTION_KEYS[name], name, value)
    store_config_from_confs(confs)
    return confs


def operator_names_message(confs: Mapping[str, str], spark: str) -> str | None:
    """Why an `operator.<name>.ttl` key cannot work on Spark `spark`, on a line whose checkpoints do
    not name their operators (3.5): refused here, before any query (the shim's start checks say
    the same to conf lines). None where it can."""
    if operator_names_known(minor_of(spark)):
        return None
    named = sorted(k for k in confs if isinstance(operator_of_key(k), str))
    if not named:
        return None
    key = named[0]
    return (f"Invalid conf '{key}' (set to '{confs[key]}'): operator names are allowed on Spark "
            f"{OPERATOR_NAMES_SINCE} and later, whose checkpoints record each stateful operator's name; this "
            f"is Spark {spark}. Give the operator by its id instead: {K.operator_ttl_key('<operatorId>')} "
            "(operator_ttl={0: ...} in configure()), the number of its folder under <checkpoint>/state, "
            "which `ttlstate inspect CHECKPOINT` lists; a query with one stateful operator has only 0.")


def ttl_off_note(confs: Mapping[str, str]) -> str | None:
    """The one line saying TTL is off, for confs whose global `ttl` is (None when it is on)."""
    if K.TTL.parse(confs.get(K.TTL.key, K.TTL.default)) is not None:
        return None
    own = sorted(k for k, v in confs.items()
                 if k.startswith(K.PREFIX + "operator.") and K.OPERATOR_TTL.parse(v, key=k) is not None)
    scope = f"operators without an operator_ttl entry (with one: {', '.join(own)})" if own else "every query"
    return (f"ttlstate: TTL is off for {scope} of this session (no ttl= given, or ttl=\"off\"): their state "
            "is kept as Spark's own providers keep it. Pass ttl=\"30m\" (or any duration) to expire keys "
            "untouched that long.")


def configure(builder: Any, **options: Any) -> Any:
    """Configure a `SparkSession.Builder` for ttlstate; returns the builder.

    Every option is a conf key of the configuration reference (its `configure()` column), a
    string as in a conf or a Python value of the key's kind (a bare number is no duration: it
    has no unit); a bad value fails here, before any query starts:

{OPTIONS}

    With a Spark Connect builder (`SparkSession.builder.remote(...)`) it sets what a session can
    set (the provider and ttlstate's keys), after checking that the server was started with
    ttlstate's jar, extension and plugin (CONNECT_SERVER_CONFS); if not, it raises
    ShimNotLoadable in one line naming them.

    The state server's interpreter: `python` if given, else the driver's PYSPARK_PYTHON if set
    (PySpark gives that one to the executors' Python workers too), else `spark.pyspark.python`,
    else the executor's PYSPARK_PYTHON, else, in local mode only, this interpreter, else python3.
    An absolute `python` that does not exist here is refused at once.
    """
    check_environment()
    confs = settings(**options)
    refusal = operator_names_message(confs, spark_version())
    if refusal:
        raise ValueError(refusal)
    note = ttl_off_note(confs)
    if note:
        log.info(note)
    if _is_connect(builder):
        return _configure_connect(builder, confs, options)
    pending = getattr(builder, "_options", {})
    jvm = _running_jvm()
    if jvm is None:  # this process launches the JVM: spark.jars reaches the driver and executors
        jars = [j for j in pending.get("spark.jars", "").split(",") if j] + [jar_path()]
        builder = builder.config("spark.jars", ",".join(dict.fromkeys(jars)))
    else:
        _require_loadable(jvm)
        if pending.get("spark.jars"):  # a new context's spark.jars replaces the launch's: keep the shim on it
            jars = [j for j in pending["spark.jars"].split(",") if j] + [jar_path()]
            builder = builder.config("spark.jars", ",".join(dict.fromkeys(jars)))
    session = _active_session()
    if session is None:  # static confs: only a session not created yet takes them
        for key, value in ((EXTENSIONS_KEY, EXTENSIONS_CLASS), (PLUGINS_KEY, PLUGIN_CLASS)):
            values = [e for e in pending.get(key, "").split(",") if e] + [value]
            builder = builder.config(key, ",".join(dict.fromkeys(values)))
    elif EXTENSIONS_CLASS not in session.sparkContext.getConf().get(EXTENSIONS_KEY, ""):
        import warnings

        warnings.warn(
            f"ttlstate: this SparkSession was created without {EXTENSIONS_KEY}={EXTENSIONS_CLASS} "
            "(a static conf: it cannot be added to a running session), so ttlstate's start-time checks "
            "(a checkpoint pinned to another provider, conf errors before the first batch) are off in "
            f"it. Launch with --conf {EXTENSIONS_KEY}={EXTENSIONS_CLASS}.", stacklevel=2)
    for key, value in confs.items():
        builder = builder.config(key, value)
    return _reserve_server_memory(builder, confs, jvm)


def _reserve_server_memory(builder: Any, confs: dict[str, str], jvm: Any) -> Any:
    """Sets (or checks) spark.executor.memoryOverhead so the executor's container has room for
    the state server (executor_memory.py), reading each Spark conf from the builder, else from
    the running JVM's SparkConf (spark-submit's --conf and --executor-memory)."""
    from ttlstate.spark import executor_memory

    pending = getattr(builder, "_options", {})
    launched = {}
    if jvm is not None:
        from pyspark import SparkConf

        launched = dict(SparkConf().getAll())
    value, warning = executor_memory.overhead_setting(lambda k: pending.get(k, launched.get(k)), confs)
    if warning:
        import warnings

        warnings.warn(warning, stacklevel=3)
    return builder.config(executor_memory.OVERHEAD_KEY, value) if value else builder


CONNECT_SERVER_CONFS = (f"--jars $(ttlstate jar) --conf {EXTENSIONS_KEY}={EXTENSIONS_CLASS} "
                        f"--conf {PLUGINS_KEY}={PLUGIN_CLASS}")


def _is_connect(builder: Any) -> bool:
    """A Spark Connect client's builder (`.remote(...)`, SPARK_REMOTE, or pyspark-connect's)."""
    if "spark.remote" in getattr(builder, "_options", {}) or os.environ.get("SPARK_REMOTE"):
        return True
    return type(builder).__module__.startswith("pyspark.sql.connect")


def _configure_connect(builder: Any, confs: dict[str, str], options: dict[str, Any]) -> Any:
    """A Connect client cannot give the server a jar, an extension or a plugin, nor its
    executors an interpreter: the server is started with them (CONNECT_SERVER_CONFS, and
    `spark.pyspark.python`). What a session can set, it sets: the provider and ttlstate's keys,
    which the builder applies to the session (`spark.conf.set` does the same per query). It
    connects (a Connect session is a channel, and `getOrCreate()` later returns the same one)
    to check that the server runs ttlstate's extension, and refuses in one line if not."""
    skip = {K.LOCAL_MODE_PYTHON.key} | (set() if options.get(K.PYTHON.option) else {K.PYTHON.key})
    for key, value in confs.items():
        if key not in skip:
            builder = builder.config(key, value)
    session = builder.getOrCreate()
    if EXTENSIONS_CLASS not in (session.conf.get(EXTENSIONS_KEY, "") or ""):
        raise ShimNotLoadable(f"ttlstate: this Spark Connect server runs without ttlstate (its "
                              f"{EXTENSIONS_KEY} lacks {EXTENSIONS_CLASS}): start it with "
                              f"start-connect-server.sh {CONNECT_SERVER_CONFS}")
    return builder


# The option list is the keys' (spark/options.py); under `python -OO` there is no docstring.
configure.__doc__ = configure.__doc__.replace("{OPTIONS}", options_doc("    ")) if configure.__doc__ else None


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
