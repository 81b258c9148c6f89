"""The options of a command that runs as a Spark job on its own session (`--master`, `--conf`),
and that session, configured for ttlstate."""

from __future__ import annotations

import argparse
from typing import Any


def add_job_options(parser: argparse.ArgumentParser, job: str) -> None:
    parser.add_argument("--master", default=None,
                        help="Spark master when no session is active (default: Spark's own, local[*])")
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                        help=f"an extra Spark conf for the {job}, repeatable (default: none)")


def job_session(app_name: str, args: argparse.Namespace, parser: argparse.ArgumentParser) -> Any:
    """The session of the command's job: ttlstate configured, `--master` and every `--conf`."""
    from pyspark.sql import SparkSession

    import ttlstate

    builder = SparkSession.builder.appName(app_name)
    if args.master:
        builder = builder.master(args.master)
    for item in args.conf:
        key, sep, value = item.partition("=")
        if not sep:
            parser.error(f"--conf takes KEY=VALUE, not {item!r}")
        builder = builder.config(key, value)
    return ttlstate.configure(builder).getOrCreate()
