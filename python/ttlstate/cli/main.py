"""The `ttlstate` command (also `python -m ttlstate`): `demo`, `inspect CHECKPOINT`, `jar`, `migrate`,
`--version`."""

from __future__ import annotations

import sys

USAGE = """usage: ttlstate [--version] {demo,inspect,jar,migrate} ...
  demo                 run the churn demo (ttlstate vs Spark's RocksDB provider); needs matplotlib
                       for its plot: pip install 'ttlstate[demo]' (or run it with --no-plot);
                       --kafka BOOTSTRAP_SERVERS: through Kafka topics (needs the Kafka connector)
  inspect CHECKPOINT   per operator (id and name) and store: versions, rows, expired rows, TTL, bytes;
                       --ages: last-access ages and what a --ttl would remove now
  jar                  print the path of the shim jar for spark.jars
  migrate SOURCE TARGET  copy a stopped query's checkpoint into a new one on ttlstate
                       (--to rocksdb: back to Spark's RocksDB provider)
  --version            print ttlstate's version
`ttlstate COMMAND --help` describes a command's options.
"""


def version() -> str:
    from ttlstate import __version__

    return f"ttlstate {__version__}"


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(USAGE, end="", file=sys.stdout if args else sys.stderr)
        return 0 if args else 2
    command, rest = args[0], args[1:]
    if command in ("--version", "-V", "version"):
        print(version())
        return 0
    if command == "jar":
        from ttlstate.spark.configure import jar_path

        print(jar_path())
        return 0
    if command == "demo":
        from ttlstate.demo.runner import main as demo_main

        return demo_main(rest)
    if command == "inspect":
        from ttlstate.cli.inspect_checkpoint import main as inspect_main

        return inspect_main(rest)
    if command == "migrate":
        from ttlstate.spark.migrate import main as migrate_main

        return migrate_main(rest)
    print(f"ttlstate: unknown command {command!r}\n{USAGE}", end="", file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
