#!/usr/bin/env bash
# Compiles the Scala shim for the Spark line of the pyspark installed in PYTHON, against that
# pyspark's jars with the Scala compiler it ships (scripts/scalac.sh), and writes two jars into
# OUT_DIR, named for the line (python/ttlstate/spark/lines.py): the executor jar
# ttlstate-shim-spark<minor>.jar (jvm-shim/src/main, the folders of jvm-shim/src/spark named for
# the lines they serve, and the code ttlstate.codegen generates from the Python definitions) and
# the tools jar ttlstate-tools-spark<minor>.jar (jvm-shim/src/tools and jvm-shim/src/spark-tools:
# `ttlstate migrate` and the tests' command-line hooks), compiled against the first.
# Usage: scripts/build_shim.sh [PYTHON [OUT_DIR]]
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${1:-.venv/bin/python}
OUT_DIR=${2:-python/ttlstate/jars}
version=$("$PY" -c "import pyspark; print(pyspark.__version__)")
minor=$(PYTHONPATH=python python3 -m ttlstate.spark.lines "$version")
jar=$OUT_DIR/ttlstate-shim-spark$minor.jar
tools_jar=$OUT_DIR/ttlstate-tools-spark$minor.jar
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

folders() { PYTHONPATH=python python3 -m ttlstate.spark.lines --folders "$minor" "$1"; }
# The constants Python defines once (protocol, conf keys, metric names, this line), as Scala objects.
PYTHONPATH=python python3 -m ttlstate.codegen scala "$work/generated" "$minor" >/dev/null
mapfile -t srcs < <(find jvm-shim/src/main/scala $(folders jvm-shim/src/spark) "$work/generated" -name '*.scala' | sort)
echo "ttlstate: compiling ${#srcs[@]} Scala files for Spark $minor against pyspark $version"
scripts/scalac.sh "$PY" "$work/shim" "" "${srcs[@]}"
mapfile -t tools < <(find jvm-shim/src/tools/scala $(folders jvm-shim/src/spark-tools) -name '*.scala' | sort)
scripts/scalac.sh "$PY" "$work/tools" "$work/shim" "${tools[@]}"

mkdir -p "$OUT_DIR"
rm -f "$jar" "$tools_jar"
jar cf "$jar" -C "$work/shim" .
jar cf "$tools_jar" -C "$work/tools" .
echo "ttlstate: wrote $jar and $tools_jar"
