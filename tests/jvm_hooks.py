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


class HookSession:
    """One hook held open in its JVM, asked one line at a time (the hook flushes each answer): for
    a hypothesis test, which draws its examples one by one. Close it (a context manager)."""

    def __init__(self, hook: str) -> None:
        classpath = f"{jar_path()}:{tools_jar_path()}:{spark_jars()}/*"
        self.proc = subprocess.Popen(["java", "-cp", classpath, f"ttlstate.tools.{hook}"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                     encoding="utf-8", bufsize=1)

    def ask(self, line: str) -> str:
        """The hook's answer to `line` (which must hold no line break)."""
        assert "\n" not in line and "\r" not in line and self.proc.stdin and self.proc.stdout
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        answer = self.proc.stdout.readline()
        if not answer:
            raise RuntimeError(f"the hook ended (exit {self.proc.wait()})")
        return answer.rstrip("\n")

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        self.proc.wait(timeout=60)

    def __enter__(self) -> HookSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
