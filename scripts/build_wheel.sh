#!/usr/bin/env bash
# Builds the portable wheel: ttlstate-<version>-py3-none-manylinux_2_28_x86_64.whl, one wheel for
# every CPython 3 that pyspark supports.
#
# Usage: [LINES="3.5 4.3"] scripts/build_wheel.sh BUILD_PYTHON OUT_DIR
#   BUILD_PYTHON: a Python with setuptools, wheel, ziglang and auditwheel (`make wheel`'s build venv).
#   LINES: the Spark lines whose jars the wheel carries (default: every line); they must be built.
#
# The native library (the C ABI of native/include/ttlstate/c_api.h) is compiled with zig's clang
# for glibc 2.28, its libc++ linked statically, against the static RocksDB, lz4, zstd and zlib of
# scripts/build_static_deps.sh (cached), and exports only the ttl_* functions. setup.py then
# packages it as is (TTLSTATE_PREBUILT_LIB) under the py3-none tag, with the shim jar, which must
# be built already. `-z defs`: a symbol no linked library defines fails the link (it would
# otherwise fail only when the library is loaded).
set -euo pipefail
PY=${1:?usage: build_wheel.sh BUILD_PYTHON OUT_DIR}
OUT=${2:?usage: build_wheel.sh BUILD_PYTHON OUT_DIR}
PLATFORM=manylinux_2_28_x86_64
cd "$(dirname "$0")/.."
lines=${LINES:-$(PYTHONPATH=python python3 -m ttlstate.spark.lines | cut -d' ' -f1)}
for minor in $lines; do
  for jar in ttlstate-shim-spark$minor.jar ttlstate-tools-spark$minor.jar; do
    test -f "python/ttlstate/jars/$jar" || { echo "build_wheel: build the jars first (make jars): $jar is missing" >&2; exit 1; }
  done
done

prefix=$(scripts/build_static_deps.sh "$PY")
zig=$("$PY" -c 'import os, ziglang; print(os.path.join(os.path.dirname(ziglang.__file__), "zig"))')
cxx=("$zig" c++ -target "$(cat "$prefix/target")")  # the target the static libraries were built for
build=build/portable
rm -rf "$build" build/lib* build/bdist*
mkdir -p "$build/obj"
printf '{\n  global: ttl_*;\n  local: *;\n};\n' >"$build/exports.map"

PYTHONPATH=python "$PY" -m ttlstate.codegen cpp build/generated/include >/dev/null  # the generated headers
echo "build_wheel: compiling the native library for $PLATFORM" >&2
pids=()
for src in native/src/*.cpp; do
  # Warnings are errors in ttlstate's code; the static dependencies' headers are system headers
  # (-isystem), whose warnings are not ours to fix.
  "${cxx[@]}" -std=c++17 -O2 -fPIC -Wall -Wextra -Werror -fvisibility=hidden -Inative/include -Ibuild/generated/include \
    -isystem "$prefix/include" \
    -c "$src" -o "$build/obj/$(basename "$src" .cpp).o" &
  pids+=($!)
  if [ ${#pids[@]} -ge "$(nproc)" ]; then wait "${pids[0]}"; pids=("${pids[@]:1}"); fi
done
for pid in "${pids[@]}"; do wait "$pid"; done
"${cxx[@]}" -shared -o "$build/libttlstate_native.so" "$build"/obj/*.o \
  "$prefix/lib/librocksdb.a" "$prefix/lib/liblz4.a" "$prefix/lib/libzstd.a" "$prefix/lib/libz.a" \
  -lpthread -ldl -Wl,--version-script="$build/exports.map" -Wl,--gc-sections -Wl,-z,defs -s

mkdir -p "$OUT"
# The jars are built (above): setup.py packages those of $lines and compiles none.
TTLSTATE_PREBUILT_LIB="$PWD/$build/libttlstate_native.so" TTLSTATE_PLATFORM_TAG=$PLATFORM \
  TTLSTATE_PREBUILT_JARS=1 TTLSTATE_JAR_LINES="$lines" \
  "$PY" -m pip wheel -q --disable-pip-version-check --no-build-isolation --no-deps -w "$OUT" .
wheel=$(ls "$OUT"/ttlstate-*-py3-none-$PLATFORM.whl)
# Checks the tag against the binary: no library outside manylinux's base set, no symbol newer.
"$PY" -m auditwheel show "$wheel" >&2
echo "$wheel"
