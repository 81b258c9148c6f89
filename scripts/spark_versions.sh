#!/usr/bin/env bash
# The Spark-version tier (`make test-spark-versions`): for every Spark line ttlstate serves
# (python/ttlstate/spark/lines.py), in that line's own venv (scripts/spark_venv.sh, cached), its
# shim jar, tests/spark_versions/test_line.py against that Spark's own
# RocksDB provider, with one case of each feature only some lines offer (FEATURES); then, once, a
# checkpoint taken from the oldest line to the newest (tests/spark_versions/test_upgrade.py).
# The Scala unit tests run once per Scala version: `make test` runs them on the dev line (2.13),
# this tier on each line of another Scala (3.5: 2.12); SCALA_TESTS=all runs them on every line.
# Of the dev venv's line only the case `make test` has no equivalent of runs (another line's jar
# on it): `make test` runs all of tests/ on it. Prints the time of each line. LINES="4.2 4.3" runs
# those lines only (no upgrade).
set -euo pipefail
cd "$(dirname "$0")/.."
dev_line=$(sed -n 's/^pyspark==\([0-9]*\.[0-9]*\).*/\1/p' constraints.txt)
scala_of() { PYTHONPATH=python python3 -m ttlstate.spark.lines | awk -v m="$1" '$1 == m {print $3}'; }
dev_scala=$(scala_of "$dev_line")
lines=${LINES:-$(PYTHONPATH=python python3 -m ttlstate.spark.lines | cut -d' ' -f1)}
# the lines it runs on (the first offering it, or FIRST-LAST) | a test of tests/spark (one case each)
FEATURES=(
  # adoption where ttlstate writes the migrated version itself (no loadEmpty): a session window
  # from Spark's RocksDB provider, the prefix-scanned store 3.5's directories must reveal
  "3.5-4.1|tests/spark/test_migrate.py::test_session_window"
  "4.1|tests/spark/test_snapshot_lag.py"
  "4.2|tests/spark/test_migrate.py::test_aggregation_from_rocksdb"
  "3.5|tests/spark/test_repartition.py::test_operator_against_spark_rocksdb[session-window-2-to-3]"
  "3.5-3.5|tests/spark/test_repartition.py::test_stream_stream_join_against_spark_rocksdb"
)
offered() {  # LINES MINOR: whether MINOR is among LINES ("4.2": 4.2 and later; "3.5-4.1")
  local low=${1%%-*} high=${1#*-}
  [[ "$(printf '%s\n%s\n' "$low" "$2" | sort -V | head -1)" == "$low" ]] || return 1
  [[ "$1" != *-* ]] || [[ "$(printf '%s\n%s\n' "$2" "$high" | sort -V | head -1)" == "$2" ]]
}
# Lines (and the upgrade) run JOBS at a time (SPARK_VERSION_JOBS, default 2; on two cores the four
# lines and the upgrade took about 840 s so against about 900 s one at a time: the tests are mostly
# CPU-bound), each into its own log, printed whole as it ends.
JOBS=${SPARK_VERSION_JOBS:-2}
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
run_line() {  # MINOR: the line's Scala tests (where due) and cases; its result line on stdout last
  local minor=$1 started venv features=() select=() scala=skip f
  started=$(date +%s)
  venv=$(scripts/spark_venv.sh "$minor")
  for f in "${FEATURES[@]}"; do offered "${f%%|*}" "$minor" && features+=("${f#*|}"); done
  [[ "$minor" == "$dev_line" && -z "${LINES:-}" ]] && features=() &&
    select=(-k test_another_lines_jar_fails_at_start_naming_this_lines)
  [[ "${SCALA_TESTS:-}" == all || "$(scala_of "$minor")" != "$dev_scala" ]] && scala=run
  if { [[ $scala == skip ]] || scripts/scala_test.sh "$venv/bin/python" "python/ttlstate/jars/ttlstate-shim-spark$minor.jar"; } &&
     "$venv/bin/python" -m pytest -q -p no:cacheprovider tests/spark_versions/test_line.py "${features[@]}" \
       "${select[@]}"; then
    echo "Spark $minor: ok in $(( $(date +%s) - started )) s"
  else
    echo "Spark $minor: FAILED in $(( $(date +%s) - started )) s"
  fi
}
run_upgrade() {
  local started
  started=$(date +%s)
  if .venv/bin/python -m pytest -q -p no:cacheprovider tests/spark_versions/test_upgrade.py; then
    echo "upgrade 3.5 -> 4.3: ok in $(( $(date +%s) - started )) s"
  else
    echo "upgrade 3.5 -> 4.3: FAILED in $(( $(date +%s) - started )) s"
  fi
}
make -s jars  # every line's: a line's tests also try another line's jar on it
for minor in $lines; do scripts/spark_venv.sh "$minor" >/dev/null; done  # made one at a time (pip)
jobs_=($lines)
[[ -z "${LINES:-}" ]] && jobs_+=(upgrade)
running=0
for job in "${jobs_[@]}"; do
  if (( running >= JOBS )); then wait -n || true; running=$((running - 1)); fi
  ( if [[ $job == upgrade ]]; then { echo "== upgrade 3.5 -> 4.3"; run_upgrade; }
    else { echo "== Spark $job"; run_line "$job"; }; fi >"$logs/$job.log" 2>&1
    cat "$logs/$job.log" >&2 ) &
  running=$((running + 1))
done
wait
status=0
times=()
for job in "${jobs_[@]}"; do
  times+=("$(tail -1 "$logs/$job.log")")
  [[ "${times[-1]}" == *": ok in "* ]] || status=1
done
printf '%s\n' "${times[@]}"
exit $status
