"""`configure()` under every launch mode: a job launched through pyspark's own `spark-submit` with
`--jars $(ttlstate jar)` runs on ttlstate; without `--jars`, and after a session already exists
(a notebook, the pyspark shell), `configure()` raises at once with the exact fix; the `--conf`
route (no Python helper) gets its conf errors at `start()` of an idle query."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pyspark
import pytest

from tests.spark.harness import fast_jvm_env
from ttlstate.config import keys as K
from ttlstate.spark.configure import EXTENSIONS_CLASS, jar_path

pytestmark = pytest.mark.spark

SPARK_SUBMIT = os.path.join(os.path.dirname(pyspark.__file__), "bin", "spark-submit")

JOB = textwrap.dedent("""
    import json, os, sys, tempfile
    from pyspark.sql import SparkSession
    import ttlstate

    try:
        spark = ttlstate.configure(SparkSession.builder.master("local[1]")
                                   .config("spark.sql.shuffle.partitions", "1")
                                   .config("spark.ui.enabled", "false"), ttl="1h").getOrCreate()
    except ttlstate.spark.configure.ShimNotLoadable as e:
        print("CONFIGURE FAILED:", e)
        sys.exit(3)
    src = tempfile.mkdtemp()
    with open(os.path.join(src, "a.json"), "w") as f:
        f.write('{"k": "a"}\\n{"k": "b"}\\n{"k": "a"}\\n')
    out = []
    q = (spark.readStream.schema("k STRING").json(src).dropDuplicates(["k"]).writeStream
         .foreachBatch(lambda df, _: out.extend(sorted(r.k for r in df.collect())))
         .option("checkpointLocation", tempfile.mkdtemp()).start())
    q.processAllAvailable()
    ops = q.lastProgress["stateOperators"]
    q.stop()
    print("RESULT", json.dumps({"rows": out, "metrics": sorted(ops[0]["customMetrics"])}))
""")

EXISTING_SESSION = textwrap.dedent("""
    import sys
    from pyspark.sql import SparkSession
    import ttlstate

    SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false").getOrCreate()
    try:
        ttlstate.configure(SparkSession.builder, ttl="1h").getOrCreate()
    except ttlstate.spark.configure.ShimNotLoadable as e:
        print("CONFIGURE FAILED:", e)
        sys.exit(3)
""")

CONF_ROUTE = textwrap.dedent("""
    import tempfile
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.getOrCreate()
    df = spark.readStream.schema("k STRING").json(tempfile.mkdtemp()).dropDuplicates(["k"])
    try:
        df.writeStream.format("noop").option("checkpointLocation", tempfile.mkdtemp()).start()
        print("STARTED")
    except Exception as e:
        print("START FAILED:", e)
""")


def _run(tmp_path, script: str, *args: str, submit: bool = True) -> subprocess.CompletedProcess:  # noqa: ANN001
    job = tmp_path / "job.py"
    job.write_text(script)
    env = fast_jvm_env(dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable))
    cmd = ([SPARK_SUBMIT, "--master", "local[1]", *args, str(job)] if submit else [sys.executable, str(job)])
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)


def test_spark_submit_with_jars_runs_on_ttlstate(tmp_path) -> None:  # noqa: ANN001
    done = _run(tmp_path, JOB, "--jars", jar_path())
    assert done.returncode == 0, done.stdout + done.stderr
    line = next(x for x in done.stdout.splitlines() if x.startswith("RESULT "))
    assert '"rows": ["a", "b"]' in line and "ttlExpiredOnRead" in line  # ttlstate's metrics


def test_spark_submit_without_jars_fails_clearly(tmp_path) -> None:  # noqa: ANN001
    done = _run(tmp_path, JOB)
    assert done.returncode == 3, done.stdout + done.stderr
    assert "CONFIGURE FAILED:" in done.stdout
    assert "cannot load ttlstate.spark.TtlStateStoreProvider" in done.stdout
    assert f"spark-submit --jars {jar_path()} --conf spark.sql.extensions={EXTENSIONS_CLASS}" in done.stdout
    assert f"spark.jars            {jar_path()}" in done.stdout  # the spark-defaults.conf lines


def test_existing_session_without_the_jar_fails_clearly(tmp_path) -> None:  # noqa: ANN001
    done = _run(tmp_path, EXISTING_SESSION, submit=False)
    assert done.returncode == 3, done.stdout + done.stderr
    assert "already running" in done.stdout and f"--jars {jar_path()}" in done.stdout


def test_conf_route_bad_value_fails_at_start(tmp_path) -> None:  # noqa: ANN001
    done = _run(tmp_path, CONF_ROUTE, "--jars", jar_path(),
                "--conf", f"spark.sql.extensions={EXTENSIONS_CLASS}",
                "--conf", f"{K.PROVIDER_CLASS_KEY}={K.PROVIDER_CLASS}",
                "--conf", f"{K.PYTHON.key}={sys.executable}",
                "--conf", f"{K.TTL.key}=5 parsecs")
    assert "START FAILED:" in done.stdout, done.stdout + done.stderr
    assert f"Invalid value '5 parsecs' for conf '{K.TTL.key}'" in done.stdout
