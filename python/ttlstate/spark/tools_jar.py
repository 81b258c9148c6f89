"""A class of the tools jar (`ttlstate migrate`, the Scala queries of the tests) in a running session.

The tools jar is not on a session's classpath (`configure` gives the executors only the shim): it
is added to the running context (the executors fetch it for their tasks) and loaded on the driver
by a class loader over the session's, so any session can use it."""

from __future__ import annotations

import os
from typing import Any

from ttlstate.spark.jars import tools_jar_path


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
