#!/usr/bin/env bash
# Prints the jars directory of a Spark, given as SPARK: a Python whose pyspark it is (its `jars/`),
# or that directory itself (a Spark distribution's `$SPARK_HOME/jars`, or pyspark's). What the
# shim is compiled against (scripts/build_shim.sh, scripts/scalac.sh). With --version, prints that
# Spark's version instead (from its spark-core jar's name).
# Usage: scripts/spark_jars.sh [--version] SPARK
set -euo pipefail
want=dir
[[ "${1:-}" == --version ]] && { want=version; shift; }
spark=${1:?usage: spark_jars.sh [--version] PYTHON_OR_JARS_DIR}
if [[ -d "$spark" ]]; then
  jars=$spark
else
  jars=$("$spark" -c "import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), 'jars'))")
fi
core=$(ls "$jars"/spark-core_*.jar 2>/dev/null | head -1)
[[ -n "$core" ]] || { echo "spark_jars: no Spark in $jars (no spark-core_*.jar)" >&2; exit 2; }
if [[ $want == version ]]; then
  basename "$core" .jar | sed -E 's/^spark-core_[0-9.]+-//'
else
  echo "$jars"
fi
