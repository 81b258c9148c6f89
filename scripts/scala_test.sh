#!/usr/bin/env bash
# The shim's Scala unit tests (jvm-shim/src/test: key filter, hot cache, expiry, wire codec, conf
# values, Spark's metadata files), with ScalaTest fetched by Maven from jvm-shim/test-deps/pom.xml
# into a cache folder named after a hash of that pom (once; stamped when complete), compiled with
# pyspark's scalac against the shim jar (again only when a test source or the jar changed), run
# with ScalaTest's runner. Exits non-zero if a test fails; the last line says how many passed.
# ScalaTest is the build for the Scala version of PYTHON's pyspark (2.12 for Spark 3.5, else 2.13).
# Usage: scripts/scala_test.sh PYTHON SHIM_JAR
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${1:?usage: scala_test.sh PYTHON SHIM_JAR}
SHIM=${2:?usage: scala_test.sh PYTHON SHIM_JAR}
JARS=$("$PY" -c "import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), 'jars'))")
scala=$(basename "$(ls "$JARS"/scala-library-*.jar)" | sed -E 's/scala-library-([0-9]+\.[0-9]+)\..*/\1/')

parent=${TTLSTATE_SCALA_TEST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ttlstate-scala-test}
deps="$parent/$scala-$(sha256sum jvm-shim/test-deps/pom.xml | cut -c1-12)"
if [[ ! -f "$deps/.complete" ]]; then
  scripts/ensure_maven.sh
  tmp="$deps.tmp.$$"
  rm -rf "$tmp"
  trap 'rm -rf "$tmp"' EXIT
  echo "scala_test: fetching ScalaTest" >&2
  mvn -q -B -Dstyle.color=never -f jvm-shim/test-deps/pom.xml dependency:copy-dependencies \
    -Dscala.binary="$scala" -DoutputDirectory="$tmp" >&2
  rm -rf "$deps"
  mv "$tmp" "$deps"
  touch "$deps/.complete"
fi

# The compiled tests, in the cache folder too, under a hash of what they are compiled from (a fresh
# clone with the same sources and jar reuses them); older compiles for the same jar name go.
mapfile -t srcs < <(find jvm-shim/src/test/scala -name '*.scala' | sort)
inputs=$( { sha256sum "${srcs[@]}"; cat "$SHIM" "$deps"/*.jar; } | sha256sum | cut -c1-16)
classes="$parent/classes-$(basename "$SHIM" .jar)-$inputs"
if [[ ! -f "$classes/.complete" ]]; then
  echo "ttlstate: compiling ${#srcs[@]} Scala test files" >&2
  rm -rf "$parent/classes-$(basename "$SHIM" .jar)-"*
  mkdir -p "$classes"
  scripts/scalac.sh "$PY" "$classes" "$SHIM:$deps/*" "${srcs[@]}"
  touch "$classes/.complete"
fi

out=$(mktemp)
status=0
# C1 JIT only (as the tests' Spark JVMs, tests/spark/harness.py FAST_JVM): C2's compiler threads
# took most of this short run's CPU on two cores (36 s against 13 s).
java -XX:TieredStopAtLevel=1 -cp "$classes:$SHIM:$deps/*:$JARS/*" org.scalatest.tools.Runner -R "$classes" -oW >"$out" 2>&1 || status=$?
cat "$out"
summary=$(grep -E "^Tests: succeeded" "$out" | tail -1 || true)
rm -f "$out"
if [[ $status -ne 0 || -z "$summary" || "$summary" != *"failed 0, canceled 0"* ]]; then
  echo "ttlstate: Scala unit tests FAILED (${summary:-no summary})" >&2
  exit 1
fi
echo "ttlstate: Scala unit tests passed: ${summary#Tests: }"
