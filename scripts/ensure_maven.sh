#!/usr/bin/env bash
# Installs Maven with apt when `mvn` is missing (the Scala unit tests and the integration tier
# fetch their jars with it); needs a JDK's javac as well.
set -euo pipefail
if ! command -v mvn >/dev/null; then
  command -v apt-get >/dev/null || { echo "ensure_maven: mvn not found; install Maven" >&2; exit 1; }
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends maven >&2
fi
command -v javac >/dev/null || { echo "ensure_maven: javac not found (a JDK 17 is needed)" >&2; exit 1; }
