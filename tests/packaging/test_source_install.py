"""Installing from source the way Python users try it first: `pip install <source checkout>`, with
pip's build isolation, into a fresh venv.

The source is a copy of the repository's files as a clone has them (git's tracked and untracked
but not ignored files: no jar, no native library, no build directory). The venv's Spark is 3.5
(pyspark 3.5.9, Scala 2.12: the line of EMR 7 and Dataproc 2.2), installed first, as the
build's message asks. Checked:

- without any Spark in the venv (and no SPARK_HOME), with pyspark but no JDK on PATH, or (native
  engine) without a C++ compiler, the build fails at once saying what it needs, before compiling;
- `TTLSTATE_NO_NATIVE=1 pip install <source>` compiles the shim jar of the venv's Spark line
  against that pyspark's jars (isolated build: the build asks the venv's Python outside pip's
  isolation), packages it and no native library; `ttlstate jar` prints it; and a streaming query
  runs on the portable rocksdict engine through `configure(..., engine="rocksdict")` in a plain
  `python` process (submit_job.py: exact counts per batch under a 2 s TTL, the state server
  started without the native library).

Marked `integration` and `wheel`: run by `make test-integration`. The jar's compile is most of its
time (about 2 min on 2 cores).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.packaging.support import ROOT, run
from ttlstate.spark.lines import LINES

pytestmark = [pytest.mark.integration, pytest.mark.wheel]

LINE = LINES["3.5"]
JOB = Path(__file__).resolve().parent / "submit_job.py"


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The repository's files as a fresh clone has them."""
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                           capture_output=True, check=True).stdout.decode().split("\0")
    tree = tmp_path_factory.mktemp("source") / "ttlstate"
    for name in filter(None, files):
        src = ROOT / name
        if src.is_file():
            (tree / name).parent.mkdir(parents=True, exist_ok=True)
            (tree / name).write_bytes(src.read_bytes())
            (tree / name).chmod(src.stat().st_mode)
    assert not list(tree.rglob("*.jar")) and not list(tree.rglob("*.so"))
    return tree


def _venv(where: Path, *packages: str) -> Path:
    made = run(sys.executable, "-m", "venv", where, cwd=where.parent, timeout=300)
    assert made.returncode == 0, made.stderr
    python = where / "bin" / "python"
    if packages:
        pip = run(python, "-m", "pip", "install", "-q", *packages, cwd=where.parent, timeout=900)
        assert pip.returncode == 0, pip.stdout[-3000:] + pip.stderr[-3000:]
    return python


def test_without_a_spark_the_build_fails_saying_what_it_needs(source: Path, tmp_path: Path) -> None:
    python = _venv(tmp_path / "venv")
    done = run(python, "-m", "pip", "install", source, cwd=tmp_path, timeout=900,
               env={"TTLSTATE_NO_NATIVE": "1"})
    out = done.stdout + done.stderr
    assert done.returncode != 0, out[-3000:]
    said = f"ttlstate: no Spark found in this environment (no pyspark importable by {python}"
    assert said in out, out[-3000:]
    assert "install pyspark (a line ttlstate serves: 3.5, 4.0, 4.1, 4.2, 4.3" in out, out[-3000:]
    assert "compiling" not in out  # said before any compile
    assert run(python, "-c", "import ttlstate", cwd=tmp_path).returncode != 0  # nothing installed


def test_without_a_cxx_compiler_the_native_build_fails_saying_what_it_needs(source: Path,
                                                                           tmp_path: Path) -> None:
    """No C++ compiler (CC and CXX a command that fails): the check before anything compiles says
    what the native engine needs and the portable alternative, not a traceback."""
    python = _venv(tmp_path / "venv")
    done = run(python, "-m", "pip", "install", source, cwd=tmp_path, timeout=900,
               env={"CC": "false", "CXX": "false"})
    out = done.stdout + done.stderr
    assert done.returncode != 0, out[-3000:]
    assert ("ttlstate: the native engine compiles against the system's RocksDB, zstd and zlib, and their "
            "headers or a C++17 compiler are missing here") in out, out[-3000:]
    assert "TTLSTATE_NO_NATIVE=1 pip install" in out, out[-3000:]
    assert "Traceback" not in out, out[-3000:]


def test_portable_source_install_compiles_the_lines_jar_and_runs_a_query(source: Path,
                                                                        tmp_path: Path) -> None:
    python = _venv(tmp_path / "venv", f"pyspark=={LINE.pyspark}")
    venv = python.parent.parent
    # no JDK on PATH (nor JAVA_HOME): the build fails before compiling, naming the JDK it needs
    no_jdk = run(python, "-m", "pip", "install", source, cwd=tmp_path, timeout=900,
                 env={"TTLSTATE_NO_NATIVE": "1", "PATH": str(venv / "bin"), "JAVA_HOME": ""})
    said = no_jdk.stdout + no_jdk.stderr
    assert no_jdk.returncode != 0, said[-3000:]
    assert (f"ttlstate: cannot compile the shim jar for Spark {LINE.pyspark} (the pyspark of {python}): "
            "no java, javac, jar on PATH (a JDK, not only a JRE, is needed)") in said, said[-3000:]
    assert "a JDK 17 (`javac`; Debian/Ubuntu: apt-get install openjdk-17-jdk-headless)" in said, said[-3000:]
    done = run(python, "-m", "pip", "install", "-v", source, cwd=tmp_path, timeout=1800,
               env={"TTLSTATE_NO_NATIVE": "1"})
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-5000:]
    compiled = f"compiling the shim jar for Spark {LINE.minor} against Spark {LINE.pyspark} (the pyspark of "
    assert compiled in out, out[-5000:]
    site = Path(run(python, "-c", "import ttlstate, os; print(os.path.dirname(ttlstate.__file__))",
                    cwd=tmp_path).stdout.strip())
    assert site.is_relative_to(venv), site  # the installed package, not the source
    assert sorted(p.name for p in (site / "jars").glob("*.jar")) == sorted([LINE.jar, LINE.tools_jar])
    assert not list(site.rglob("*.so"))  # the portable package: no native library
    jar = run(venv / "bin" / "ttlstate", "jar", cwd=tmp_path)
    assert jar.returncode == 0, jar.stderr
    assert Path(jar.stdout.strip()) == site / "jars" / LINE.jar

    work = tmp_path / "work"
    work.mkdir()
    job = run(python, JOB, work, "rocksdict", cwd=tmp_path, timeout=900,
              env={"PATH": f"{venv / 'bin'}:/usr/bin:/bin"})
    assert job.returncode == 0, job.stdout[-3000:] + job.stderr[-5000:]
    line = [x for x in job.stdout.splitlines() if x.startswith("RESULT ")][-1]
    result = json.loads(line.removeprefix("RESULT "))
    assert result["engine"] == "rocksdict"
    assert result["pinned_provider"] == "ttlstate.spark.TtlStateStoreProvider"
    # each batch's keys expired before the next one (TTL 2 s, batches 3.5 s apart)
    assert result["outputs"] == [[["a", 2], ["b", 1]], [["a", 1], ["c", 1]], [["a", 3], ["c", 1]]]
    m = result["metrics"]
    assert m["engineFallback"] == 0 and m["ttlExpiredTotal"] >= 3, m
    assert m["ttlRemovedByCompactionFilter"] == 0, m  # rocksdict has no compaction filter
    started = re.search(r"ttlstate state server started: .*?; native engine unavailable \(([^)]*)\)",
                        job.stderr)
    assert started and "is not built" in started[1], job.stderr[-5000:]
