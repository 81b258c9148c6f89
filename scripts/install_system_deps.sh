#!/usr/bin/env bash
# Installs the system packages the build needs, only when missing (idempotent, fast when set up).
set -euo pipefail
need=()
for pkg in librocksdb-dev libzstd-dev zlib1g-dev g++ make; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
done
command -v java >/dev/null 2>&1 || need+=(openjdk-17-jdk-headless)
command -v javac >/dev/null 2>&1 || need+=(openjdk-17-jdk-headless)
[ ${#need[@]} -eq 0 ] && exit 0
if ! command -v apt-get >/dev/null 2>&1; then
  echo "ttlstate setup: missing system packages: ${need[*]}. Install them with your package manager" >&2
  echo "(Debian names: librocksdb-dev libzstd-dev zlib1g-dev g++ openjdk-17-jdk-headless), or build with TTLSTATE_NO_NATIVE=1." >&2
  exit 1
fi
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
echo "ttlstate setup: installing ${need[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}"
