#!/usr/bin/env bash
# Compiles the Scala shim for the Spark line of SPARK, against that Spark's jars with the Scala
# compiler it ships (scripts/scalac.sh), and writes two jars into OUT_DIR, named for the line
# (python/ttlstate/spark/lines.py): the executor jar ttlstate-shim-spark<minor>.jar
# (jvm-shim/src/main, Java and Scala, the folders of jvm-shim/src/spark named for the lines they
# serve, and the code ttlstate.codegen generates from the Python definitions) and the tools jar
# ttlstate-tools-spark<minor>.jar (jvm-shim/src/tools and jvm-shim/src/spark-tools: `ttlstate
# migrate` and the tests' command-line hooks), compiled against the first.
# SPARK: a Python with pyspark (`make jar`, `make jars`), or a Spark's jars directory (a source
# install of the package compiles against the Spark installed where it goes: setup.py).
# The build's own Python (lines, codegen; standard library only): $TTLSTATE_BUILD_PYTHON, else python3.
# TTLSTATE_JAR_CACHE (make sets it: ~/.cache/ttlstate-build/jars): a folder of jars built before,
# each under a hash of everything that goes into it (every shim source, the generated code, these
# build scripts, the Spark version and the JDK), so a fresh clone, `make wheel` and the
# Spark-version tier compile a line only when one of those changed. Unset: always compiles.
# Usage: scripts/build_shim.sh [SPARK [OUT_DIR]]
set -euo pipefail
cd "$(dirname "$0")/.."
SPARK=${1:-.venv/bin/python}
OUT_DIR=${2:-python/ttlstate/jars}
BUILD_PY=${TTLSTATE_BUILD_PYTHON:-python3}
version=$(scripts/spark_jars.sh --version "$SPARK")
minor=$(PYTHONPATH=python "$BUILD_PY" -m ttlstate.spark.lines "$version")
jar=$OUT_DIR/ttlstate-shim-spark$minor.jar
tools_jar=$OUT_DIR/ttlstate-tools-spark$minor.jar
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

folders() { PYTHONPATH=python "$BUILD_PY" -m ttlstate.spark.lines --folders "$minor" "$1"; }
# The constants Python defines once (protocol, conf keys, metric names, this line), as Scala objects.
PYTHONPATH=python "$BUILD_PY" -m ttlstate.codegen scala "$work/generated" "$minor" >/dev/null
mapfile -t srcs < <(find jvm-shim/src/main/scala $(folders jvm-shim/src/spark) "$work/generated" -name '*.scala' | sort)
jars=$(scripts/spark_jars.sh "$SPARK")
cached=
if [[ -n "${TTLSTATE_JAR_CACHE:-}" ]]; then
  key=$( { echo "$version $minor"; javac -version 2>&1
           cat scripts/build_shim.sh scripts/scalac.sh scripts/spark_jars.sh
           find jvm-shim/src -path jvm-shim/src/test -prune -o -type f -print | sort | xargs sha256sum
           (cd "$work" && find generated -type f | sort | xargs sha256sum); } | sha256sum | cut -c1-16)
  cached=$TTLSTATE_JAR_CACHE/$minor-$key
  if [[ -f "$cached/.complete" ]]; then
    mkdir -p "$OUT_DIR"
    cp "$cached/$(basename "$jar")" "$jar"
    cp "$cached/$(basename "$tools_jar")" "$tools_jar"
    echo "ttlstate: $jar and $tools_jar from the jar cache ($cached: built before from the same sources)"
    exit 0
  fi
fi
# The entry classes Spark loads by name, and their line check, are Java (they must load on Scala
# 2.12 and 2.13 alike): compiled first, the Scala code beside them.
mapfile -t java_srcs < <(find jvm-shim/src/main/java "$work/generated" -name '*.java' | sort)
echo "ttlstate: compiling ${#java_srcs[@]} Java and ${#srcs[@]} Scala files for Spark $minor against Spark $version ($jars)"
mkdir -p "$work/shim"
javac --release 17 -cp "$jars/*" -d "$work/shim" "${java_srcs[@]}"
scripts/scalac.sh "$SPARK" "$work/shim" "$work/shim" "${srcs[@]}"
mapfile -t tools < <(find jvm-shim/src/tools/scala $(folders jvm-shim/src/spark-tools) -name '*.scala' | sort)
scripts/scalac.sh "$SPARK" "$work/tools" "$work/shim" "${tools[@]}"

mkdir -p "$OUT_DIR"
rm -f "$jar" "$tools_jar"
jar cf "$jar" -C "$work/shim" .
jar cf "$tools_jar" -C "$work/tools" .
echo "ttlstate: wrote $jar and $tools_jar"
if [[ -n "$cached" ]]; then  # written whole, then marked complete: a cut-off copy is never used
  rm -rf "$cached"
  mkdir -p "$cached"
  cp "$jar" "$tools_jar" "$cached/"
  touch "$cached/.complete"
fi
