"""`spark.plugins=ttlstate.spark.StateServerPlugin` (which `configure` sets): an executor whose
provider class is ttlstate's starts its state server as it starts, before any query, and the
first stateful query uses that server instead of starting one; with another provider class the
plugin starts nothing."""

from __future__ import annotations

import sys

import pytest
from pyspark.sql import SparkSession

from tests.spark.harness import (
    EVENTS_SCHEMA,
    HDFS,
    TTLSTATE,
    ev,
    poll_until,
    run_steps,
    session,
    state_rows_per_batch,
)
from ttlstate.config import keys as K
from ttlstate.spark.configure import PLUGIN_CLASS, PLUGINS_KEY, jar_path

pytestmark = pytest.mark.spark


def _running_server(spark: SparkSession) -> tuple[int, int] | None:
    """(generation, pid) of this JVM's state server, if one runs."""
    found = spark._jvm.ttlstate.server.StateServer.running()  # type: ignore[union-attr]
    if found.isEmpty():
        return None
    server = found.get()
    return server.generation(), server.pid()


def test_the_server_starts_with_the_executor_and_serves_the_first_query() -> None:
    spark = session(ttl="1h")
    try:
        assert spark.sparkContext.getConf().get(PLUGINS_KEY) == PLUGIN_CLASS
        # No query has run in this session: a server now was started by the plugin.
        assert poll_until(lambda: _running_server(spark) is not None, timeout_s=60)
        started = _running_server(spark)
        run = run_steps(spark, TTLSTATE, lambda s: s["events"].dropDuplicates(["k"]),
                        {"events": EVENTS_SCHEMA}, [[ev("a", 1, 1), ev("b", 2, 2), ev("a", 3, 3)]])
        assert state_rows_per_batch(run)[-1] == 2
        assert _running_server(spark) == started  # the same server: the query did not start one
    finally:
        spark.stop()


def test_without_ttlstate_as_provider_the_plugin_starts_nothing() -> None:
    spark = (SparkSession.builder.master("local[1]").appName("ttlstate-plugin-off")
             .config("spark.ui.enabled", "false")
             .config("spark.jars", jar_path())
             .config(PLUGINS_KEY, PLUGIN_CLASS)
             .config(K.PROVIDER_CLASS_KEY, HDFS)  # PySpark's builders share options: set, not left out
             .config(K.PYTHON.key, sys.executable)  # a server could start: only the provider prevents it
             .getOrCreate())
    try:
        assert spark.sparkContext.getConf().get(PLUGINS_KEY) == PLUGIN_CLASS
        # A server is up within about a second when the plugin starts one (the test above).
        assert not poll_until(lambda: _running_server(spark) is not None, timeout_s=5)
    finally:
        spark.stop()
