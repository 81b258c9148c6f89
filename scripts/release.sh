#!/usr/bin/env bash
# `make release`: the artifacts a release publishes, built and checked as users would meet them.
#   1 the wheel of every Spark line (`make wheel`: scripts/make_wheel.sh)
#   2 the sdist, with every line's jar inside (installing it compiles no Scala, needs no JDK)
#   3 `twine check` of both (metadata and README render as a package index would)
#   4 tests/packaging/test_release.py: each installed into fresh venvs, a streaming query run on
#     each: the wheel on every CPython 3.11+ found here and with every Spark line's pyspark, the
#     sdist built from source (native engine compiled here) with Spark 3.5
#   5 OUT_DIR/SHA256SUMS
# Nothing is uploaded. Usage: scripts/release.sh BUILD_PYTHON OUT_DIR
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_PY=${1:?usage: release.sh BUILD_PYTHON OUT_DIR}
OUT=${2:?usage: release.sh BUILD_PYTHON OUT_DIR}
started=$SECONDS
say() { echo "make release: $*" >&2; }

say "[1/5] the wheel, every Spark line"
lines=$(PYTHONPATH=python python3 -m ttlstate.spark.lines | cut -d' ' -f1)
mkdir -p "$OUT"
rm -f "$OUT"/ttlstate-* "$OUT/SHA256SUMS"
# shellcheck disable=SC2086 # one argument per line
scripts/make_wheel.sh "$BUILD_PY" "$OUT" $lines

say "[2/5] the sdist (with every line's jar)"
for l in $lines; do test -f "python/ttlstate/jars/ttlstate-shim-spark$l.jar"; done
rm -rf build/lib* python/ttlstate.egg-info
"$BUILD_PY" -c "import sys; from setuptools import build_meta; print(build_meta.build_sdist(sys.argv[1]))" "$OUT" >&2
sdist=$(ls "$OUT"/ttlstate-*.tar.gz)
wheel=$(ls "$OUT"/ttlstate-*.whl)
listing=$(tar tzf "$sdist")  # (not piped into grep -q: under pipefail its early exit fails tar)
for l in $lines; do
  grep -q "/python/ttlstate/jars/ttlstate-shim-spark$l.jar$" <<<"$listing" ||
    { say "the sdist lacks the jar of Spark $l"; exit 1; }
done

say "[3/5] twine check"
# Pinned here, not in constraints.txt: the Spark venvs' cache key hashes that file
# (scripts/spark_venv.sh), and a release-only tool must not rebuild them.
"$BUILD_PY" -m pip install -q --disable-pip-version-check twine==7.0.0
"$BUILD_PY" -m twine check --strict "$wheel" "$sdist"

say "[4/5] installed into fresh venvs, a query on each (tests/packaging/test_release.py)"
TTLSTATE_RELEASE_DIR=$(cd "$OUT" && pwd) .venv/bin/python -m pytest -m release -p no:cacheprovider -s \
  tests/packaging/test_release.py

say "[5/5] checksums"
(cd "$OUT" && sha256sum "$(basename "$wheel")" "$(basename "$sdist")" >SHA256SUMS && cat SHA256SUMS) >&2
s=$((SECONDS - started))
say "done in $((s / 60)) min $((s % 60)) s: $wheel, $sdist, $OUT/SHA256SUMS"
