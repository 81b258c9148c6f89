"""Hadoop's MiniDFSCluster and MiniYARNCluster in their own JVM (integration/cluster/YarnCluster.java):
two DataNodes, a ResourceManager and two NodeManagers with the physical-memory check on, all on
127.0.0.1. `conf_dir` holds the core-site.xml and yarn-site.xml a `spark-submit --master yarn`
reads (HADOOP_CONF_DIR); `fs_url` is the HDFS. Commands go to the JVM on its stdin (which NodeManager
runs which container, stop a NodeManager, the ResourceManager's application attempts, look at
HDFS); EOF ends it, and it is killed if the test process dies."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
from typing import NamedTuple

import psutil

from integration.cluster_deps import cluster_deps, java_home
from integration.components import _die_with_parent, _tail


class Attempt(NamedTuple):
    id: str
    state: str  # the ResourceManager's RMAppAttemptState: FAILED, FINISHING, FINISHED, ...
    am_container: str  # "-" before one was allocated
    am_exit_status: int  # set when its AM container failed (137: SIGKILL; -100: ABORTED), else -1000


class YarnHadoop:
    def __init__(self, nodemanagers: int = 2, nm_memory_mb: int = 4096, nm_vcores: int = 2) -> None:
        self.root = tempfile.mkdtemp(prefix="ttlstate-yarn-")
        self.conf_dir = os.path.join(self.root, "conf")
        self.log = os.path.join(self.root, "yarn.log")
        deps = cluster_deps()
        cp = os.pathsep.join([os.path.join(deps, "classes"), os.path.join(deps, "yarn", "*")])
        self._log = open(self.log, "w")  # noqa: SIM115 - open as long as the JVM runs
        self.proc = subprocess.Popen(
            [os.path.join(java_home(), "bin", "java"), "-Xmx1g", "-XX:TieredStopAtLevel=1",
             "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
             f"-Dtest.build.data={os.path.join(self.root, 'yarn')}", "-cp", cp, "YarnCluster",
             self.root, self.conf_dir, str(nodemanagers), str(nm_memory_mb), str(nm_vcores)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log, text=True, bufsize=1,
            env={**os.environ, "JAVA_HOME": java_home()}, preexec_fn=_die_with_parent)
        ready = self._answer()
        if not ready.startswith("READY "):
            raise RuntimeError(f"YarnCluster did not start: {ready}\n{_tail(self.log)}")
        self.fs_url, self.rm_web = ready.split()[1:3]

    def _answer(self) -> str:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith("@@ "):
                return line[3:].strip()
        raise RuntimeError(f"YarnCluster exited ({self.proc.wait()}); log {self.log}:\n{_tail(self.log)}")

    def command(self, cmd: str) -> str:
        """One command of YarnCluster.java; its answer after "OK"; raises on ERROR."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(cmd + "\n")
        self.proc.stdin.flush()
        out = self._answer()
        if not out.startswith("OK"):
            raise RuntimeError(f"YarnCluster {cmd!r}: {out}")
        return out[2:].strip()

    def containers(self) -> dict[int, dict[str, int]]:
        """Per running NodeManager, its containers' ids and memory (MB)."""
        out: dict[int, dict[str, int]] = {}
        for part in self.command("containers").split():
            nm, _, listed = part.partition("=")
            out[int(nm[2:])] = {c.split(":")[0]: int(c.split(":")[1]) for c in listed.split(",") if c}
        return out

    def attempts(self) -> dict[str, list[Attempt]]:
        """Per application, oldest first, its attempts as the ResourceManager keeps them: what says
        whether YARN started another attempt, which container names do not. The second attempt's AM
        need not be container ..._02_000001: a reservation takes a number too (the scheduler may
        reserve on a node still holding the first attempt's killed executors, then allocate on the
        other: ..._02_000002), and an AM failure YARN does not count (ABORTED, PREEMPTED,
        DISKS_FAILED) adds an attempt."""
        out: dict[str, list[Attempt]] = {}
        for part in self.command("attempts").split():
            app, _, listed = part.partition("=")
            fields = [a.split(":") for a in listed.split(",") if a]
            out[app] = [Attempt(i, state, container, int(status)) for i, state, container, status in fields]
        return out

    def stop_nodemanager(self, i: int) -> None:
        """As a node's loss looks to YARN: the NodeManager stops its containers (SIGTERM to each
        container's process group, SIGKILL 250 ms later) and stops heartbeating."""
        self.command(f"stop-nodemanager {i}")

    def exists(self, path: str) -> bool:
        return self.command(f"exists {path}") == "true"

    def env(self) -> dict[str, str]:
        """What spark-submit --master yarn needs in its environment."""
        return {"HADOOP_CONF_DIR": self.conf_dir, "JAVA_HOME": java_home()}

    def container_logs(self) -> list[str]:
        """Every container log file (stdout, stderr) the NodeManagers wrote."""
        found = []
        for top, _dirs, files in os.walk(os.path.join(self.root, "yarn")):
            if os.path.basename(os.path.dirname(top)).startswith("application_"):
                found += [os.path.join(top, f) for f in files]
        return found

    def save_logs(self, dest: str) -> None:
        """Copies the containers' logs to `dest` (the cluster's folder goes with `stop`)."""
        for path in self.container_logs():
            target = os.path.join(dest, *path.split(os.sep)[-3:])
            os.makedirs(os.path.dirname(target), exist_ok=True)
            shutil.copyfile(path, target)

    def stop(self) -> None:
        """Ends the JVM and every container still running, as YARN stops a container (SIGTERM,
        SIGKILL 250 ms later); the cluster keeps nothing worth more (its folder goes). Not
        MiniYARNCluster's own stop (EOF on stdin): at the end of `make test-cluster` that took
        23 s, all of it in waits (jstack): each NodeManager ~6 s for applications it still listed
        (process-kill-wait plus slop), its log handler 10 s for log deletions scheduled hours
        ahead, the ResourceManager 5 s for the killed AM attempt, which never unregistered."""
        if self.proc.poll() is None:
            # The containers' processes (setsid, each its own session) are the JVM's descendants.
            containers = psutil.Process(self.proc.pid).children(recursive=True)
            self.proc.kill()
            self.proc.wait(30)
            for p in containers:
                with contextlib.suppress(psutil.NoSuchProcess):
                    p.terminate()
            _, alive = psutil.wait_procs(containers, timeout=0.25)
            for p in alive:
                with contextlib.suppress(psutil.NoSuchProcess):
                    p.kill()
            psutil.wait_procs(alive, timeout=10)
        self._log.close()
        shutil.rmtree(self.root, ignore_errors=True)
