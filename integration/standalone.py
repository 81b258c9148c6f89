"""A Spark standalone cluster from pyspark's own distribution: a master and `workers` workers
(`spark-class org.apache.spark.deploy.master.Master` / `...worker.Worker`), each its own JVM on
127.0.0.1, the workers with `spark.decommission.enabled` so SIGPWR decommissions one gracefully
(as a cloud's spot-instance notice does). `url` is the `spark://` master; `state()` the master's
JSON view (workers, their state, applications)."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request
from typing import Any

import psutil
import pyspark

from integration.cluster_deps import java_home
from integration.components import _die_with_parent, _tail, free_port

SPARK_HOME = os.path.dirname(pyspark.__file__)


class StandaloneCluster:
    def __init__(self, workers: int = 2, cores: int = 1, memory: str = "2g") -> None:
        self.root = tempfile.mkdtemp(prefix="ttlstate-standalone-")
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYSPARK_")}
        env.update(SPARK_HOME=SPARK_HOME, JAVA_HOME=java_home(), SPARK_LOCAL_IP="127.0.0.1",
                   SPARK_WORKER_OPTS="-Dspark.decommission.enabled=true",
                   SPARK_DAEMON_JAVA_OPTS="-XX:TieredStopAtLevel=1")  # short-lived here: C1 is enough
        spark_class = os.path.join(SPARK_HOME, "bin", "spark-class")
        # Port 0: the master binds free ports itself (a port chosen here could be taken meanwhile,
        # and Spark would quietly bind the next one); its log says which.
        master = ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", "0",
                  "--webui-port", "0"]
        self.master = self._start("master", [spark_class, *master], env)
        self.url = self._from_log(r"Starting Spark master at (spark://\S+)")
        self.web_port = int(self._from_log(r"Successfully started service 'MasterUI' on port (\d+)"))
        self.workers = []
        for i in range(workers):
            local = os.path.join(self.root, f"local-{i}")
            os.makedirs(local)
            worker = ["org.apache.spark.deploy.worker.Worker", self.url, "--host", "127.0.0.1", "--cores",
                      str(cores), "--memory", memory, "--webui-port", str(free_port()),
                      "--work-dir", os.path.join(self.root, f"work-{i}")]
            local_env = {**env, "SPARK_LOCAL_DIRS": local}
            self.workers.append(self._start(f"worker-{i}", [spark_class, *worker], local_env))
        deadline = time.monotonic() + 120
        while self._alive_workers() < workers:
            log = _tail(os.path.join(self.root, "master.log"))
            assert time.monotonic() < deadline, f"workers did not register:\n{log}"
            time.sleep(0.5)

    def _from_log(self, pattern: str, timeout_s: float = 120) -> str:
        """The first group of `pattern` in the master's log, once it is there."""
        log = os.path.join(self.root, "master.log")
        deadline = time.monotonic() + timeout_s
        while True:
            with open(log, errors="replace") as f:
                found = re.search(pattern, f.read())
            if found:
                return found.group(1)
            assert self.master.poll() is None, f"the master exited ({self.master.returncode}):\n{_tail(log)}"
            assert time.monotonic() < deadline, f"no {pattern!r} in the master's log:\n{_tail(log)}"
            time.sleep(0.2)

    def _alive_workers(self) -> int:
        try:
            return len([w for w in self.state()["workers"] if w["state"] == "ALIVE"])
        except OSError:  # the master's web UI comes up after its RPC port
            return 0

    def _start(self, name: str, cmd: list[str], env: dict[str, str]) -> subprocess.Popen:
        with open(os.path.join(self.root, f"{name}.log"), "w") as log:
            return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    env=env, cwd=self.root, preexec_fn=_die_with_parent)

    def state(self) -> dict[str, Any]:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.web_port}/json/", timeout=10) as answer:
            return json.load(answer)

    def worker_of(self, pid: int) -> int:
        """Which worker runs process `pid` (an executor JVM, or a process under one)."""
        pids = {w.pid: i for i, w in enumerate(self.workers)}
        for p in psutil.Process(pid).parents():
            if p.pid in pids:
                return pids[p.pid]
        raise AssertionError(f"process {pid} runs under no worker of this cluster")

    def executors(self, worker: int) -> list[psutil.Process]:
        """The executor JVMs a worker runs now."""
        return executors_of(self.workers[worker].pid)

    def decommission(self, worker: int) -> None:
        """SIGPWR, as a spot-instance notice: the worker decommissions itself and its executors
        (spark.decommission.enabled), which finish their tasks, move their blocks and exit."""
        os.kill(self.workers[worker].pid, signal.SIGPWR)

    def logs(self) -> list[str]:
        found = []
        for top, _dirs, files in os.walk(self.root):
            found += [os.path.join(top, f) for f in files if f in ("stderr", "stdout") or f.endswith(".log")]
        return found

    def stop(self) -> None:
        for proc in [*self.workers, self.master]:
            if proc.poll() is None:
                proc.terminate()
        for proc in [*self.workers, self.master]:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(30)
        shutil.rmtree(self.root, ignore_errors=True)


def executors_of(worker_pid: int) -> list[psutil.Process]:
    """The executor JVMs the standalone worker process `worker_pid` runs now (one that exited and
    awaits its worker's wait() does not run): for whoever knows the worker only by its pid."""
    running = []
    for p in psutil.Process(worker_pid).children():
        try:
            if "CoarseGrainedExecutorBackend" in " ".join(p.cmdline()):
                running.append(p)
        except (psutil.ZombieProcess, psutil.NoSuchProcess):
            continue
    return running
