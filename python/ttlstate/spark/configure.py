"""`ttlstate.configure(builder, ttl=...)`: one call turns a SparkSession builder into ttlstate.

It adds the shim jar to `spark.jars`, the start-time checks to `spark.sql.extensions`, the
executors' early state server start to `spark.plugins`, sets the provider class and our conf
keys (validated here, so a bad value fails before any query starts), and says which
interpreter runs the state server: the `python` option if given, else the driver's
PYSPARK_PYTHON (the interpreter PySpark itself gives the executors' Python workers); and, for
local mode only, this one (`localModePython`, which executors of a cluster never use).

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
from ttlstate.config.store_config import store_config_from_confs
from ttlstate.spark.lines import SparkLine, UnsupportedSpark, line_for
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
    4.3's), as the installed package's metadata carries it, so it is stated once. None when
    ttlstate runs from a source tree without being installed (nothing then checked it either)."""
    import importlib.metadata
    import re

    try:
        spec = importlib.metadata.metadata("ttlstate").get("Requires-Python") or ""
    except importlib.metadata.PackageNotFoundError:
        return None
    m = re.fullmatch(r"\s*>=\s*(\d+)\.(\d+)\s*", spec)
    return (int(m.group(1)), int(m.group(2))) if m else None


MIN_PYTHON = _requires_python()
log = logging.getLogger("ttlstate.configure")


class UnsupportedEnvironment(RuntimeError):
    pass


__all__ = ["UnsupportedSpark", "configure", "jar_path", "settings", "tools_jar_path"]


class ShimNotLoadable(RuntimeError):
    """The driver JVM is running and cannot load the shim: spark.jars set now would not reach it."""


def spark_version() -> str:
    """The Spark the jars are picked for: the running driver JVM's if there is one (its
    SPARK_VERSION), else the installed pyspark's, else $SPARK_HOME's (a cluster node with its own
    Spark and no pyspark)."""
    jvm = _running_jvm_if_any()
    if jvm is not None:
        return str(getattr(getattr(jvm.org.apache.spark, "package$"), "MODULE$").SPARK_VERSION())
    try:
        import pyspark

        return str(pyspark.__version__)
    except ImportError:
        pass
    home = os.environ.get("SPARK_HOME")
    if home:
        import glob
        import re

        for path in sorted(glob.glob(os.path.join(home, "jars", "spark-core_*.jar"))):
            match = re.search(r"spark-core_[\d.]+-(\d+\.\d+\.\d+)", os.path.basename(path))
            if match:
                return match.group(1)
    raise UnsupportedSpark("ttlstate cannot tell which Spark to pick the shim jar for: no pyspark is "
                           "installed and SPARK_HOME is not set; name it, e.g. `ttlstate jar --spark 4.2`")


def spark_line(spark: str | None = None) -> SparkLine:
    """The Spark line of `spark` (a version such as "4.2" or "4.2.1"), by default `spark_version()`'s."""
    return line_for(spark or spark_version())


def jar_path(spark: str | None = None) -> str:
    """The shim jar inside the installed package for Spark `spark` (default: the running or
    installed Spark, `spark_version()`): what Spark's driver and executors load. One per Spark
    line; the wheel carries them all."""
    return _packaged_jar(spark_line(spark).jar)


def tools_jar_path(spark: str | None = None) -> str:
    """The tools jar next to it: `ttlstate migrate` and the tests' command-line hooks, compiled
    against the shim and kept out of the executors' classpath."""
    return _packaged_jar(spark_line(spark).tools_jar)


def _packaged_jar(name: str) -> str:
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "jars", name)
    if not os.path.exists(path):
        raise FileNotFoundError(f"ttlstate jar {name} not found at {path}: the wheel carries every Spark "
                                "line's jars; in a source checkout run `make jar` (the dev venv's Spark) "
                                "or `make jars` (every line)")
    return path


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


def settings(**options: Any) -> dict[str, str]:
    """The Spark confs for these options (names as in `configure`), validated."""
    unknown = set(options) - set(OPTION_KEYS) - {OPERATOR_TTL_OPTION}
    if unknown:
        import difflib

        known = sorted([*OPTION_KEYS, OPERATOR_TTL_OPTION])
        hints = [f"{u!r} (did you mean {close[0]!r}?)" if (close := difflib.get_close_matches(u, known, 1))
                 else repr(u) for u in sorted(unknown)]
        raise TypeError(f"unknown ttlstate option(s) {', '.join(hints)}; known: {', '.join(known)}")
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

    The state server's interpreter: `python` if given, else the driver's PYSPARK_PYTHON if set
    (PySpark gives that one to the executors' Python workers too), else the executor's
    PYSPARK_PYTHON, else, in local mode only, this interpreter, else python3.
    """
    check_environment()
    confs = settings(**options)
    note = ttl_off_note(confs)
    if note:
        log.info(note)
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
    return builder


# The option list is the keys' (spark/options.py); under `python -OO` there is no docstring.
configure.__doc__ = configure.__doc__.replace("{OPTIONS}", options_doc("    ")) if configure.__doc__ else None


def _running_jvm_if_any() -> Any:
    """The driver JVM's py4j view if one runs in (or for) this process, without connecting to one."""
    try:
        from pyspark import SparkContext
    except ImportError:
        return None
    return SparkContext._jvm


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
