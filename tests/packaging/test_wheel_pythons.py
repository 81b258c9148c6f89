"""The portable wheel installed as a user would, on each CPython minor version 3.11+ of this machine.

For each minor version of CPython 3.11+ (`/usr/bin/python3.11` first, then pyenv's
`versions/3.1[1-9]*`, whichever exist; pyspark 4.3 supports 3.11 and later): a fresh venv in a
pytest tmp dir, `pip install <wheel>` with its dependencies from the package index as pip is
configured here, then

- (on the first interpreter, 3.11) `ttlstate demo --no-plot` exits 0 with its table, its summary
  and demo.json, where ttlstate's aggregation state levels off below the RocksDB provider's and
  the compaction filter (native engine only) removed entries;
- `spark-submit` (the venv's, from pyspark, `PYSPARK_PYTHON` the venv's python) runs
  submit_job.py: a count per key over three file micro-batches on ttlstate with the native
  engine; it asserts the exact counts, the provider and engine (conf and offset log), the state
  server's start line (this venv's Python, native engine loaded) and the TTL metrics.

The wheel is built once per session (conftest.py). At least one CPython 3.11 must be found: the
test of that fails, it does not skip. Marked `integration` and `wheel`: `make test-integration`
runs the first interpreter's cases, `make test-long` the others and the demo.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.packaging.support import Built, run
from ttlstate.spark.lines import line_for

pytestmark = [pytest.mark.integration, pytest.mark.wheel]  # not in `make test`

JOB = Path(__file__).resolve().parent / "submit_job.py"
PYENV_VERSIONS = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
SYSTEM_PYTHONS = (Path("/usr/bin/python3.11"),)
PROVIDER = "ttlstate.spark.TtlStateStoreProvider"
DEMO_BATCHES = 10
PROBE = "import platform, sys; print(platform.python_implementation(), platform.python_version())"


@dataclass(frozen=True)
class Interpreter:
    path: Path
    implementation: str
    version: str  # as the interpreter reports it, e.g. 3.12.1

    @property
    def minor(self) -> str:
        """e.g. 3.12 (for a broken interpreter, its file name)."""
        return ".".join(self.version.split(".")[:2])

    @property
    def id(self) -> str:
        where = "pyenv" if PYENV_VERSIONS in self.path.parents else "system"
        return f"{self.version}-{where}"


def find_interpreters() -> list[Interpreter]:
    """One interpreter per minor version: /usr/bin/python3.11, then pyenv's 3.11+ (CPython builds
    only: no -dev, t or other suffix) of the minor versions not found yet. The wheel is one
    binary for every interpreter (py3-none, loaded through ctypes); what can differ between
    interpreters is the minor version's standard library and C API, not the patch release."""
    candidates = [p for p in SYSTEM_PYTHONS if p.exists()]
    for d in sorted(PYENV_VERSIONS.glob("3.*")):
        if re.fullmatch(r"3\.(\d+)\.\d+", d.name) and int(d.name.split(".")[1]) >= 11:
            candidates.append(d / "bin" / "python3")
    found = []
    for path in candidates:
        try:
            out = run(path, "-c", PROBE, cwd=Path("/"), timeout=60)
            impl, version = out.stdout.split() if out.returncode == 0 else ("broken", path.name)
        except (OSError, ValueError):
            impl, version = "broken", path.name
        interpreter = Interpreter(path, impl, version)
        if impl == "broken" or interpreter.minor not in {f.minor for f in found}:
            found.append(interpreter)
    return found


INTERPRETERS = find_interpreters()


def test_a_cpython_3_11_is_among_the_interpreters() -> None:
    """The parametrized tests below would silently be skipped with no interpreter: this fails."""
    assert [i for i in INTERPRETERS if i.version.startswith("3.11.")], INTERPRETERS
    assert all(i.implementation == "CPython" for i in INTERPRETERS), INTERPRETERS


@dataclass
class Venv:
    interpreter: Interpreter
    root: Path
    pip_seconds: float
    times: dict[str, float] = field(default_factory=dict)

    @property
    def python(self) -> Path:
        return self.root / "bin" / "python"

    def bin(self, name: str) -> Path:
        return self.root / "bin" / name

    def env(self) -> dict[str, str]:
        """As an activated venv: its bin first on PATH."""
        return {"PATH": f"{self.root / 'bin'}:{os.environ.get('PATH', '')}", "VIRTUAL_ENV": str(self.root)}


# `make test-integration` installs the wheel on the first interpreter (3.11) only; the others, and
# the demo, run in `make test-long` and in `make release` (tests/packaging/test_release.py installs
# the release's wheel on each Python and each Spark line): each costs CI minutes, and the wheel is
# one binary for every Python (py3-none, loaded through ctypes).
@pytest.fixture(scope="module", ids=lambda i: i.id, params=[
    pytest.param(i, marks=() if n == 0 else pytest.mark.long) for n, i in enumerate(INTERPRETERS)])
def venv(request: pytest.FixtureRequest, built: Built,
         tmp_path_factory: pytest.TempPathFactory) -> Iterator[Venv]:
    """A fresh venv of this interpreter with the wheel pip-installed, dependencies and all."""
    interpreter: Interpreter = request.param
    work = tmp_path_factory.mktemp(f"venv-{interpreter.id}")
    root = work / "venv"
    made = run(interpreter.path, "-m", "venv", root, cwd=work, timeout=300)
    assert made.returncode == 0, made.stdout + made.stderr
    start = time.monotonic()
    # The [spark] extra: a local Spark; on a cluster the wheel alone (the cluster brings Spark).
    pip = run(root / "bin" / "python", "-m", "pip", "install", f"{built.wheel}[spark]", cwd=work,
              timeout=1800)
    pip_seconds = time.monotonic() - start
    assert pip.returncode == 0, f"pip install, {interpreter.id}:\n{pip.stdout[-5000:]}\n{pip.stderr[-5000:]}"
    v = Venv(interpreter, root, pip_seconds)
    yield v
    print(f"\n{interpreter.id} ({interpreter.path}): pip install {v.pip_seconds:.0f} s, "
          + ", ".join(f"{k} {s:.0f} s" for k, s in v.times.items()))


def test_venv_runs_that_python_with_the_wheel_and_its_dependencies(venv: Venv) -> None:
    probe = run(venv.python, "-c", "import platform, importlib.metadata as m, ttlstate._native; "
                "print(platform.python_version(), m.version('ttlstate'), m.version('pyspark'), "
                "ttlstate._native.__file__)", cwd=venv.root)
    assert probe.returncode == 0, probe.stderr
    version, ttl_version, pyspark_version, native_file = probe.stdout.split()
    assert version == venv.interpreter.version
    assert ttl_version == "0.1.0"
    assert line_for(pyspark_version).pyspark.split(".")[:2] == pyspark_version.split(".")[:2]
    assert Path(native_file).is_relative_to(venv.root), native_file  # the installed wheel, not the tree


# The demo on the first interpreter only (3.11): the wheel is one binary for every Python, and the
# spark-submit job below runs a query on the native engine on each one (the demo on each cost CI
# about 40 s per interpreter).
@pytest.mark.long
@pytest.mark.parametrize("venv", INTERPRETERS[:1], indirect=True, ids=lambda i: i.id)
def test_demo_runs(venv: Venv, tmp_path: Path) -> None:
    start = time.monotonic()
    # 10 batches, not the default 24: enough for the TTL (3 batches) to level ttlstate's state off
    # and for the compaction filter to remove entries, at under half the time on each interpreter.
    done = run(venv.bin("ttlstate"), "demo", "--no-plot", "--batches", str(DEMO_BATCHES), cwd=tmp_path,
               timeout=1800, env=venv.env())
    venv.times["demo"] = time.monotonic() - start
    assert done.returncode == 0, done.stdout[-5000:] + done.stderr[-5000:]
    out = done.stdout
    lines = out.splitlines()
    assert lines[0].startswith(f"ttlstate demo: {DEMO_BATCHES} batches every 1.0s, TTL 3s"), lines[0]
    header = next(i for i, line in enumerate(lines) if line.split()[:2] == ["batch", "input"])
    rows = [line.split() for line in lines[header + 1:header + 1 + DEMO_BATCHES]]
    assert [int(r[0]) for r in rows] == list(range(DEMO_BATCHES)), rows
    summary = next(line for line in lines if line.startswith(f"Summary: over {DEMO_BATCHES} batches"))
    print(f"\n{venv.interpreter.id} demo, last row: {' '.join(rows[-1])}\n{summary}")
    removed = re.search(r"\((\d+) entries removed on read or by incremental cleanup, (\d+) by the "
                        r"compaction filter\)", summary)
    assert removed, summary
    stats = json.loads((tmp_path / "demo-output" / "demo.json").read_text())
    assert len(stats) == DEMO_BATCHES
    last = stats[-1]["state_rows"]
    # ttlstate's state levels off (TTL), the RocksDB provider's keeps growing
    assert last["ttlstate/aggregation"] < last["rocksdb/aggregation"], last
    assert last["ttlstate/dropDuplicates"] < last["rocksdb/dropDuplicates"], last
    assert sum(s["ttl_removed"] for s in stats) == int(removed[1]) > 0
    assert sum(s["filter_removed"] for s in stats) == int(removed[2]) > 0  # native engine's filter
    assert not (tmp_path / "demo-output" / "demo.png").exists()


def test_spark_submit_job(venv: Venv, tmp_path: Path) -> None:
    jar = run(venv.bin("ttlstate"), "jar", cwd=tmp_path, env=venv.env())
    assert jar.returncode == 0, jar.stderr
    jar_path = Path(jar.stdout.strip())
    assert jar_path.is_relative_to(venv.root) and jar_path.exists(), jar_path
    pyspark = run(venv.python, "-c", "import pyspark; print(pyspark.__version__)",
                  cwd=tmp_path).stdout.strip()
    assert jar_path.name == line_for(pyspark).jar  # the jar of the Spark the venv has
    work = tmp_path / "work"
    work.mkdir()
    start = time.monotonic()
    done = run(venv.bin("spark-submit"), "--master", "local[2]", "--jars", jar_path,
               "--conf", "spark.sql.extensions=ttlstate.spark.TtlStateExtensions",
               "--conf", "spark.ui.enabled=false", JOB, work,
               cwd=tmp_path, timeout=1200, env={**venv.env(), "PYSPARK_PYTHON": str(venv.python)})
    venv.times["spark-submit"] = time.monotonic() - start
    assert done.returncode == 0, done.stdout[-5000:] + done.stderr[-8000:]
    line = [x for x in done.stdout.splitlines() if x.startswith("RESULT ")][-1]
    print(f"\n{venv.interpreter.id} spark-submit: {line}")
    result = json.loads(line.removeprefix("RESULT "))
    assert result["python"] == venv.interpreter.version
    assert Path(result["executable"]).parent == venv.root / "bin"
    assert result["provider"] == PROVIDER
    assert result["pinned_provider"] == PROVIDER  # what the query really ran with
    assert result["engine"] == "native"
    # each batch's keys expired before the next one (TTL 2 s, batches 3.5 s apart): the counts of
    # each batch alone (without TTL the last batch would give a=6, c=2)
    assert result["batches"] == 3
    assert result["outputs"] == [[["a", 2], ["b", 1]], [["a", 1], ["c", 1]], [["a", 3], ["c", 1]]]
    m = result["metrics"]
    assert m["engineFallback"] == 0
    assert m["storeCallCount"] > 0
    assert m["ttlExpiredTotal"] >= 3, m  # a at batch 1, a and c at batch 2 (or b by the filter)
    assert m["ttlRemovedByCompactionFilter"] >= 1, m  # b, never read again: the native filter
    # the state server ran on this venv's Python with the native engine loaded
    started = re.search(r"ttlstate state server started: .*?Python (\S+) at (\S+); (native engine [^(]+)",
                        done.stderr)
    assert started, done.stderr[-5000:]
    assert started[1] == venv.interpreter.version
    assert Path(started[2]).parent == venv.root / "bin"
    assert started[3].strip() == "native engine available", started[0]
