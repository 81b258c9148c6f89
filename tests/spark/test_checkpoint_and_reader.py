"""What a query leaves in its checkpoint, the state data source reading it, retention after
maintenance, a restore on a fresh executor (empty local state), and no server after stop."""

from __future__ import annotations

import os

import psutil
import pytest
from pyspark.sql import functions as F

from tests.spark.harness import TTLSTATE, Run, our_server_processes, poll_until, session
from ttlstate.config import keys as K

pytestmark = pytest.mark.spark

SCHEMA = {"events": "k STRING, v INT"}


def agg(s):  # noqa: ANN001, ANN201
    return s["events"].groupBy("k").agg(F.count("*").alias("n"), F.sum("v").alias("total"))


def _steps(n: int) -> list[list[dict]]:
    return [[{"k": f"k{i % 3}", "v": i}, {"k": f"new{i}", "v": 1}] for i in range(n)]


def _inspect(argv: list[str]) -> dict:
    import contextlib
    import io
    import json

    from ttlstate.cli.inspect_checkpoint import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        main(argv)
    return json.loads(out.getvalue())


def _shim_operator_names(state_root: str) -> dict[str, str]:
    """What the shim reads as the operator names of a checkpoint (OperatorNames.scala)."""
    import json

    from tests.jvm_hooks import run_hook

    return json.loads(run_hook("OperatorNamesJson", state_root).strip().splitlines()[-1])


def _server_processes(wait_s: float = 15.0) -> list[psutil.Process]:
    """Servers still running after a bounded wait: spark.stop() ends them asynchronously."""
    poll_until(lambda: not our_server_processes(), wait_s)
    return [p for p, _cmd in our_server_processes()]


def test_checkpoint_layout_reader_retention_restore_and_shutdown() -> None:
    spark = session()
    try:
        spark.conf.set("spark.sql.streaming.minBatchesToRetain", "3")
        run = Run(spark, TTLSTATE, agg, SCHEMA, "update", {K.SNAPSHOT_INTERVAL.key: "2"})
        store_dir = os.path.join(run.checkpoint, "state", "0", "0")

        def listing() -> tuple[list[str], list[str], list[int]]:
            files = sorted(f for f in os.listdir(store_dir) if not f.startswith("."))
            ours = [f for f in files if f.endswith((".changelog", ".snapshot"))]
            return files, ours, sorted({int(f.split(".")[0]) for f in ours})

        def snapshots() -> set[int]:
            return {int(f.split(".")[0]) for f in listing()[1] if f.endswith(".snapshot")}

        # Maintenance (every second, harness.session) runs only for the stores of a running query (a
        # stopped query's are unloaded without it), and cleanup deletes older files only below a
        # snapshot the store's writer made or loaded (restore_plan.deletable_files). So, while the
        # restarted query runs: wait (bounded) for its snapshot of version 5 or 6, then, at version 8,
        # for the cleanup of the versions before it (3 are kept: 6, 7 and 8).
        run.start()
        try:
            for i, rows in enumerate(_steps(8)):
                if i == 4:  # a restart in the middle
                    run.stop()
                    run.start()
                run.step(rows)
                if i == 5:
                    assert poll_until(lambda: bool(snapshots() & {5, 6}), 60), f"no snapshot: {listing()[0]}"
            assert poll_until(lambda: listing()[2][0] > 1, 60), f"nothing cleaned: {listing()[0]}"
        finally:
            run.stop()
        files, ours, versions = listing()
        assert any(f.endswith(".snapshot") for f in ours), files
        assert "_metadata" in files  # Spark's own files sit beside ours, untouched
        assert versions[-1] == 8 and versions[0] > 1, f"old versions were not cleaned: {files}"

        # The state data source reads the latest version and an older batch.
        spark.conf.set(K.PROVIDER_CLASS_KEY, TTLSTATE)
        latest = {r.key.k: r.value[0] for r in spark.read.format("statestore").load(run.checkpoint).collect()}
        assert latest == {"k0": 3, "k1": 3, "k2": 2, **{f"new{i}": 1 for i in range(8)}}
        at6 = spark.read.format("statestore").option("batchId", 6).load(run.checkpoint).collect()
        assert {r.key.k: r.value[0] for r in at6}["k0"] == 3 and len(at6) == 3 + 7

        # `ttlstate inspect` reads the same checkpoint (stopped query), and refuses a bad path.
        report = _inspect([run.checkpoint, "--json"])
        stores = report["stores"]
        assert {(st["operator"], st["partition"]) for st in stores} == {("0", "0"), ("0", "1")}
        assert sum(st["rows"] for st in stores) == len(latest)
        assert all(st["latest_version"] == 8 for st in stores)
        # Operator names come from Spark's state metadata (the shim reads the same files to match
        # operator.<name>.ttl keys), with each operator's TTL: off here.
        assert {st["operator_name"] for st in stores} == {"stateStoreSave"}
        assert report["operators"] == [{"operator": "0", "name": "stateStoreSave", "stores": 2,
                                         "rows": len(latest), "expired_rows": None, "ttl_ms": [None]}]
        state = os.path.join(run.checkpoint, "state")
        for root in (state, "file://" + state):
            assert _shim_operator_names(root) == {"0": "stateStoreSave"}
        with pytest.raises(SystemExit) as bad:
            _inspect([os.path.join(run.root, "events")])
        assert bad.value.code == 2

        # A fresh executor: a new session (new state server, empty local dirs) continues the query.
        spark.stop()
        assert not _server_processes(), "a state server outlived spark.stop()"
        spark = session()
        cont = Run(spark, TTLSTATE, agg, SCHEMA, "update", {})
        cont.root = run.root
        cont.__post_init__()
        cont.step_no = 8
        cont.start()
        cont.step([{"k": "k0", "v": 100}])
        cont.stop()
        assert cont.outputs[max(cont.outputs)] == [("k0", 4, 100 + 0 + 3 + 6)]
    finally:
        spark.stop()
    assert not _server_processes()
