#!/usr/bin/env bash
# Builds the static libraries the portable native engine links (RocksDB, lz4, zstd, zlib) with
# zig's clang for glibc 2.28 and its static libc++, and prints the prefix they are installed in.
#
# Cold, this is the longest step of CI, so it builds what the library links and nothing more:
# - of RocksDB's 323 library sources, the 244 of scripts/rocksdb_sources.txt: those a static link
#   of the native library pulls in (the rest, e.g. backup, transactions, blob DB, the C API and
#   the tools' helpers, the linker would drop). A native change that needs another one fails the
#   wheel's link (`-z defs`) naming the symbol: rebuild with TTLSTATE_ROCKSDB_SOURCES=all, then
#   regenerate the list with scripts/rocksdb_sources.py (it says how).
# - at -O2, RocksDB's own release level (CMake's Release would be -O3), and without debug
#   information (zig's clang emits it by default: 10x the object size, and much of the time).
#
# Usage: scripts/build_static_deps.sh PYTHON   (a Python that has the `ziglang` package)
#        scripts/build_static_deps.sh --cached PYTHON   exits 0 if they are built (nothing to do)
#
# Sources: the ones the crates.io crates librocksdb-sys, lz4-sys, zstd-sys and libz-sys bundle,
# fetched with cargo (a scratch project outside the repository) and checked against the hashes
# below. Cached under $TTLSTATE_BUILD_CACHE (default ~/.cache/ttlstate-build)/deps-<hash of this
# script and the zig version>: built once per machine (a cold build takes long on few cores),
# then this script only prints the prefix.
set -euo pipefail
query=""
[[ "${1:-}" == --cached ]] && { query=1; shift; }
PY=${1:?usage: build_static_deps.sh [--cached] PYTHON}

# crate name, version, sha256 of the .crate file: the pinned inputs.
CRATES=(
  "librocksdb-sys 0.10.0+7.9.2 0fe4d5874f5ff2bc616e55e8c6086d478fcda13faf9495768a4aa1c22042d30b"
  "lz4-sys 1.11.1+lz4-1.10.0 6bd8c0d6c6ed0cd30b3652886bb8711dc4bb01d637a68105a3d5158039b418e6"
  "zstd-sys 2.1.3+zstd.1.5.7 f729a06d0257428fd9d997ac8db7e1407bd0262ab016b085b36bc52957c0052d"
  "libz-sys 1.1.31 ff20308ecabd635a2dc1dd5834a86c462cca20efba1d5d3ddab1f8aea3455cb2"
)
TARGET=x86_64-linux-gnu.2.28
CFLAGS_COMMON="-O2 -g0 -fPIC -DNDEBUG"
ROCKSDB_SOURCES=${TTLSTATE_ROCKSDB_SOURCES:-list}  # list: scripts/rocksdb_sources.txt; all: every one

here=$(cd "$(dirname "$0")" && pwd)
zig_dir=$("$PY" -c 'import os, ziglang; print(os.path.dirname(ziglang.__file__))')
zig_version=$("$zig_dir/zig" version)
key=$( (cat "$here/build_static_deps.sh" "$here/rocksdb_sources.txt"; echo "$zig_version $ROCKSDB_SOURCES") |
  sha256sum | cut -c1-16)
cache=${TTLSTATE_BUILD_CACHE:-$HOME/.cache/ttlstate-build}
prefix=$cache/deps-$key
if [ -n "$query" ]; then
  [ -f "$prefix/.done" ]
  exit
fi
if [ -f "$prefix/.done" ]; then
  echo "$prefix"
  exit 0
fi
jobs=$(nproc)
log() { echo "build_static_deps: $*" >&2; }
rm -rf "$prefix"
mkdir -p "$prefix"/{bin,include,lib,src}

# The compilers, as single executables for CMake.
for tool in cc c++; do
  printf '#!/bin/sh\nexec "%s/zig" %s -target %s "$@"\n' "$zig_dir" "$tool" "$TARGET" >"$prefix/bin/z$tool"
done
for tool in ar ranlib; do
  printf '#!/bin/sh\nexec "%s/zig" %s "$@"\n' "$zig_dir" "$tool" >"$prefix/bin/z$tool"
done
chmod +x "$prefix"/bin/*
ZCC=$prefix/bin/zcc
ZAR=$prefix/bin/zar

# CMake and Ninja build RocksDB (Debian's, installed when missing).
if ! command -v cmake >/dev/null || ! command -v ninja >/dev/null; then
  command -v apt-get >/dev/null || { log "cmake and ninja are needed: install them"; exit 1; }
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends cmake ninja-build >&2
fi

# Fetch the crates with cargo (it verifies them against the index), then check the pins.
command -v cargo >/dev/null || { log "cargo is needed to fetch the native sources (crates.io)"; exit 1; }
fetch=$prefix/src/fetch
mkdir -p "$fetch/src"
{
  printf '[package]\nname = "ttlstate-native-sources"\nversion = "0.0.0"\nedition = "2021"\n\n[dependencies]\n'
  for c in "${CRATES[@]}"; do
    read -r name version _ <<<"$c"
    printf '%s = { version = "=%s", default-features = false }\n' "$name" "$version"
  done
} >"$fetch/Cargo.toml"
echo "" >"$fetch/src/lib.rs"
log "fetching sources with cargo"
cargo fetch -q --manifest-path "$fetch/Cargo.toml"
for c in "${CRATES[@]}"; do
  read -r name version sha <<<"$c"
  crate=$(ls "${CARGO_HOME:-$HOME/.cargo}"/registry/cache/*/"$name-$version.crate" | head -1)
  echo "$sha  $crate" | sha256sum -c --quiet - || { log "$crate: unexpected sha256"; exit 1; }
  tar xzf "$crate" -C "$prefix/src"
done
src=$prefix/src

# A static library from C sources: NAME OUT_DIR SOURCES...
# The object list is made outside the compile pipeline: a pipeline's loop runs in a subshell, so
# what it appends to `objs` is lost (that left empty archives and a library that does not load).
static_c() {
  local name=$1 out=$2
  shift 2
  local objs=() f
  mkdir -p "$out/obj-$name"
  for f in "$@"; do
    objs+=("$out/obj-$name/$(basename "${f%.*}").o")
  done
  for f in "$@"; do
    echo "$ZCC $CFLAGS_COMMON ${EXTRA_CFLAGS:-} -c $f -o $out/obj-$name/$(basename "${f%.*}").o"
  done | xargs -P "$jobs" -I{} sh -c '{}'
  [ "${#objs[@]}" -eq "$#" ] && [ "$(printf '%s\n' "${objs[@]}" | sort -u | wc -l)" -eq "$#" ] || {
    log "lib$name: ${#objs[@]} objects for $# sources (a basename twice?)"; exit 1; }
  "$ZAR" rcs "$prefix/lib/lib$name.a" "${objs[@]}"
}

# Waits for the build PID, printing every minute how many of TOTAL objects under DIR exist and,
# at the pace so far, about how long the rest takes; fails if the build does.
progress() {
  local pid=$1 total=$2 dir=$3 start=$SECONDS done_n elapsed
  while kill -0 "$pid" 2>/dev/null; do
    sleep 5
    (( (SECONDS - start) % 60 < 5 )) || continue
    done_n=$(find "$dir" -name '*.o' 2>/dev/null | wc -l)
    elapsed=$(( SECONDS - start ))
    if (( done_n > 0 )); then
      log "rocksdb: $done_n of $total compiled after $(( elapsed / 60 )) min; about" \
        "$(( (total - done_n) * elapsed / done_n / 60 + 1 )) min left at this pace"
    fi
  done
  wait "$pid"
}

log "zlib"
z=$src/libz-sys-1.1.31/src/zlib
static_c z "$prefix/build" "$z"/{adler32,compress,crc32,deflate,infback,inffast,inflate,inftrees,trees,uncompr,zutil}.c
cp "$z"/zlib.h "$z"/zconf.h "$prefix/include/"

log "zstd"
zs=$src/zstd-sys-2.1.3+zstd.1.5.7/zstd/lib
EXTRA_CFLAGS="-DZSTD_DISABLE_ASM -DZSTD_MULTITHREAD=0" static_c zstd "$prefix/build" \
  "$zs"/common/*.c "$zs"/compress/*.c "$zs"/decompress/*.c
cp "$zs"/zstd.h "$zs"/zstd_errors.h "$zs"/zdict.h "$prefix/include/"

log "lz4"
l=$src/lz4-sys-1.11.1+lz4-1.10.0/liblz4/lib
static_c lz4 "$prefix/build" "$l"/lz4.c "$l"/lz4hc.c "$l"/lz4frame.c "$l"/xxhash.c
cp "$l"/lz4.h "$l"/lz4hc.h "$l"/lz4frame.h "$prefix/include/"

r=$src/librocksdb-sys-0.10.0+7.9.2/rocksdb
b=$prefix/build/rocksdb
cmake -S "$r" -B "$b" -G Ninja -Wno-dev \
  -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_COMPILER="$prefix/bin/zcc" -DCMAKE_CXX_COMPILER="$prefix/bin/zc++" \
  -DCMAKE_C_FLAGS_RELEASE="-O2 -g0 -DNDEBUG" -DCMAKE_CXX_FLAGS_RELEASE="-O2 -g0 -DNDEBUG" \
  -DCMAKE_AR="$prefix/bin/zar" -DCMAKE_RANLIB="$prefix/bin/zranlib" -DCMAKE_POSITION_INDEPENDENT_CODE=ON \
  -DPORTABLE=ON -DUSE_RTTI=ON -DFAIL_ON_WARNINGS=OFF -DROCKSDB_BUILD_SHARED=OFF \
  -DWITH_LZ4=ON -Dlz4_INCLUDE_DIRS="$prefix/include" -Dlz4_LIBRARIES="$prefix/lib/liblz4.a" \
  -DWITH_ZSTD=OFF -DWITH_ZLIB=OFF -DWITH_SNAPPY=OFF -DWITH_BZ2=OFF -DWITH_GFLAGS=OFF -DWITH_LIBURING=OFF \
  -DWITH_JEMALLOC=OFF -DWITH_TESTS=OFF -DWITH_TOOLS=OFF -DWITH_CORE_TOOLS=OFF -DWITH_BENCHMARK_TOOLS=OFF \
  -DWITH_TRACE_TOOLS=OFF -DWITH_ALL_TESTS=OFF >"$prefix/build/rocksdb-cmake.log"
if [ "$ROCKSDB_SOURCES" = all ]; then
  log "rocksdb: every library source (the long part)"
  cmake --build "$b" --target rocksdb -j "$jobs" >"$prefix/build/rocksdb-build.log"
  cp "$b/librocksdb.a" "$prefix/lib/"
else
  mapfile -t objs < <(sed -e '/^#/d' -e '/^$/d' -e 's|$|.o|' -e 's|^|CMakeFiles/rocksdb.dir/|' "$here/rocksdb_sources.txt")
  log "rocksdb: the ${#objs[@]} sources the native library links (the long part)"
  ninja -C "$b" -j "$jobs" "${objs[@]}" >"$prefix/build/rocksdb-build.log" &
  progress "$!" "${#objs[@]}" "$b/CMakeFiles/rocksdb.dir"
  (cd "$b" && "$ZAR" rcs "$prefix/lib/librocksdb.a" "${objs[@]}")
fi
cp -r "$r/include/rocksdb" "$prefix/include/"
if [ "$ROCKSDB_SOURCES" = all ]; then
  log "kept RocksDB's objects under $b (for scripts/rocksdb_sources.py)"
else
  rm -rf "$prefix/build"
fi
echo "$TARGET" >"$prefix/target"
touch "$prefix/.done"
echo "$prefix"
