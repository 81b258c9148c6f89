"""The real components of the integration tier, each in its own JVM on 127.0.0.1.

`integration_deps()` fetches them once (scripts/integration_deps.sh, Maven, from
integration/pom.xml). `KafkaBroker` is a single-node Kafka broker in KRaft mode (broker and
controller in one process). `MiniHdfs` is Hadoop's MiniDFSCluster (one NameNode, N DataNodes)
run by integration/src/HdfsCluster.java, which takes commands on its stdin so a test can restart
the NameNode or stop a DataNode. `S3Proxy` is an S3 endpoint for S3A. `stop()` ends each; the
HDFS JVM also exits on EOF of its stdin, and all are killed if the test process dies.
"""

from __future__ import annotations

import base64
import ctypes
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request
import uuid
from functools import cache

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@cache
def integration_deps() -> str:
    """The folder with one jar folder per classpath (spark-kafka/, broker/, hdfs/, s3proxy/,
    s3a/) and classes/ (HdfsCluster)."""
    script = os.path.join(REPO, "scripts", "integration_deps.sh")
    done = subprocess.run([script], check=True, stdout=subprocess.PIPE, text=True, timeout=900)
    return done.stdout.strip().splitlines()[-1]


def _artifact(jar: str) -> str:
    """The artifact name of a jar file name: netty-common-4.2.13.Final.jar -> netty-common."""
    return re.sub(r"-\d[^-]*(-[A-Za-z][^-]*)?\.jar$", "", jar)


@cache
def _pyspark_artifacts() -> frozenset[str]:
    import pyspark

    shipped = {_artifact(j) for j in os.listdir(os.path.join(os.path.dirname(pyspark.__file__), "jars"))}
    if "jcl-over-slf4j" in shipped:  # the commons-logging API, routed to slf4j
        shipped.add("commons-logging")
    return frozenset(shipped)


def extra_jars(profile: str) -> list[str]:
    """The jars of one fetched folder that pyspark does not already ship (by artifact name), so
    no second version of a jar pyspark has (netty, httpclient, lz4 ...) reaches Spark's JVMs."""
    folder = os.path.join(integration_deps(), profile)
    return sorted(os.path.join(folder, j) for j in os.listdir(folder)
                  if j.endswith(".jar") and _artifact(j) not in _pyspark_artifacts())


def spark_jars() -> str:
    """spark.jars for every test session: the Kafka connector (spark-sql-kafka, kafka-clients,
    commons-pool2, token provider) and S3A with the AWS SDK modules it uses. Every module lists
    the same jars: the first session's list is the driver JVM's classpath for the whole pytest
    process. ttlstate.configure adds its shim (also to a later session's list, which its
    executors on local-cluster need)."""
    return ",".join(j for p in ("spark-kafka", "s3a") for j in extra_jars(p))


def _die_with_parent() -> None:
    """In the child before exec: SIGKILL it when the test process dies (Linux prctl)."""
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_port(port: int, proc: subprocess.Popen, log: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"process exited with {proc.returncode} before port {port} opened; "
                               f"log {log}:\n"
                               + _tail(log))
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"port {port} still closed after {timeout_s:.0f} s; log {log}:\n" + _tail(log))


def _tail(path: str, lines: int = 30) -> str:
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError:
        return "(no log)"


def _kill_and_remove(proc: subprocess.Popen, root: str) -> None:
    """Ends a server JVM (it keeps nothing worth a clean shutdown) and removes its folder."""
    if proc.poll() is None:
        proc.kill()
        proc.wait(30)
    shutil.rmtree(root, ignore_errors=True)


def _java() -> str:
    home = os.environ.get("JAVA_HOME")
    return os.path.join(home, "bin", "java") if home else "java"


class KafkaBroker:
    """A one-node Kafka (KRaft, broker + controller in one JVM) on 127.0.0.1, topics created on
    first use with `partitions` partitions."""

    def __init__(self, partitions: int = 2) -> None:
        self.root = tempfile.mkdtemp(prefix="ttlstate-kafka-")
        self.port, controller = free_port(), free_port()
        self.bootstrap = f"127.0.0.1:{self.port}"
        self.log = os.path.join(self.root, "broker.log")
        props = os.path.join(self.root, "server.properties")
        with open(props, "w") as f:
            f.write("\n".join([
                "process.roles=broker,controller", "node.id=1",
                f"controller.quorum.voters=1@127.0.0.1:{controller}",
                f"listeners=PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{controller}",
                f"advertised.listeners=PLAINTEXT://127.0.0.1:{self.port}",
                "controller.listener.names=CONTROLLER", "inter.broker.listener.name=PLAINTEXT",
                "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
                f"log.dirs={os.path.join(self.root, 'data')}", f"num.partitions={partitions}",
                "auto.create.topics.enable=true", "offsets.topic.replication.factor=1",
                "transaction.state.log.replication.factor=1", "transaction.state.log.min.isr=1",
                "share.coordinator.state.topic.replication.factor=1",
                "share.coordinator.state.topic.min.isr=1", "group.initial.rebalance.delay.ms=0", ""]))
        cp = os.path.join(integration_deps(), "broker", "*")
        cluster_id = "-"
        while cluster_id.startswith("-"):  # as Kafka's Uuid.randomUuid: "-..." would read as an option
            cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        base = [_java(), "-Xmx384m", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp", cp]
        with open(self.log, "w") as log:
            subprocess.run([*base, "kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", props],
                           check=True, stdout=log, stderr=subprocess.STDOUT, timeout=120)
            self.proc = subprocess.Popen([*base, "kafka.Kafka", props], stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, preexec_fn=_die_with_parent)
        _wait_port(self.port, self.proc, self.log, 120)

    def stop(self) -> None:
        _kill_and_remove(self.proc, self.root)


class S3Proxy:
    """S3Proxy in its own JVM: an S3 endpoint on 127.0.0.1 keeping objects in memory (jclouds
    `transient`; its `filesystem` store loses S3A's directory markers), with one bucket.
    `hadoop_confs` are the spark.hadoop.* settings that point S3A at it. Requests are not
    authenticated (S3A signs them anyway), so the bucket is made with a plain PUT."""

    IDENTITY, CREDENTIAL = "ttlstate-it", "ttlstate-it-secret"

    def __init__(self, bucket: str = "ttlstate-it") -> None:
        self.root = tempfile.mkdtemp(prefix="ttlstate-s3-")
        self.port = free_port()
        self.bucket = bucket
        self.log = os.path.join(self.root, "s3proxy.log")
        props = os.path.join(self.root, "s3proxy.properties")
        with open(props, "w") as f:
            f.write("\n".join([
                f"s3proxy.endpoint=http://127.0.0.1:{self.port}", "s3proxy.authorization=none",
                "jclouds.provider=transient", f"jclouds.identity={self.IDENTITY}",
                f"jclouds.credential={self.CREDENTIAL}", ""]))
        cp = os.path.join(integration_deps(), "s3proxy", "*")
        with open(self.log, "w") as log:
            self.proc = subprocess.Popen(
                [_java(), "-Xmx256m", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp", cp,
                 "org.gaul.s3proxy.Main", "--properties", props],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, preexec_fn=_die_with_parent)
        _wait_port(self.port, self.proc, self.log, 120)
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}/{bucket}", method="PUT")
        with urllib.request.urlopen(request, timeout=30) as answer:
            assert answer.status == 200, f"creating bucket {bucket}: HTTP {answer.status}"
        self.url = f"s3a://{bucket}"

    @property
    def hadoop_confs(self) -> dict[str, str]:
        return {"spark.hadoop.fs.s3a.endpoint": f"http://127.0.0.1:{self.port}",
                "spark.hadoop.fs.s3a.endpoint.region": "us-east-1",
                "spark.hadoop.fs.s3a.path.style.access": "true",
                "spark.hadoop.fs.s3a.connection.ssl.enabled": "false",
                "spark.hadoop.fs.s3a.access.key": self.IDENTITY,
                "spark.hadoop.fs.s3a.secret.key": self.CREDENTIAL}

    def stop(self) -> None:
        _kill_and_remove(self.proc, self.root)


class MiniHdfs:
    """Hadoop's MiniDFSCluster in its own JVM; `url` is hdfs://127.0.0.1:PORT, the same across
    NameNode restarts."""

    def __init__(self, datanodes: int = 2, replication: int = 2) -> None:
        self.root = tempfile.mkdtemp(prefix="ttlstate-hdfs-")
        self.log = os.path.join(self.root, "hdfs.log")
        deps = integration_deps()
        cp = os.pathsep.join([os.path.join(deps, "classes"), os.path.join(deps, "hdfs", "*")])
        self._log = open(self.log, "w")  # noqa: SIM115 - open as long as the JVM runs
        self.proc = subprocess.Popen(
            [_java(), "-Xmx768m", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp", cp, "HdfsCluster",
             os.path.join(self.root, "dfs"), str(free_port()), str(datanodes), str(replication)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log, text=True, bufsize=1,
            preexec_fn=_die_with_parent)
        ready = self._answer()
        if not ready.startswith("READY "):
            raise RuntimeError(f"MiniDFSCluster did not start: {ready}\n{_tail(self.log)}")
        self.url = ready.split(" ", 1)[1]

    def _answer(self) -> str:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith("@@ "):
                return line[3:].strip()
        raise RuntimeError(f"MiniDFSCluster exited ({self.proc.wait()}); log {self.log}:\n{_tail(self.log)}")

    def command(self, cmd: str) -> str:
        """One command of HdfsCluster.java (stop-namenode, start-namenode, restart-namenode,
        stop-datanode I, start-datanode, datanodes); raises on its ERROR answer."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(cmd + "\n")
        self.proc.stdin.flush()
        out = self._answer()
        if not out.startswith("OK"):
            raise RuntimeError(f"HdfsCluster {cmd!r}: {out}")
        return out

    def stop(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(30)
        self._log.close()
        shutil.rmtree(self.root, ignore_errors=True)
