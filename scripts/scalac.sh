#!/usr/bin/env bash
# pyspark's own Scala compiler (the one in its jars/, so neither sbt nor Maven builds anything),
# with pyspark's jars on the classpath, for Java 17. Every Scala build here goes through it: the
# shim and tools jars, the Scala unit tests, the benchmarks' Scala jobs.
# Usage: scripts/scalac.sh PYTHON OUT_DIR EXTRA_CLASSPATH SOURCES...   (EXTRA_CLASSPATH may be "")
set -euo pipefail
PY=$1 out=$2 extra=$3
shift 3
JARS=$("$PY" -c "import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), 'jars'))")
scala_cp=$(ls "$JARS"/scala-compiler-*.jar "$JARS"/scala-library-*.jar "$JARS"/scala-reflect-*.jar | tr '\n' ':')
mkdir -p "$out"
java -Xss8m -cp "$scala_cp" scala.tools.nsc.Main -release 17 -deprecation -feature \
  -classpath "${extra:+$extra:}$JARS/*" -d "$out" "$@"
