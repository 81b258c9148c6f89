"""The benchmarks' own Scala jobs (`benchmarks/workloads/scala/`), compiled into a cache jar on first use.

They are compiled exactly as the shim is (`scripts/scalac.sh`: pyspark's own Scala compiler
against pyspark's jars), into the benchmark cache rather than the repository; the jar's name
holds a hash of the sources and of the pyspark version, so an edit or an upgrade rebuilds it.
"""

from __future__ import annotations

import glob
import hashlib
import os
import subprocess
import sys
import tempfile

from benchmarks.harness.baseline import CACHE
from benchmarks.harness.subproc import REPO

SOURCES = os.path.join(REPO, "benchmarks", "workloads", "scala")
SCALAC = os.path.join(REPO, "scripts", "scalac.sh")


def _fingerprint(python: str) -> str:
    import pyspark

    h = hashlib.sha256(pyspark.__version__.encode() + python.encode())
    for path in sorted(glob.glob(os.path.join(SOURCES, "**", "*.scala"), recursive=True)):
        with open(path, "rb") as f:
            h.update(path.encode() + f.read())
    return h.hexdigest()[:12]


def jar(python: str = sys.executable, cache: str = CACHE) -> str:
    """The path of the compiled jar, built if it is missing (about a minute)."""
    path = os.path.join(cache, f"bench-scala-{_fingerprint(python)}.jar")
    if not os.path.exists(path):
        os.makedirs(cache, exist_ok=True)
        sources = sorted(glob.glob(os.path.join(SOURCES, "**", "*.scala"), recursive=True))
        with tempfile.TemporaryDirectory() as classes:
            subprocess.run(["bash", SCALAC, python, classes, "", *sources], cwd=REPO, check=True)
            subprocess.run(["jar", "cf", path + ".tmp", "-C", classes, "."], check=True)
        os.replace(path + ".tmp", path)
    return path
