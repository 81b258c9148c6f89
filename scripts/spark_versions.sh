#!/usr/bin/env bash
# The Spark-version tier (`make test-spark-versions`): for every Spark line ttlstate serves
# (python/ttlstate/spark/lines.py), in that line's own venv (scripts/spark_venv.sh, cached), its
# shim jar, its Scala unit tests and tests/spark_versions/test_line.py against that Spark's own
# RocksDB provider; then, once, a checkpoint taken from the oldest line to the newest
# (tests/spark_versions/test_upgrade.py). Prints the time of each line. LINES="4.2 4.3" limits it.
set -euo pipefail
cd "$(dirname "$0")/.."
lines=${LINES:-$(PYTHONPATH=python python3 -m ttlstate.spark.lines | cut -d' ' -f1)}
times=()
status=0
for minor in $lines; do
  started=$(date +%s)
  echo "== Spark $minor" >&2
  venv=$(scripts/spark_venv.sh "$minor")
  make -s "python/ttlstate/jars/ttlstate-shim-spark$minor.jar"
  if scripts/scala_test.sh "$venv/bin/python" "python/ttlstate/jars/ttlstate-shim-spark$minor.jar" >/dev/null &&
     "$venv/bin/python" -m pytest -q -p no:cacheprovider tests/spark_versions/test_line.py; then
    result=ok
  else
    result=FAILED
    status=1
  fi
  times+=("Spark $minor: $result in $(( $(date +%s) - started )) s")
done
started=$(date +%s)
if [[ -z "${LINES:-}" ]]; then
  make -s jars
  if .venv/bin/python -m pytest -q -p no:cacheprovider tests/spark_versions/test_upgrade.py; then result=ok
  else result=FAILED; status=1; fi
  times+=("upgrade 3.5 -> 4.3: $result in $(( $(date +%s) - started )) s")
fi
printf '%s\n' "${times[@]}"
exit $status
