"""The Spark lines ttlstate serves (python/ttlstate/spark/lines.py) and the shim's per-line source
folders (jvm-shim/src/spark: each named for the lines it serves)."""

from __future__ import annotations

import os
import re

import pytest

from ttlstate.spark.lines import LINES, UnsupportedSpark, line_for, minor_of, serves

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SPARK_SRC = os.path.join(ROOT, "jvm-shim", "src", "spark")


@pytest.mark.parametrize(("version", "minor"), [("4.2.1", "4.2"), ("3.5.0-amzn-1", "3.5"), ("4.3", "4.3"),
                                                ("4.0.0-SNAPSHOT", "4.0")])
def test_a_version_picks_its_line(version: str, minor: str) -> None:
    assert line_for(version).minor == minor == minor_of(version)


@pytest.mark.parametrize("version", ["3.4.4", "4.4.0", "5.0.0", "2.4"])
def test_a_spark_without_a_shim_is_refused_naming_the_supported(version: str) -> None:
    with pytest.raises(UnsupportedSpark, match=rf"no shim for Spark {re.escape(version)}: it supports Spark "
                                               r"3\.5, 4\.0, 4\.1, 4\.2, 4\.3"):
        line_for(version)


def test_not_a_version() -> None:
    with pytest.raises(UnsupportedSpark, match="not a Spark version"):
        line_for("latest")


def test_each_line_is_built_with_its_own_pyspark_and_scala() -> None:
    for minor, line in LINES.items():
        assert line.pyspark.startswith(minor + ".")
        assert line.scala == ("2.12" if minor == "3.5" else "2.13")
        assert line.jar == f"ttlstate-shim-spark{minor}.jar"
        assert line.tools_jar == f"ttlstate-tools-spark{minor}.jar"


def test_the_dev_venvs_pyspark_is_a_line() -> None:
    with open(os.path.join(ROOT, "constraints.txt")) as f:
        pin = next(line.split("==")[1].strip() for line in f if line.startswith("pyspark=="))
    assert LINES[minor_of(pin)].pyspark == pin


@pytest.mark.parametrize(("folder", "minor", "expected"), [
    ("4.1-4.3", "4.2", True), ("4.1-4.3", "4.3", True), ("4.1-4.3", "4.0", False), ("3.5", "3.5", True),
    ("3.5", "4.0", False), ("3.5-4.0", "4.0", True), ("4.10", "4.1", False)])
def test_folder_ranges(folder: str, minor: str, expected: bool) -> None:
    assert serves(folder, minor) is expected


def _folders_of(minor: str) -> list[str]:
    return [f for f in sorted(os.listdir(SPARK_SRC)) if serves(f, minor)]


def _defining(minor: str, name: str) -> list[str]:
    """The folders serving `minor` that define a Scala class, trait or object `name`."""
    found = []
    for folder in _folders_of(minor):
        for dirpath, _, files in os.walk(os.path.join(SPARK_SRC, folder)):
            for file in files:
                with open(os.path.join(dirpath, file)) as f:
                    if re.search(rf"^(final )?(class|trait|object) {name}\b", f.read(), re.M):
                        found.append(folder)
    return found


@pytest.mark.parametrize("minor", list(LINES))
@pytest.mark.parametrize("name", ["TtlStateStoreProvider", "TtlStateStore", "SparkLine"])
def test_every_line_gets_exactly_one_adapter(minor: str, name: str) -> None:
    assert len(_defining(minor, name)) == 1, (minor, name, _defining(minor, name))


def test_every_folder_serves_a_line() -> None:
    for folder in os.listdir(SPARK_SRC):
        assert any(serves(folder, m) for m in LINES), folder
