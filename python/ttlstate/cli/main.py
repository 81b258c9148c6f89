"""The `ttlstate` command: `demo`, `inspect CHECKPOINT`, `jar`."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    usage = ("usage: ttlstate {demo,inspect,jar,migrate} ...\n"
             "  demo                 run the churn demo (ttlstate vs Spark's RocksDB provider)\n"
             "  inspect CHECKPOINT   versions, rows, expired rows and bytes per store\n"
             "  jar                  print the path of the shim jar for spark.jars\n"
             "  migrate SOURCE TARGET  copy a stopped query's checkpoint into a new one on ttlstate\n"
             "                       (--to rocksdb: back to Spark's RocksDB provider)\n")
    if not args or args[0] in ("-h", "--help"):
        print(usage, end="")
        return 0 if args else 2
    command, rest = args[0], args[1:]
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
    print(f"ttlstate: unknown command {command!r}\n{usage}", end="", file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
