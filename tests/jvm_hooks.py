"""Runs one of the shim's command-line test hooks (`ttlstate.tools.<Hook>` in the tools jar) in a
fresh JVM, with the shim jar, the tools jar and pyspark's jars on the classpath."""

from __future__ import annotations

import os
import subprocess

import pyspark

from ttlstate.spark.configure import jar_path, tools_jar_path


def spark_jars() -> str:
    return os.path.join(os.path.dirname(pyspark.__file__), "jars")


def run_hook(hook: str, *args: str, stdin: str | None = None) -> str:
    """The hook's stdout; raises CalledProcessError (with its stderr) if it fails."""
    classpath = f"{jar_path()}:{tools_jar_path()}:{spark_jars()}/*"
    out = subprocess.run(["java", "-cp", classpath, f"ttlstate.tools.{hook}", *args], input=stdin,
                         capture_output=True, text=True, timeout=120, check=True)
    return out.stdout
