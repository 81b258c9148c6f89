"""The Spark lines ttlstate serves: one shim jar per Spark minor, each compiled with that pyspark's
own jars and Scala compiler, because Spark's state store API changes between minors (4.3's
provider trait has fields a 4.2 build never implements; 3.5 is Scala 2.12 and has no key encoder
specs). Standard library only: the build scripts read it with a bare interpreter
(`python -m ttlstate.spark.lines`).
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass


@dataclass(frozen=True)
class SparkLine:
    minor: str      # "4.2": what a user's Spark version is matched on
    pyspark: str    # the pyspark release the jar is compiled and tested with
    scala: str      # the Scala binary version of that line's jars
    # What a user of the line runs beside it, where the newest releases no longer work with it
    # (pyspark 3.5's pandas UDFs predate numpy 2 and pandas 2.1's Arrow conversions).
    python_pins: tuple[str, ...] = ()

    @property
    def jar(self) -> str:
        return f"ttlstate-shim-spark{self.minor}.jar"

    @property
    def tools_jar(self) -> str:
        return f"ttlstate-tools-spark{self.minor}.jar"


def _key(minor: str) -> tuple[int, int]:
    major, _, rest = minor.partition(".")
    return int(major), int(rest)


LINES: dict[str, SparkLine] = {line.minor: line for line in (
    SparkLine("3.5", "3.5.9", "2.12", ("numpy<2", "pandas<2.1", "pyarrow<13")),
    SparkLine("4.0", "4.0.5", "2.13"),
    SparkLine("4.1", "4.1.4", "2.13"),
    SparkLine("4.2", "4.2.1", "2.13"),
    SparkLine("4.3", "4.3.0", "2.13"),
)}
OLDEST, NEWEST = min(LINES, key=_key), max(LINES, key=_key)  # numerically: 4.10 after 4.9
# `ttlstate migrate` to ttlstate runs on every line (ttlstate's provider writes a version from
# empty itself); to Spark's own providers (the way back) it needs their `loadEmpty`, new in 4.2.
MIGRATE_BACK_SINCE = "4.2"
# `operator.<name>.ttl`: a store finds its operator's name in the state metadata Spark writes into
# the checkpoint since 4.0 (`state/<id>/_metadata/metadata`); Spark 3.5 writes none.
OPERATOR_NAMES_SINCE = "4.0"
# From this line, Spark's change feed of a ListState (readChangeFeed) has a row per list value of
# each record (the first with the record's kind, the others as appends); before, the first only.
LIST_CHANGE_EVERY_VALUE_SINCE = "4.3"


class UnsupportedSpark(RuntimeError):
    """A Spark version no shim jar of this ttlstate serves."""


def minor_of(version: str) -> str:
    """ "4.2.1" -> "4.2"; "3.5.0-amzn-1" -> "3.5" (vendors append to Spark's own version)."""
    match = re.match(r"\s*(\d+)\.(\d+)", version)
    if not match:
        raise UnsupportedSpark(f"'{version}' is not a Spark version (expected e.g. 4.2.1)")
    return f"{int(match.group(1))}.{int(match.group(2))}"


def line_for(version: str) -> SparkLine:
    """The line serving Spark `version`, or UnsupportedSpark naming the supported ones."""
    minor = minor_of(version)
    if minor not in LINES:
        raise UnsupportedSpark(
            f"ttlstate has no shim for Spark {version}: it supports Spark "
            f"{', '.join(LINES)} (one jar per line). On an older Spark, upgrade to {OLDEST} or later; "
            f"on a newer one, check for a newer ttlstate.")
    return LINES[minor]


def serves(folder: str, minor: str) -> bool:
    """Whether a shim source folder named `folder` ("4.1": one line; "4.1-4.3": a range of lines,
    both ends included) holds code for Spark line `minor`."""
    low, _, high = folder.partition("-")
    return _key(low) <= _key(minor) <= _key(high or low)


def migrate_back_supported(minor: str) -> bool:
    """Whether `ttlstate migrate --to rocksdb|hdfs` runs on Spark line `minor`."""
    return _key(minor) >= _key(MIGRATE_BACK_SINCE)


def operator_names_known(minor: str) -> bool:
    """Whether `operator.<name>.ttl` works on Spark line `minor` (its checkpoints name operators)."""
    return _key(minor) >= _key(OPERATOR_NAMES_SINCE)


def list_change_every_value(minor: str) -> bool:
    """Whether Spark line `minor`'s change feed of a ListState has a row per value of a record."""
    return _key(minor) >= _key(LIST_CHANGE_EVERY_VALUE_SINCE)


def main(argv: list[str]) -> int:
    """`python -m ttlstate.spark.lines` prints `minor pyspark scala` per line (for the build
    scripts); `... lines VERSION` prints the minor serving VERSION, or fails naming the supported;
    `... lines --folders MINOR DIR` prints DIR's subfolders (named for the lines they serve) that
    hold code for MINOR; `... lines --pins MINOR` the line's Python pins, one per line."""
    if argv[:1] == ["--pins"] and len(argv) == 2:
        print("\n".join(line_for(argv[1]).python_pins))
        return 0
    if argv[:1] == ["--folders"] and len(argv) == 3:
        import os

        for name in sorted(os.listdir(argv[2])):
            if os.path.isdir(os.path.join(argv[2], name)) and serves(name, argv[1]):
                print(os.path.join(argv[2], name))
        return 0
    if argv:
        try:
            print(line_for(argv[0]).minor)
        except UnsupportedSpark as e:
            print(e, file=sys.stderr)
            return 2
        return 0
    for line in LINES.values():
        print(line.minor, line.pyspark, line.scala)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
