"""A Spark Connect server as a user starts one: pyspark's `sbin/start-connect-server.sh` (in the
foreground, SPARK_NO_DAEMONIZE, so this process owns it) with the arguments given, its gRPC port
on 127.0.0.1. `remote` is the `sc://` address a client's `SparkSession.builder.remote()` takes."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile

import pyspark

from integration.cluster_deps import java_home
from integration.components import _wait_port, free_port

SPARK_HOME = os.path.dirname(pyspark.__file__)


class ConnectServer:
    def __init__(self, args: list[str]) -> None:
        self.root = tempfile.mkdtemp(prefix="ttlstate-connect-")
        self.port = free_port()
        self.remote = f"sc://127.0.0.1:{self.port}"
        self.log = os.path.join(self.root, "server.log")
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYSPARK_")}
        env.update(SPARK_HOME=SPARK_HOME, JAVA_HOME=java_home(), SPARK_NO_DAEMONIZE="1",
                   SPARK_PID_DIR=self.root, SPARK_LOG_DIR=os.path.join(self.root, "logs"),
                   SPARK_LOCAL_IP="127.0.0.1")
        with open(self.log, "w") as log:
            self.proc = subprocess.Popen(
                [os.path.join(SPARK_HOME, "sbin", "start-connect-server.sh"),
                 "--conf", f"spark.connect.grpc.binding.port={self.port}",
                 "--conf", "spark.connect.grpc.binding.address=127.0.0.1", *args],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, cwd=self.root,
                start_new_session=True)
        _wait_port(self.port, self.proc, self.log, 180)

    def stop(self) -> None:
        """The script runs the server's JVM as its child: the whole process group goes."""
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                self.proc.wait(30)
                break
            except subprocess.TimeoutExpired:
                continue
        shutil.rmtree(self.root, ignore_errors=True)
