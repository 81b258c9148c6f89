#!/usr/bin/env bash
# `make wheel`: the portable wheel (scripts/build_wheel.sh) and everything it needs, in phases.
# Each phase says what it does, whether its result is cached, and about how long it takes cold on
# two idle cores (the CPU time each took cold on this project's 2-core machine, over two; its wall
# times there, under load, are in docs/deployment.md, "How long make wheel takes"); then how long
# it took. The RocksDB phase also prints its pace as it goes.
#   1 the build venv (.venv-build)             4 RocksDB, lz4, zstd, zlib, static (once per machine)
#   2 a pyspark venv per Spark line (cached)   5 the native library and the wheel
#   3 the shim and tools jars per line
# Usage: scripts/make_wheel.sh BUILD_PYTHON OUT_DIR LINE...   (make wheel [LINES="3.5 4.3"])
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_PY=${1:?usage: make_wheel.sh BUILD_PYTHON OUT_DIR LINE...}
OUT=${2:?usage: make_wheel.sh BUILD_PYTHON OUT_DIR LINE...}
shift 2
lines=("$@")
[ ${#lines[@]} -gt 0 ] || { echo "make_wheel: no Spark line given" >&2; exit 2; }

# Cold minutes per phase on 2 idle cores (phases 2 and 3: per line), from the CPU time each took.
COLD_BUILD_VENV=1 COLD_SPARK_VENV=1 COLD_JARS=2 COLD_STATIC_DEPS=15 COLD_WHEEL=2
started=$SECONDS
phase_no=0
times=()
phase() {  # NAME ESTIMATE: announces a phase
  phase_no=$((phase_no + 1))
  phase_name=$1
  phase_start=$SECONDS
  echo "make wheel [$phase_no/5] $1: $2" >&2
}
phase_done() {
  local s=$((SECONDS - phase_start))
  times+=("[$phase_no/5] $phase_name: $((s / 60)) min $((s % 60)) s")
  echo "make wheel [$phase_no/5] done in $((s / 60)) min $((s % 60)) s" >&2
}
cold_or_cached() {  # CACHED? COLD_MINUTES
  if [ "$1" = yes ]; then echo "cached, seconds"; else echo "cold, about $2 min on 2 idle cores"; fi
}

# Whether make has TARGET up to date (quietly: a sub-make prints "Entering directory" on stdout).
stamp_fresh() { make --no-print-directory -q "$1" >/dev/null 2>&1 && echo yes || echo no; }
venv_cached() { scripts/spark_venv.sh --cached "$1" && echo yes || echo no; }
phase "the build venv (.venv-build: setuptools, wheel, ziglang, auditwheel)" \
  "$(cold_or_cached "$(stamp_fresh .stamps/build-venv)" $COLD_BUILD_VENV)"
make -s .stamps/build-venv
phase_done

n_cold_venvs=0 n_cold_jars=0
for l in "${lines[@]}"; do
  [ "$(venv_cached "$l")" = yes ] || n_cold_venvs=$((n_cold_venvs + 1))
  [ "$(stamp_fresh "python/ttlstate/jars/ttlstate-shim-spark$l.jar")" = yes ] || n_cold_jars=$((n_cold_jars + 1))
done
deps_cached=no  # (its cache key needs the build venv's zig: known after phase 1)
scripts/build_static_deps.sh --cached "$BUILD_PY" 2>/dev/null && deps_cached=yes
total=$(( COLD_WHEEL + n_cold_venvs * COLD_SPARK_VENV + n_cold_jars * COLD_JARS ))
[ "$deps_cached" = yes ] || total=$((total + COLD_STATIC_DEPS))
echo "make wheel: Spark lines ${lines[*]}; about $total min more on 2 idle cores, several times that on a busy machine" \
  "($n_cold_venvs pyspark venvs and $n_cold_jars jars to build; static RocksDB" \
  "$([ "$deps_cached" = yes ] && echo cached || echo "not built yet: about $COLD_STATIC_DEPS min of it"))" >&2

phase "a pyspark venv per Spark line (${lines[*]}; scripts/spark_venv.sh)" \
  "$n_cold_venvs to install, about $COLD_SPARK_VENV min each with pip's cache warm"
for l in "${lines[@]}"; do
  echo "make wheel:   Spark $l: $(scripts/spark_venv.sh "$l")" >&2
done
phase_done

phase "the shim and tools jars (${lines[*]}; scripts/build_shim.sh)" \
  "$n_cold_jars to compile, about $COLD_JARS min each on an idle core"
for l in "${lines[@]}"; do  # with the line's own venv (the dev line's too: no dev venv needed here)
  if [ "$(stamp_fresh "python/ttlstate/jars/ttlstate-shim-spark$l.jar")" = no ]; then
    line_start=$SECONDS
    scripts/build_shim.sh "$(scripts/spark_venv.sh "$l")/bin/python" python/ttlstate/jars >&2
    echo "make wheel:   Spark $l's jars in $(( (SECONDS - line_start) / 60 )) min $(( (SECONDS - line_start) % 60 )) s" >&2
  fi
done
phase_done

phase "RocksDB 7.9.2, lz4, zstd, zlib for glibc 2.28, static (scripts/build_static_deps.sh)" \
  "$(cold_or_cached "$deps_cached" $COLD_STATIC_DEPS) (the cache: \${TTLSTATE_BUILD_CACHE:-~/.cache/ttlstate-build})"
scripts/build_static_deps.sh "$BUILD_PY" >/dev/null
phase_done

phase "the native library and the wheel (scripts/build_wheel.sh)" "about $COLD_WHEEL min"
rm -f "$OUT"/ttlstate-*.whl
LINES="${lines[*]}" scripts/build_wheel.sh "$BUILD_PY" "$OUT"
phase_done

printf 'make wheel: %s\n' "${times[@]}" >&2
s=$((SECONDS - started))
echo "make wheel: done in $((s / 60)) min $((s % 60)) s: $(ls "$OUT"/ttlstate-*.whl)" >&2
