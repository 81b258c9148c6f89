"""The `ttlstate` command (also `python -m ttlstate`): argparse subcommands `demo`, `inspect`,
`jar`, `migrate`, `repartition`, `rollback`, `version`. Each command's arguments and its work live
in its own module, imported only when that command runs (or when its help is built)."""

from __future__ import annotations

import argparse
import difflib
import importlib
import sys
from collections.abc import Callable
from dataclasses import dataclass


class HelpFormatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """Descriptions as written, and every option's default: appended as `(default: X)` unless
    the help already says what it is (a default of None, such as "no plot", is said in words)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if "default" in text.lower() or action.default in (None, False, argparse.SUPPRESS):
            return text
        return text + " (default: %(default)s)"


@dataclass(frozen=True)
class Command:
    module: str  # defines add_arguments(parser) (optional) and the function `runner`
    runner: str  # run(args, parser) -> exit status
    summary: str
    description: str | None = None  # the module's DESCRIPTION when None


COMMANDS: dict[str, Command] = {
    "demo": Command("ttlstate.demo.runner", "run_command",
                    "run the churn demo: ttlstate with a short TTL against Spark's RocksDB provider "
                    "(its plot needs pip install 'ttlstate[demo]', or run it with --no-plot)"),
    "inspect": Command("ttlstate.cli.inspect_command", "run",
                       "what a stopped query's checkpoint holds: per operator and store, versions, rows, "
                       "expired rows, TTL, bytes; --ages: a TTL advisor"),
    "jar": Command("ttlstate.cli.jar_command", "run",
                   "print the path of the shim jar for this Spark (or --spark X.Y), for --jars"),
    "migrate": Command("ttlstate.spark.migrate", "run_command",
                       "copy a stopped query's checkpoint into a new one on ttlstate (or back, --to "
                       "rocksdb)"),
    "repartition": Command("ttlstate.spark.repartition", "run_command",
                           "move a stopped query's state to another number of state partitions "
                           "(spark.sql.shuffle.partitions), TTL timestamps kept (--dry-run: what it "
                           "would do)"),
    "rollback": Command("ttlstate.cli.rollback", "run",
                        "roll a stopped query back to the newest batch its state rebuilds, when a "
                        "damaged checkpoint file stops it (--dry-run says what it would move)"),
    "version": Command("ttlstate.cli.main", "_version", "print ttlstate's version",
                       "Print ttlstate's version (as --version does)."),
}


def version() -> str:
    from ttlstate import __version__

    return f"ttlstate {__version__}"


def _version(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    print(version())
    return 0


def parser() -> argparse.ArgumentParser:
    """The whole command line: one subparser per command."""
    top = argparse.ArgumentParser(
        prog="ttlstate", formatter_class=HelpFormatter,
        description="Flink-grade state TTL for Spark Structured Streaming: tools.",
        epilog="`ttlstate COMMAND --help` describes a command and its options.")
    top.add_argument("-V", "--version", action="version", version=version())
    sub = top.add_subparsers(dest="command", metavar="COMMAND", title="commands")
    for name, c in COMMANDS.items():
        module = importlib.import_module(c.module)
        p = sub.add_parser(name, help=c.summary, description=c.description or module.DESCRIPTION,
                           formatter_class=HelpFormatter)
        add: Callable[[argparse.ArgumentParser], None] | None = getattr(module, "add_arguments", None)
        if add is not None:
            add(p)
        p.set_defaults(run=getattr(module, c.runner), parser=p)
    return top


def _unknown(command: str) -> str:
    close = difflib.get_close_matches(command, list(COMMANDS), n=1, cutoff=0.5)
    hint = f": did you mean '{close[0]}'?" if close else ""
    return f"unknown command '{command}'{hint} (commands: {', '.join(COMMANDS)})"


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    top = parser()
    if not args:
        top.print_help(sys.stderr)
        return 2
    if not args[0].startswith("-") and args[0] not in COMMANDS:
        top.error(_unknown(args[0]))
    parsed = top.parse_args(args)
    return int(parsed.run(parsed, parsed.parser))


if __name__ == "__main__":
    raise SystemExit(main())
