"""`python -m benchmarks NAME [args]` runs the workload `benchmarks/workloads/NAME.py` as if it
were `python -m benchmarks.workloads.NAME [args]`; with no NAME (or `--help`) it lists them.

The harness's own entry points keep their module paths: `python -m benchmarks.harness.run_all`
(`make bench`), `python -m benchmarks.harness.headline_plot`, `python -m benchmarks.harness.baseline REF`.
"""

from __future__ import annotations

import ast
import os
import re
import runpy
import sys

WORKLOADS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "workloads")
HELPERS = ("_child", "_plot")  # run by a workload, not by a user


def workloads() -> dict[str, str]:
    """Each workload's name and the first sentence of its docstring (read, not imported)."""
    found = {}
    for entry in sorted(os.listdir(WORKLOADS)):
        name, ext = os.path.splitext(entry)
        if ext != ".py" or name.startswith("_") or name.endswith(HELPERS):
            continue
        with open(os.path.join(WORKLOADS, entry)) as f:
            doc = ast.get_docstring(ast.parse(f.read())) or ""
        paragraph = " ".join(doc.split("\n\n")[0].split())
        found[name] = re.split(r"(?<=\.)\s+(?=[A-Z`])", paragraph)[0]
    return found


def usage() -> str:
    names = workloads()
    width = max(map(len, names))
    lines = ["usage: python -m benchmarks NAME [args]   (python -m benchmarks NAME --help: its options)",
             "", "workloads:"]
    lines += [f"  {name:<{width}}  {doc}" for name, doc in names.items()]
    lines += ["", "harness: python -m benchmarks.harness.run_all [--quick] (make bench, make bench-quick),",
              "         python -m benchmarks.harness.headline_plot,",
              "         python -m benchmarks.harness.baseline REF"]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(usage())
        return 0
    name, args = argv[0], argv[1:]
    if name not in workloads():
        print(f"benchmarks: no workload {name!r}\n\n{usage()}", file=sys.stderr)
        return 2
    sys.argv[1:] = args  # sys.argv[0] becomes the module's file, as with `python -m`
    runpy.run_module(f"benchmarks.workloads.{name}", run_name="__main__", alter_sys=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
