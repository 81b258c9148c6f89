"""The executors' Python for the cluster tier, as a user ships one to YARN: a virtualenv with a
real (non-editable) install of this checkout's ttlstate and what its state server needs
(rocksdict, zstandard), packed by venv-pack and given to spark-submit with
`--archives venv.tar.gz#environment` and `spark.pyspark.python=./environment/bin/python`.

No pyspark in it: YARN puts pyspark.zip and py4j on the containers' PYTHONPATH, and it would add
450 MB. ttlstate is the wheel of the development build (`pip wheel --no-deps .` with the library
`make setup` built, linked to the system's librocksdb, which this machine's "nodes" have). The
archive is cached under the cluster tier's cache, named after a hash of everything that goes in,
so a second run reuses it. venv-pack keeps the interpreter as a link to the base Python, so the
nodes need that Python at the same path (true here; on a real cluster, the same image).
"""

from __future__ import annotations

import glob
import hashlib
import os
import subprocess
import sys
import tempfile

from integration.components import REPO

PACKAGES = ["rocksdict", "zstandard"]


def _inputs() -> list[str]:
    py = sorted(glob.glob(os.path.join(REPO, "python", "ttlstate", "**", "*.py"), recursive=True))
    return [*py, os.path.join(REPO, "python", "ttlstate", "libttlstate_native.so"),
            *sorted(glob.glob(os.path.join(REPO, "python", "ttlstate", "jars", "*.jar"))),
            *(os.path.join(REPO, f) for f in ("setup.py", "pyproject.toml", "constraints.txt")),
            os.path.abspath(__file__)]


def _digest() -> str:
    h = hashlib.sha256(sys.version.encode())
    for path in _inputs():
        h.update(os.path.relpath(path, REPO).encode())
        with open(path, "rb") as f:
            h.update(f.read())
    return h.hexdigest()[:12]


def packed_venv(cache: str) -> str:
    """The archive's path, built now unless the cache has it for these inputs."""
    archive = os.path.join(cache, f"venv-{_digest()}.tar.gz")
    if os.path.exists(archive):
        return archive
    os.makedirs(cache, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="ttlstate-venv-", dir=cache) as tmp:
        wheels, venv = os.path.join(tmp, "wheels"), os.path.join(tmp, "venv")
        lib = os.path.join(REPO, "python", "ttlstate", "libttlstate_native.so")
        env = {**os.environ, "TTLSTATE_PREBUILT_LIB": lib}
        _run([sys.executable, "-m", "pip", "wheel", "-q", "--disable-pip-version-check", "--no-deps",
              "--no-build-isolation", "-w", wheels, REPO], env=env)
        _run([getattr(sys, "_base_executable", sys.executable), "-m", "venv", "--without-pip", venv])
        _run([sys.executable, "-m", "pip", "--python", os.path.join(venv, "bin", "python"), "install", "-q",
              "--disable-pip-version-check", "--no-deps", "-c", os.path.join(REPO, "constraints.txt"),
              *glob.glob(os.path.join(wheels, "ttlstate-*.whl")), *PACKAGES])
        _run([os.path.join(venv, "bin", "python"), "-c", "import ttlstate.server.__main__, ttlstate._native"])
        packed = os.path.join(tmp, "venv.tar.gz")
        _run([sys.executable, "-m", "venv_pack", "-q", "-p", venv, "-o", packed])
        os.replace(packed, archive)
    for old in glob.glob(os.path.join(cache, "venv-*.tar.gz")):
        if old != archive:
            os.remove(old)
    return archive


def _run(cmd: list[str], env: dict[str, str] | None = None) -> None:
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=env, cwd=REPO)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({done.returncode}):\n"
                           f"{done.stdout[-2000:]}{done.stderr[-4000:]}")


if __name__ == "__main__":
    print(packed_venv(sys.argv[1]))
