#!/usr/bin/env bash
# Compiles the Scala shim against the installed pyspark's jars (scripts/scalac.sh: the Scala
# compiler pyspark itself ships), and writes two jars into the package:
# the executor jar (jvm-shim/src/main and the code ttlstate.codegen generates from the Python
# definitions: what Spark loads) and the tools jar (jvm-shim/src/tools:
# `ttlstate migrate` and the tests' command-line hooks), compiled against the first.
set -euo pipefail
PY=${1:-.venv/bin/python}
OUT=${2:-python/ttlstate/jars/ttlstate-shim.jar}
TOOLS_OUT=${3:-$(dirname "$OUT")/ttlstate-tools.jar}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The constants Python defines once (protocol, conf keys, metric names), as Scala objects.
PYTHONPATH=python "$PY" -m ttlstate.codegen scala "$work/generated" >/dev/null
mapfile -t srcs < <(find jvm-shim/src/main/scala "$work/generated" -name '*.scala' | sort)
echo "ttlstate: compiling ${#srcs[@]} Scala files against pyspark $("$PY" -c "import pyspark; print(pyspark.__version__)")"
scripts/scalac.sh "$PY" "$work/shim" "" "${srcs[@]}"
mapfile -t tools < <(find jvm-shim/src/tools/scala -name '*.scala' | sort)
scripts/scalac.sh "$PY" "$work/tools" "$work/shim" "${tools[@]}"

mkdir -p "$(dirname "$OUT")" "$(dirname "$TOOLS_OUT")"
rm -f "$OUT" "$TOOLS_OUT"
jar cf "$OUT" -C "$work/shim" .
jar cf "$TOOLS_OUT" -C "$work/tools" .
echo "ttlstate: wrote $OUT and $TOOLS_OUT"
