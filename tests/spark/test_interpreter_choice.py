"""Which Python runs ttlstate's state server and its start checks, as a user meets it (issue 44):
the minimal setup needs no ttlstate interpreter line, the checks at `start()` run with the
driver's own interpreter, and `python` on the PATH (here a stand-in without ttlstate, as on a
machine whose system python3 never saw ttlstate) is not what they fall back to while the driver's
interpreter is known."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pyspark
import pytest

from tests.spark.harness import fast_jvm_env
from ttlstate.config import keys as K
from ttlstate.spark.configure import EXTENSIONS_CLASS, jar_path

pytestmark = pytest.mark.spark

SPARK_HOME = os.path.dirname(pyspark.__file__)

QUERY = textwrap.dedent("""
    import os, tempfile
    src = tempfile.mkdtemp()
    with open(os.path.join(src, "a.json"), "w") as f:
        f.write('{"k": "a"}\\n{"k": "b"}\\n{"k": "a"}\\n')
    out = []
    try:
        q = (spark.readStream.schema("k STRING").json(src).dropDuplicates(["k"]).writeStream
             .foreachBatch(lambda df, _: out.extend(sorted(r.k for r in df.collect())))
             .option("checkpointLocation", tempfile.mkdtemp()).start())
    except Exception as e:
        print("START FAILED:", str(e).splitlines()[0])
        raise SystemExit(0)
    try:
        q.processAllAvailable()
        print("ROWS", out, "ttlExpiredOnRead" in q.lastProgress["stateOperators"][0]["customMetrics"])
    except Exception as e:
        print("BATCH FAILED:", str(e).splitlines()[0])
    q.stop()
""")

CONFIGURED = textwrap.dedent("""
    import sys
    from pyspark.sql import SparkSession
    import ttlstate
    spark = ttlstate.configure(SparkSession.builder.master("local[1]")
                               .config("spark.sql.shuffle.partitions", "1")
                               .config("spark.ui.enabled", "false"), ttl="1h").getOrCreate()
    if len(sys.argv) > 1:
        spark.conf.set("spark.sql.streaming.stateStore.ttlstate.ttl", sys.argv[1])
""") + QUERY

THREE_LINES = textwrap.dedent(f"""
    from pyspark.sql import SparkSession
    spark = (SparkSession.builder.master("local[1]").config("spark.sql.shuffle.partitions", "1")
             .config("spark.ui.enabled", "false")
             .config("spark.jars", {jar_path()!r})
             .config("{K.PROVIDER_CLASS_KEY}", "{K.PROVIDER_CLASS}")
             .config("{K.TTL.key}", "1h").getOrCreate())
""") + QUERY

SUBMITTED = textwrap.dedent("""
    from pyspark.sql import SparkSession
    spark = SparkSession.builder.getOrCreate()
""") + QUERY


def _env(tmp_path: Path) -> dict[str, str]:
    """No PYSPARK_PYTHON / PYSPARK_DRIVER_PYTHON, and a `python3` first on the PATH that has no
    ttlstate (what the shim fell back to)."""
    stub = tmp_path / "bin"
    stub.mkdir()
    (stub / "python3").write_text("#!/bin/sh\necho 'stand-in: No module named ttlstate' >&2\nexit 1\n")
    (stub / "python3").chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")}
    return fast_jvm_env({**env, "PATH": f"{stub}{os.pathsep}{env['PATH']}", "SPARK_HOME": SPARK_HOME})


def _python_job(tmp_path: Path, script: str, *args: str) -> str:
    job = tmp_path / "job.py"
    job.write_text(script)
    done = subprocess.run([sys.executable, str(job), *args], capture_output=True, text=True, timeout=300,
                          env=_env(tmp_path), cwd=tmp_path)
    return done.stdout + done.stderr


@pytest.mark.long  # make test: test_launch_modes' conf error at start()
def test_a_conf_error_fails_start_with_the_drivers_interpreter(tmp_path: Path) -> None:
    """`python job.py` with `configure()`: the check at `start()` runs the interpreter configure
    recorded, so a TTL without a unit fails `start()`, not the first batch; no warning that it
    could not validate."""
    out = _python_job(tmp_path, CONFIGURED, "5")
    assert f"START FAILED: Invalid value '5' for conf '{K.TTL.key}'" in out, out
    assert "could not validate" not in out


def test_the_three_conf_lines_are_enough_in_local_mode(tmp_path: Path) -> None:
    """No `...ttlstate.python`, no PYSPARK_PYTHON: the local executor's server runs the Python
    that launched the driver JVM (`python job.py`), not the PATH's python3."""
    out = _python_job(tmp_path, THREE_LINES)
    assert "ROWS ['a', 'b'] True" in out, out


@pytest.mark.long  # make test-cluster: YARN's venv through spark.pyspark.python
def test_spark_pyspark_python_is_followed_with_no_ttlstate_line(tmp_path: Path) -> None:
    """spark-submit with PySpark's own `spark.pyspark.python` (what a YARN `--archives` venv
    sets) and the three lines: the state server runs that interpreter."""
    job = tmp_path / "job.py"
    job.write_text(SUBMITTED)
    done = subprocess.run(
        [os.path.join(SPARK_HOME, "bin", "spark-submit"), "--master", "local[1]", "--jars", jar_path(),
         "--conf", f"spark.pyspark.python={sys.executable}", "--conf", "spark.sql.shuffle.partitions=1",
         "--conf", f"spark.sql.extensions={EXTENSIONS_CLASS}",
         "--conf", f"{K.PROVIDER_CLASS_KEY}={K.PROVIDER_CLASS}", "--conf", f"{K.TTL.key}=1h", str(job)],
        capture_output=True, text=True, timeout=300, env=_env(tmp_path), cwd=tmp_path)
    out = done.stdout + done.stderr
    assert "ROWS ['a', 'b'] True" in out, out
    assert "could not validate" not in out
