#!/usr/bin/env bash
# A virtualenv with pyspark of one Spark line (python/ttlstate/spark/lines.py) and what the
# Spark-version matrix tier runs (pytest, pandas, pyarrow, ...), created once and cached under
# ${TTLSTATE_SPARK_CACHE:-~/.cache/ttlstate-spark}, named after the line's pyspark release and
# the constraints it was installed with. Prints the venv's directory. The checkout's python/ is put
# on its path (a .pth file, rewritten each call: the cache may serve several checkouts).
# The dev venv (.venv, `make setup`) serves its own line: no second venv of the same pyspark.
# Usage: scripts/spark_venv.sh MINOR   (e.g. 4.2)
#        scripts/spark_venv.sh --cached MINOR   exits 0 if it exists (nothing to install)
set -euo pipefail
cd "$(dirname "$0")/.."
query=""
[[ "${1:-}" == --cached ]] && { query=1; shift; }
minor=${1:?usage: spark_venv.sh [--cached] MINOR}
pyspark=$(PYTHONPATH=python python3 -m ttlstate.spark.lines | awk -v m="$minor" '$1 == m {print $2}')
[ -n "$pyspark" ] || { echo "spark_venv: no Spark line $minor (see python/ttlstate/spark/lines.py)" >&2; exit 2; }
if [[ -x .venv/bin/python && -f .stamps/deps ]] &&
   [[ "$(.venv/bin/python -c 'import pyspark; print(pyspark.__version__)' 2>/dev/null)" == "$pyspark" ]]; then
  [ -n "$query" ] && exit 0
  echo "$PWD/.venv"
  exit 0
fi
# The dev constraints without pyspark and py4j (each line brings its own py4j) and without what
# the line pins itself (lines.py: python_pins).
mapfile -t pins < <(PYTHONPATH=python python3 -m ttlstate.spark.lines --pins "$minor")
pinned=$(printf '%s\n' "${pins[@]}" | sed -E 's/[<>=!~ ].*//' | paste -sd'|')
constraints=$(grep -vE "^(pyspark|py4j${pinned:+|$pinned})==" constraints.txt)
# protobuf: PySpark's transformWithState (in pandas and in rows) speaks it to the JVM.
packages="pytest hypothesis pandas pyarrow protobuf psutil zstandard rocksdict ${pins[*]}"
parent=${TTLSTATE_SPARK_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ttlstate-spark}
key=$( (echo "$pyspark"; echo "$constraints"; echo "$packages") | sha256sum | cut -c1-12)
venv="$parent/venv-$minor-$key"
if [ -n "$query" ]; then
  [[ -f "$venv/.complete" ]]
  exit
fi
if [[ ! -f "$venv/.complete" ]]; then
  mkdir -p "$parent"
  rm -rf "$venv"
  python3 -m venv "$venv"
  echo "$constraints" >"$venv/constraints.txt"
  echo "spark_venv: installing pyspark $pyspark into $venv" >&2
  "$venv/bin/python" -m pip install -q --disable-pip-version-check -c "$venv/constraints.txt" \
    "pyspark==$pyspark" $packages >&2  # $packages unquoted: one word per package
  touch "$venv/.complete"
fi
site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
echo "$PWD/python" >"$site/ttlstate-checkout.pth"
echo "$venv"
