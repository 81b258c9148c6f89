"""A checkpoint written by ttlstate on Spark 3.5 goes on through 4.0, 4.1, 4.2 and 4.3, as users
upgrade Spark one minor at a time, and stays exact: each line runs its steps in its own venv and
JVM (upgrade_phase.py) on the checkpoint the previous line left; the outputs are compared with
what TTL must produce and with Spark's RocksDB provider taken through the same upgrades."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from ttlstate.spark.lines import LINES

pytestmark = [pytest.mark.spark, pytest.mark.spark_versions]

ROOT = Path(__file__).resolve().parents[2]
# Which steps of upgrade_phase.STEPS each line runs.
PHASES = {"3.5": [0, 1], "4.0": [2], "4.1": [3], "4.2": [4], "4.3": [5]}


def _venv_python(minor: str) -> str:
    venv = subprocess.run(["scripts/spark_venv.sh", minor], cwd=ROOT, capture_output=True, text=True,
                          check=True).stdout.strip()
    return os.path.join(venv, "bin", "python")


def _per_step(log: Path) -> dict[int, list[list]]:
    out: dict[int, list[list]] = {}
    for batch in json.loads(log.read_text()):
        out.setdefault(batch["step"], []).extend(batch["rows"])
    return {step: sorted(rows) for step, rows in out.items()}


def test_a_checkpoint_goes_from_spark_3_5_to_4_3(tmp_path: Path) -> None:
    assert list(PHASES) == list(LINES)
    for minor, steps in PHASES.items():
        done = subprocess.run([_venv_python(minor), "-m", "tests.spark_versions.upgrade_phase", str(tmp_path),
                               *map(str, steps)], cwd=ROOT, capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, f"Spark {minor}: {done.stdout[-3000:]}\n{done.stderr[-6000:]}"
    sparks = {b["spark"][:3] for b in json.loads((tmp_path / "dedup-ttlstate.json").read_text())}
    assert sparks == set(LINES)

    keys = lambda log: [sorted(r[0] for r in rows) for _, rows in sorted(_per_step(log).items())]  # noqa: E731
    # a and b, written on Spark 3.5, expire on Spark 4.2 (their TTL stamps read across the upgrades).
    assert keys(tmp_path / "dedup-ttlstate.json") == [["z"], ["a", "b"], [], ["c"], ["a", "b"], ["d"]]
    assert keys(tmp_path / "dedup-rocksdb.json") == [["z"], ["a", "b"], [], ["c"], [], ["d"]]
    counts = lambda log: [dict(map(tuple, rows)) for _, rows in sorted(_per_step(log).items())]  # noqa: E731
    assert counts(tmp_path / "counts-ttlstate.json") == [
        {"z": 1}, {"a": 1, "b": 1}, {"a": 2}, {"c": 1}, {"a": 1, "b": 1}, {"d": 1, "a": 2}]
    assert counts(tmp_path / "counts-rocksdb.json") == [
        {"z": 1}, {"a": 1, "b": 1}, {"a": 2}, {"c": 1}, {"a": 3, "b": 2}, {"d": 1, "a": 4}]


