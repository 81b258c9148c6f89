#!/usr/bin/env bash
# pyspark's own Scala compiler (the one in its jars/, so neither sbt nor Maven builds anything),
# with pyspark's jars on the classpath, for Java 17. Every Scala build here goes through it: the
# shim and tools jars, the Scala unit tests, the benchmarks' Scala jobs. SPARK is a Python with
# pyspark, or a Spark's jars directory (scripts/spark_jars.sh): a Spark distribution ships the
# same compiler (its REPL's).
# Usage: scripts/scalac.sh SPARK OUT_DIR EXTRA_CLASSPATH SOURCES...   (EXTRA_CLASSPATH may be "")
set -euo pipefail
SPARK=$1 out=$2 extra=$3
shift 3
JARS=$("$(dirname "$0")/spark_jars.sh" "$SPARK")
scala_cp=$(ls "$JARS"/scala-compiler-*.jar "$JARS"/scala-library-*.jar "$JARS"/scala-reflect-*.jar | tr '\n' ':')
mkdir -p "$out"
java -Xss8m -cp "$scala_cp" scala.tools.nsc.Main -release 17 -deprecation -feature \
  -classpath "${extra:+$extra:}$JARS/*" -d "$out" "$@"
