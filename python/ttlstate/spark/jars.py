"""Which shim jar: one per Spark line inside the package (the wheel carries them all), picked for
the Spark that runs or is installed (python/ttlstate/spark/lines.py lists the lines)."""

from __future__ import annotations

import os
from typing import Any

from ttlstate.spark.lines import SparkLine, UnsupportedSpark, line_for


def spark_version() -> str:
    """The Spark the jars are picked for: the running driver JVM's if there is one (its
    SPARK_VERSION), else the installed pyspark's, else $SPARK_HOME's (a cluster node with its own
    Spark and no pyspark)."""
    jvm = _running_jvm_if_any()
    if jvm is not None:
        return str(getattr(getattr(jvm.org.apache.spark, "package$"), "MODULE$").SPARK_VERSION())
    installed = installed_spark()
    if installed is not None:
        return installed[0]
    raise UnsupportedSpark("ttlstate cannot tell which Spark to pick the shim jar for: no pyspark is "
                           "installed and SPARK_HOME is not set; name it, e.g. `ttlstate jar --spark 4.2`")


def installed_spark() -> tuple[str, str] | None:
    """The installed Spark's version and what it is ("pyspark", or "$SPARK_HOME's Spark"), if any."""
    try:
        import pyspark

        return str(pyspark.__version__), "pyspark"
    except ImportError:
        pass
    home = os.environ.get("SPARK_HOME")
    if home:
        import glob
        import re

        for path in sorted(glob.glob(os.path.join(home, "jars", "spark-core_*.jar"))):
            match = re.search(r"spark-core_[\d.]+-(\d+\.\d+\.\d+)", os.path.basename(path))
            if match:
                return match.group(1), "$SPARK_HOME's Spark"
    return None


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
    folder = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "jars")
    path = os.path.join(folder, name)
    if not os.path.exists(path):
        present = sorted(f for f in os.listdir(folder) if f.endswith(".jar")) if os.path.isdir(folder) else []
        raise FileNotFoundError(
            f"ttlstate jar {name} not found at {path}: this ttlstate has "
            f"{'the jars ' + ', '.join(present) if present else 'no jar'}. A wheel of `make wheel` carries "
            "every Spark line's; a source install compiles the one of the Spark installed when it was "
            "built: install the Spark you run first, then ttlstate again (`pip install --force-reinstall "
            "--no-deps --no-cache-dir <source>`). In a source checkout: `make jar` (the dev venv's Spark) "
            "or `make jars` (every line).")
    return path


def _running_jvm_if_any() -> Any:
    """The driver JVM's py4j view if one runs in (or for) this process, without connecting to one."""
    try:
        from pyspark import SparkContext
    except ImportError:
        return None
    return SparkContext._jvm
