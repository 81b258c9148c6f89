#!/usr/bin/env bash
# Compiles the Scala shim against the installed pyspark's jars with the Scala compiler that
# pyspark itself ships (Maven Central is not needed), and writes the jar into the package.
# A third argument compiles another source directory the same way (benchmarks' Scala jobs).
set -euo pipefail
PY=${1:-.venv/bin/python}
OUT=${2:-python/ttlstate/jars/ttlstate-shim.jar}
SRC=${3:-jvm-shim/src/main/scala}
JARS=$("$PY" -c "import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), 'jars'))")
scala_cp=$(ls "$JARS"/scala-compiler-*.jar "$JARS"/scala-library-*.jar "$JARS"/scala-reflect-*.jar | tr '\n' ':')
classes=$(mktemp -d)
trap 'rm -rf "$classes"' EXIT
mapfile -t srcs < <(find "$SRC" -name '*.scala' | sort)
echo "ttlstate: compiling ${#srcs[@]} Scala files against pyspark $("$PY" -c "import pyspark; print(pyspark.__version__)")"
java -Xss8m -cp "$scala_cp" scala.tools.nsc.Main -release 17 -deprecation -feature \
  -classpath "$JARS/*" -d "$classes" "${srcs[@]}"
mkdir -p "$(dirname "$OUT")"
rm -f "$OUT"
jar cf "$OUT" -C "$classes" .
echo "ttlstate: wrote $OUT"
