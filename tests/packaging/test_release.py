"""The release's artifacts as users install them (`make release`, step 4: scripts/release.sh): the
wheel and the sdist of TTLSTATE_RELEASE_DIR, each `pip install`ed into a fresh venv with its
dependencies from the package index as pip is configured here, then a streaming query run with
`python submit_job.py` (configure() launches the JVM with the jar it picks: exact counts per batch
under a 2 s TTL on the native engine, its compaction filter removing what is never read again):

- the wheel on every other CPython 3.11+ found here (test_wheel_pythons.find_interpreters), with
  the pyspark of the newest line;
- the wheel with each Spark line's pyspark (3.5 to 4.3), on CPython 3.11;
- the sdist with pyspark 3.5: its native engine compiled from source here (g++ and the system's
  RocksDB), its shim jar the one inside (no Scala compiled).

Marked `release` (and `integration`, so `make test` leaves it out): only `make release` runs it.
Without TTLSTATE_RELEASE_DIR it fails: it is not meant to run on its own.
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import pytest

from tests.packaging.support import run
from tests.packaging.test_wheel_pythons import INTERPRETERS, Interpreter
from ttlstate.spark.lines import LINES, NEWEST, SparkLine

pytestmark = [pytest.mark.integration, pytest.mark.release]

JOB = Path(__file__).resolve().parent / "submit_job.py"
SYSTEM_PYTHON = next((i for i in INTERPRETERS if i.version.startswith("3.11.")), None)


@pytest.fixture(scope="module")
def dist() -> tuple[Path, Path]:
    where = os.environ.get("TTLSTATE_RELEASE_DIR")
    if not where:
        pytest.fail("TTLSTATE_RELEASE_DIR is not set: `make release` runs these tests on what it built")
    wheels, sdists = sorted(Path(where).glob("ttlstate-*.whl")), sorted(Path(where).glob("ttlstate-*.tar.gz"))
    assert len(wheels) == 1 and len(sdists) == 1, (wheels, sdists)
    return wheels[0], sdists[0]


def _install_and_run(interpreter: Interpreter, requirement: str | Path, pyspark: SparkLine,
                     work: Path) -> dict:
    """A fresh venv of `interpreter` with `requirement` and `pyspark` installed; the job's RESULT."""
    made = run(interpreter.path, "-m", "venv", work / "venv", cwd=work, timeout=300)
    assert made.returncode == 0, made.stderr
    python = work / "venv" / "bin" / "python"
    start = time.monotonic()
    pip = run(python, "-m", "pip", "install", "-v", str(requirement), f"pyspark=={pyspark.pyspark}",
              *pyspark.python_pins, cwd=work, timeout=3600)
    pip_s = time.monotonic() - start
    assert pip.returncode == 0, pip.stdout[-5000:] + pip.stderr[-5000:]
    (work / "job").mkdir()
    start = time.monotonic()
    job = run(python, JOB, work / "job", "native", cwd=work, timeout=1200,
              env={"PATH": f"{work / 'venv' / 'bin'}:{os.environ.get('PATH', '')}"})
    assert job.returncode == 0, job.stdout[-3000:] + job.stderr[-5000:]
    line = [x for x in job.stdout.splitlines() if x.startswith("RESULT ")][-1]
    result: dict = json.loads(line.removeprefix("RESULT "))
    result["pip_output"] = pip.stdout + pip.stderr
    result["server_started"] = re.search(r"ttlstate state server started: .*", job.stderr)
    print(f"\n{interpreter.id}, pyspark {pyspark.pyspark}, {Path(requirement).name}: pip {pip_s:.0f} s, "
          f"query {time.monotonic() - start:.0f} s")
    return result


def _exact(result: dict, interpreter: Interpreter) -> None:
    assert result["python"] == interpreter.version
    assert result["pinned_provider"] == "ttlstate.spark.TtlStateStoreProvider"
    assert result["outputs"] == [[["a", 2], ["b", 1]], [["a", 1], ["c", 1]], [["a", 3], ["c", 1]]]
    m = result["metrics"]
    assert m["engineFallback"] == 0 and m["ttlExpiredTotal"] >= 3, m
    assert m["ttlRemovedByCompactionFilter"] >= 1, m  # b, never read again: the native filter
    started = result["server_started"]
    assert started and "native engine available" in started[0], started


# 3.11 with the newest line's pyspark is test_the_wheel_on_each_spark_line's case of that line
OTHER_PYTHONS = [i for i in INTERPRETERS if i is not SYSTEM_PYTHON]


@pytest.mark.parametrize("interpreter", OTHER_PYTHONS, ids=lambda i: i.id)
def test_the_wheel_on_each_python(dist: tuple[Path, Path], interpreter: Interpreter, tmp_path: Path) -> None:
    _exact(_install_and_run(interpreter, dist[0], LINES[NEWEST], tmp_path), interpreter)


@pytest.mark.parametrize("line", list(LINES))
def test_the_wheel_on_each_spark_line(dist: tuple[Path, Path], line: str, tmp_path: Path) -> None:
    assert SYSTEM_PYTHON is not None, INTERPRETERS
    _exact(_install_and_run(SYSTEM_PYTHON, dist[0], LINES[line], tmp_path), SYSTEM_PYTHON)


def test_the_sdist_builds_here_and_runs_on_spark_3_5(dist: tuple[Path, Path], tmp_path: Path) -> None:
    assert SYSTEM_PYTHON is not None, INTERPRETERS
    result = _install_and_run(SYSTEM_PYTHON, dist[1], LINES["3.5"], tmp_path)
    _exact(result, SYSTEM_PYTHON)
    said = result["pip_output"]
    # the sdist's jars, no Scala compiled: pip builds it before it installs pyspark (one command), so
    # the build finds no Spark and packages the jars present; with pyspark there first, "built already"
    assert "ttlstate: compiling" not in said, said[-5000:]
    assert ("ttlstate: no Spark found to compile against; packaging the jars present: "
            "ttlstate-shim-spark3.5.jar, ttlstate-shim-spark4.0.jar" in said
            or "the shim jar for Spark 3.5 is built already" in said), said[-5000:]
