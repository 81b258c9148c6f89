"""`ttlstate jar`: the path of the shim jar for a Spark line, to give Spark as --jars or spark.jars."""

from __future__ import annotations

import argparse
import sys

DESCRIPTION = (
    "Print the path of the shim jar inside the installed package: give it to Spark with\n"
    "--jars $(ttlstate jar), or as spark.jars. Each Spark line (3.5, 4.0, 4.1, 4.2, 4.3) has its own\n"
    "jar; by default the one of the installed pyspark, else of $SPARK_HOME's Spark.")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--spark", metavar="VERSION", default=None,
                        help="the Spark to pick the jar for, e.g. 3.5 or 4.2.1 (default: the installed "
                             "pyspark's, else $SPARK_HOME's)")
    parser.add_argument("--tools", action="store_true",
                        help="the tools jar instead (ttlstate migrate's and the tests' hooks)")


def other_line_warning(asked: str) -> str | None:
    """What to say when `--spark asked` is not the line of the Spark installed here (None if it is,
    or if no Spark is installed here: a cluster node's `spark-defaults.conf`)."""
    from ttlstate.spark.jars import installed_spark
    from ttlstate.spark.lines import line_for, minor_of

    installed = installed_spark()
    line = line_for(asked)
    if installed is None or minor_of(installed[0]) == line.minor:
        return None
    version, what = installed
    here = minor_of(version)
    return (f"ttlstate jar: warning: this is the jar for Spark {line.minor}, but the {what} here is "
            f"{version} (its jar: `ttlstate jar`, or `--spark {here}`). Give it only to a Spark "
            f"{line.minor}; on Spark {here} it fails at session start with [TTLSTATE_WRONG_SPARK].")


def run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from ttlstate.spark.configure import jar_path, tools_jar_path
    from ttlstate.spark.lines import UnsupportedSpark

    try:
        print((tools_jar_path if args.tools else jar_path)(args.spark))
        warning = other_line_warning(args.spark) if args.spark else None
    except (UnsupportedSpark, FileNotFoundError) as e:
        print(f"ttlstate jar: {e}", file=sys.stderr)
        return 2
    if warning:
        print(warning, file=sys.stderr)
    return 0
