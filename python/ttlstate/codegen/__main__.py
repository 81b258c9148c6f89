"""`python -m ttlstate.codegen scala|cpp OUT_DIR [SPARK_MINOR]`: writes the generated files under
OUT_DIR, leaving a file untouched when its content is unchanged (so builds that depend on it stay
fresh). With SPARK_MINOR (scala only), also the Spark line the shim jar is compiled for (in Java:
codegen/java.py)."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

from ttlstate.codegen import cpp, java, scala

TARGETS: dict[str, dict[str, Callable[[], str]]] = {"scala": scala.FILES, "cpp": cpp.FILES}


def write(target: str, out_dir: str, spark_minor: str | None = None) -> list[str]:
    """Writes `target`'s files under `out_dir`; returns their paths."""
    if target not in TARGETS:
        raise ValueError(f"unknown codegen target {target!r}: allowed {', '.join(TARGETS)}")
    files = dict(TARGETS[target])
    if spark_minor is not None:
        if target != "scala":
            raise ValueError("SPARK_MINOR is for the scala target only")
        files["ttlstate/spark/BuiltFor.java"] = lambda: java.built_for(spark_minor)
    paths = []
    for rel, emit in files.items():
        path = os.path.join(out_dir, rel)
        text = emit()
        os.makedirs(os.path.dirname(path), exist_ok=True)
        try:
            with open(path, encoding="utf-8") as f:
                same = f.read() == text
        except FileNotFoundError:
            same = False
        if not same:
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
        paths.append(path)
    return paths


def main(argv: list[str]) -> int:
    if len(argv) not in (2, 3):
        print("usage: python -m ttlstate.codegen scala|cpp OUT_DIR [SPARK_MINOR]", file=sys.stderr)
        return 2
    for path in write(argv[0], argv[1], argv[2] if len(argv) == 3 else None):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
