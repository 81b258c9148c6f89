"""The cluster tier's fetched components: scripts/cluster_deps.sh (Maven, from
integration/cluster/pom.xml, once; it runs scripts/integration_deps.sh first), and the JDK that
YARN containers and Spark's daemons need as JAVA_HOME."""

from __future__ import annotations

import os
import shutil
import subprocess
from functools import cache

from integration.components import REPO


@cache
def cluster_deps() -> str:
    """The folder with yarn/ and kafka-io/ (one jar folder per classpath) and classes/
    (YarnCluster, KafkaIO)."""
    script = os.path.join(REPO, "scripts", "cluster_deps.sh")
    done = subprocess.run([script], check=True, stdout=subprocess.PIPE, text=True, timeout=900)
    return done.stdout.strip().splitlines()[-1]


@cache
def java_home() -> str:
    """JAVA_HOME, or the JDK of the `java` on the PATH: a NodeManager starts containers with
    $JAVA_HOME/bin/java, and Spark's scripts want it too."""
    if os.environ.get("JAVA_HOME"):
        return os.environ["JAVA_HOME"]
    java = shutil.which("java")
    if java is None:
        raise RuntimeError("no java on the PATH and no JAVA_HOME: the cluster tier needs Java 17")
    return os.path.dirname(os.path.dirname(os.path.realpath(java)))
