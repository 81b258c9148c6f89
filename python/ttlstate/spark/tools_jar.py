"""The tools jar (`ttlstate-tools-spark<line>.jar`: `ttlstate migrate`, `ttlstate repartition`, the
Scala queries of the tests) from a running session.

The tools jar is not on a session's classpath (`configure` gives the executors only the shim): it
is added to the running context (the executors fetch it for their tasks) and loaded on the driver
by a class loader over the session's, so any session can use it. `call`'s arguments and results are
strings, numbers and the SparkContext: the tool's classes never reach Python."""

from __future__ import annotations

import os
from typing import Any

from ttlstate.spark.jars import tools_jar_path


class ToolError(RuntimeError):
    """A tool failed: its message without the JVM's stack trace."""


def tools_class(spark: Any, name: str) -> Any:
    """The JVM class `name` of the tools jar of `spark`'s line (a py4j `java.lang.Class`)."""
    sc = spark.sparkContext
    jvm = sc._jvm
    path = tools_jar_path()
    added = str(sc._jsc.sc().listJars().mkString("\n")).splitlines()
    if not any(j.endswith("/" + os.path.basename(path)) for j in added):
        sc._jsc.addJar(path)
    urls = sc._gateway.new_array(jvm.java.net.URL, 1)
    urls[0] = jvm.java.io.File(path).toURI().toURL()
    parent = jvm.java.lang.Thread.currentThread().getContextClassLoader()
    return jvm.java.net.URLClassLoader(urls, parent).loadClass(name)


def call(spark: Any, class_name: str, method: str, *args: Any) -> Any:
    """The static `method` of `class_name` (a Scala object's) called with `args`; a failure
    raises ToolError with the JVM exception's message."""
    tool = tools_class(spark, class_name)
    found = next(m for m in tool.getMethods() if m.getName() == method)
    array = spark.sparkContext._gateway.new_array(spark.sparkContext._jvm.java.lang.Object, len(args))
    for i, arg in enumerate(args):
        array[i] = arg
    try:
        return found.invoke(None, array)
    except Exception as e:  # py4j wraps the JVM's error: keep the innermost message
        raise ToolError(_cause(e)) from None


def _cause(e: Exception) -> str:
    """The root cause's message of a py4j error (a reflective call wraps it twice), else its text."""
    java = getattr(e, "java_exception", None)
    while java is not None and java.getCause() is not None:
        java = java.getCause()
    if java is not None and java.getMessage() is not None:
        return str(java.getMessage())
    return str(e).split("\n", 1)[0]
