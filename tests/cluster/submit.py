"""spark-submit of tests/cluster/stream_job.py as a user runs it, and watching it run.

`yarn_args` are the lines docs/cluster.md gives for YARN (a packed venv shipped with
`--archives`, `spark.pyspark.python=./environment/bin/python`, the shim and Kafka connector jars
with `--jars`), plus `spark.yarn.jars=local:...` (the "nodes" here have pyspark's jars, so YARN
need not upload 460 MB per application) and TEST_ONLY."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass

import pyspark
from integration.components import _die_with_parent, extra_jars

from tests.spark.harness import FAST_JVM
from ttlstate.spark.configure import EXTENSIONS_CLASS, jar_path

SPARK_HOME = os.path.dirname(pyspark.__file__)
JOB = os.path.join(os.path.dirname(os.path.abspath(__file__)), "stream_job.py")


def jars() -> str:
    """The shim and Spark's Kafka connector with what it needs (kafka-clients, commons-pool2,
    the token provider)."""
    return ",".join([jar_path(), *extra_jars("spark-kafka")])


# Lines only this machine needs, not a cluster: JIT compilation stopped at C1 (FAST_JVM: the JVMs
# here live minutes on two cores shared by four test runs, and C2's compiler threads took their
# CPU), and no Spark UI (the driver's, with YARN's proxy filter added to it while it starts, once failed
# with a ConcurrentModificationException inside Jetty in client mode).
TEST_ONLY = ["--conf", "spark.ui.enabled=false", "--driver-java-options", FAST_JVM,
             "--conf", f"spark.executor.extraJavaOptions={FAST_JVM}",
             "--conf", f"spark.yarn.am.extraJavaOptions={FAST_JVM}"]


def yarn_args(mode: str, venv: str) -> list[str]:
    driver_python = ["--conf", f"spark.pyspark.driver.python={sys.executable}"] if mode == "client" else []
    return ["--master", "yarn", "--deploy-mode", mode,
            "--archives", f"{venv}#environment", "--conf", "spark.pyspark.python=./environment/bin/python",
            *driver_python, "--jars", jars(), "--conf", f"spark.sql.extensions={EXTENSIONS_CLASS}",
            "--num-executors", "2", "--executor-cores", "1", "--executor-memory", "1g",
            "--driver-memory", "512m", "--conf", "spark.yarn.am.memory=512m",
            "--conf", "spark.yarn.maxAppAttempts=2",
            "--conf", f"spark.yarn.jars=local:{SPARK_HOME}/jars/*", *TEST_ONLY]


def job_args(bootstrap: str, topic: str, root: str, runs: list[str], rows_per_batch: int,
             pause_dir: str | None = None) -> list[str]:
    return [JOB, "--bootstrap", bootstrap, "--input", topic, "--root", root, "--rows-per-batch",
            str(rows_per_batch), *(a for r in runs for a in ("--run", r)),
            *(["--pause-dir", pause_dir] if pause_dir else [])]


@dataclass
class Submitted:
    proc: subprocess.Popen
    out: str
    err: str
    started: float

    def wait(self, timeout_s: float) -> int:
        try:
            return self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(30)
            raise AssertionError(f"spark-submit still running after {timeout_s:.0f} s; its log:\n"
                                 f"{self.tail()}") from None

    def stdout(self) -> str:
        with open(self.out, errors="replace") as f:
            return f.read()

    def tail(self, n: int = 60) -> str:
        with open(self.err, errors="replace") as f:
            return "".join(f.readlines()[-n:])


def spark_submit(args: list[str], logdir: str, name: str, env: dict[str, str] | None = None) -> Submitted:
    """Starts pyspark's own spark-submit; stdout and stderr go to logdir/name.{out,err}."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("PYSPARK_") and k != "SPARK_HOME"}
    out, err = os.path.join(logdir, f"{name}.out"), os.path.join(logdir, f"{name}.err")
    with open(out, "w") as o, open(err, "w") as e:
        proc = subprocess.Popen([os.path.join(SPARK_HOME, "bin", "spark-submit"), *args], stdout=o,
                                stderr=e, stdin=subprocess.DEVNULL, cwd=logdir, preexec_fn=_die_with_parent,
                                env={**clean, "SPARK_HOME": SPARK_HOME, **(env or {})})
    return Submitted(proc, out, err, time.monotonic())


def wait_for_file(path: str, submitted: Submitted, timeout_s: float = 300) -> str:
    """The content of `path` once it exists; fails if spark-submit exits first."""
    deadline = time.monotonic() + timeout_s
    while not os.path.exists(path):
        if submitted.proc.poll() is not None:
            raise AssertionError(f"spark-submit exited ({submitted.proc.returncode}) before {path}:\n"
                                 f"{submitted.tail()}")
        assert time.monotonic() < deadline, f"no {path} after {timeout_s:.0f} s:\n{submitted.tail()}"
        time.sleep(0.2)
    with open(path) as f:
        return f.read()
