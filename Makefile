# The two commands a user needs: `make run` and `make test`. Both set up what is missing first.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
STAMPS := .stamps
# The Spark line of the dev venv's pyspark (constraints.txt): `make setup` builds its jars only;
# `make jars` (and the wheel, and the Spark-version tier) build every line's.
DEV_LINE := $(shell sed -n 's/^pyspark==\([0-9]*\.[0-9]*\).*/\1/p' constraints.txt)
LINES := $(shell PYTHONPATH=python python3 -m ttlstate.spark.lines | cut -d' ' -f1)
JAR_DIR := python/ttlstate/jars
JAR := $(JAR_DIR)/ttlstate-shim-spark$(DEV_LINE).jar
TOOLS_JAR := $(JAR_DIR)/ttlstate-tools-spark$(DEV_LINE).jar
# Jars built before from the same sources are copied, not compiled again (scripts/build_shim.sh).
export TTLSTATE_JAR_CACHE ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/ttlstate-build/jars
ALL_JARS := $(foreach l,$(LINES),$(JAR_DIR)/ttlstate-shim-spark$(l).jar)
SCALA_SRC := $(shell find jvm-shim/src/main jvm-shim/src/tools jvm-shim/src/spark jvm-shim/src/spark-tools -name '*.scala' -o -name '*.java' 2>/dev/null)
NATIVE_SRC := $(shell find native -name '*.cpp' -o -name '*.h' 2>/dev/null)
# The Python definitions ttlstate.codegen emits for Scala and C++, and the generator itself.
CODEGEN_SRC := $(wildcard python/ttlstate/codegen/*.py) python/ttlstate/server/protocol.py \
               python/ttlstate/config/keys.py python/ttlstate/config/parse.py \
               python/ttlstate/config/store_config.py python/ttlstate/store/metric_names.py \
               python/ttlstate/ttl/ttl_value.py python/ttlstate/_native_abi.py
DEV_PKGS := "setuptools>=68" wheel pyspark rocksdict zstandard pytest pytest-xdist hypothesis ruff mypy psutil pandas pyarrow matplotlib protobuf \
            mkdocs pybind11 venv-pack grpcio grpcio-status googleapis-common-protos
# pytest-xdist: `make test` in TEST_JOBS processes, one test module each at a time (a module
# shares one SparkSession); pybind11: only to build commits before the C ABI
# (benchmarks/harness/baseline.py); venv-pack: the executors' venv of `make test-cluster`; grpcio, grpcio-status, googleapis-common-protos: the Spark
# Connect client (pyspark's `connect` extra) of its Connect scenario.

.PHONY: setup run test test-scala test-long test-integration test-spark-versions test-cluster bench bench-quick lint jar jars native wheel release docs docs-gen clean

setup: $(STAMPS)/system $(STAMPS)/install $(JAR) $(TOOLS_JAR)

$(STAMPS)/system: scripts/install_system_deps.sh
	@mkdir -p $(STAMPS)
	scripts/install_system_deps.sh
	@touch $@

$(STAMPS)/deps: constraints.txt $(STAMPS)/system
	@mkdir -p $(STAMPS)
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check -c constraints.txt $(DEV_PKGS)
	@touch $@

# Editable install; builds the native library (native/, linked against the system's librocksdb)
# in place: python/ttlstate/libttlstate_native.so, the same C ABI the wheel's library has. The jars
# are the targets below: TTLSTATE_PREBUILT_JARS keeps setup.py from compiling one too.
$(STAMPS)/install: $(STAMPS)/deps setup.py pyproject.toml $(NATIVE_SRC) $(CODEGEN_SRC)
	rm -f python/ttlstate/_native.cpython-*.so  # the former pybind11 extension would shadow _native.py
	TTLSTATE_PREBUILT_JARS=1 $(PY) -m pip install -q --disable-pip-version-check --no-build-isolation --no-deps -e .
	@touch $@

native: $(STAMPS)/install

# The executor jar and the tools jar (migrate, test hooks) of the dev venv's Spark line, built
# together; `jars`: every line's, each compiled with its own pyspark (scripts/spark_venv.sh, cached).
jar: $(JAR) $(TOOLS_JAR)
$(JAR) $(TOOLS_JAR) &: $(SCALA_SRC) $(CODEGEN_SRC) python/ttlstate/spark/lines.py scripts/build_shim.sh $(STAMPS)/deps
	scripts/build_shim.sh $(PY) $(JAR_DIR)

jars: $(ALL_JARS)
$(JAR_DIR)/ttlstate-shim-spark%.jar $(JAR_DIR)/ttlstate-tools-spark%.jar: $(SCALA_SRC) $(CODEGEN_SRC) \
    python/ttlstate/spark/lines.py scripts/build_shim.sh scripts/spark_venv.sh
	scripts/build_shim.sh "$$(scripts/spark_venv.sh $*)/bin/python" $(JAR_DIR)

run: setup
	$(PY) -m ttlstate.cli.main demo

# TEST_JOBS=2: two pytest processes, each running whole modules (--dist loadfile): one module's
# queries use the CPU while the other's wait on their JVM (on two cores the tests took 1112 s
# against 1257 s in one process; the tests are mostly CPU-bound); TEST_JOBS=0: one process.
TEST_JOBS ?= 2
test: setup test-scala lint
	$(PY) -m pytest -m "not long and not integration and not spark_versions and not cluster" --durations=60 \
	  -n $(TEST_JOBS) --dist loadfile tests

# The shim's Scala unit tests (ScalaTest, fetched with Maven from jvm-shim/test-deps/pom.xml on
# first use; the compiled tests are cached until a test source or the shim jar changes).
test-scala: $(JAR)
	scripts/scala_test.sh $(PY) $(JAR)

# Every Spark line but the dev venv's (which `make test` covers): its jars, its Scala unit tests,
# and the differential cases against that Spark's own RocksDB provider, each in its own cached
# venv; then a checkpoint from 3.5 to 4.3 (tests/spark_versions, scripts/spark_versions.sh).
test-spark-versions: setup
	scripts/spark_versions.sh

# Kafka in, Kafka out, checkpoints on HDFS (docs/deployment-hdfs-kafka.md): a real broker and a
# MiniDFSCluster in their own JVMs, fetched with Maven from integration/pom.xml on first use
# (scripts/integration_deps.sh, stamped). Its own pytest process: the Kafka connector must be on
# the driver JVM's classpath when the JVM starts, and `make test`'s JVM has no connector. Then the
# portable wheel, built and checked as installed (tests/packaging; first build: RocksDB from source).
test-integration: setup
	scripts/integration_deps.sh >/dev/null
	$(PY) -m pytest -m "integration and not long" --durations=15 tests/integration
	$(PY) -m pytest -m "wheel and not long" --durations=15 tests/packaging

# On a real cluster (docs/cluster.md): YARN (MiniDFSCluster + MiniYARNCluster, two NodeManagers,
# the physical-memory check on) in client and cluster deploy mode with a venv packed by venv-pack,
# a standalone master and two workers from pyspark's own distribution, and a Spark Connect server;
# Kafka in and out, checkpoints on HDFS, exact against Spark's RocksDB provider through a killed
# NodeManager, application master, executor and a decommissioned worker. Its components are
# fetched with Maven on first use (scripts/cluster_deps.sh, after scripts/integration_deps.sh).
test-cluster: setup
	scripts/cluster_deps.sh >/dev/null
	$(PY) -m pytest -m cluster -s --durations=0 tests/cluster  # -s: the scenarios print their measurements

# The long cases `make test` and `make test-integration` leave out (e.g. 100 versions of a
# churning workload; executors of local-cluster moving stores over HDFS).
test-long: setup
	$(PY) -m pytest -m "long and not integration and not spark_versions and not cluster" tests
	scripts/integration_deps.sh >/dev/null
	$(PY) -m pytest -m "long and integration" tests/integration tests/packaging

# BASELINE=<ref> also runs ttlstate as of that commit in the Spark benchmarks, in the same run
# (benchmarks/harness/baseline.py checks it out and builds it under ~/.cache/ttlstate-bench).
BASELINE ?=
BENCH_ARGS := $(if $(BASELINE),--baseline $(BASELINE))

bench: setup
	$(PY) -m benchmarks.harness.run_all $(BENCH_ARGS)

bench-quick: setup
	$(PY) -m benchmarks.harness.run_all --quick $(BENCH_ARGS)

# The portable wheel for executors (scripts/build_wheel.sh): py3-none-manylinux_2_28_x86_64, one
# wheel for every CPython 3 pyspark supports. Its native library has a C ABI (no Python ABI), is
# built with zig for glibc 2.28 with libc++ and RocksDB linked statically (RocksDB built from
# source once per machine, cached under ~/.cache/ttlstate-build), plus the shim jar. Its own
# build venv (.venv-build) with the build tools only: no test toolset.
WHEEL_DIR ?= dist
BUILD_VENV ?= .venv-build
BUILD_PY := $(BUILD_VENV)/bin/python
BUILD_PKGS := "setuptools>=68" wheel ziglang auditwheel pyelftools

$(STAMPS)/build-venv: constraints.txt
	@mkdir -p $(STAMPS)
	test -x $(BUILD_PY) || python3 -m venv $(BUILD_VENV)
	$(BUILD_PY) -m pip install -q --disable-pip-version-check -c constraints.txt $(BUILD_PKGS)
	@touch $@

# In phases, each with its estimate and its time (scripts/make_wheel.sh); LINES="3.5" (or "3.5 4.3")
# builds a wheel carrying those lines' jars only.
wheel: $(STAMPS)/system
	scripts/make_wheel.sh $(BUILD_PY) $(WHEEL_DIR) $(LINES)

# The release's artifacts (scripts/release.sh): the wheel of every line and the sdist (with every
# line's jar) into RELEASE_DIR, `twine check`ed, each installed into fresh venvs (every CPython
# 3.11+ found, every Spark line, the sdist built from source) with a streaming query run on it,
# and their SHA-256 sums. Uploads nothing.
RELEASE_DIR ?= dist
release: setup
	scripts/release.sh $(BUILD_PY) $(RELEASE_DIR)

# The docs site (mkdocs.yml, docs/) into site/; docs-gen rewrites its generated pages from the
# code (conf keys, metrics), which tests/unit/test_docs.py checks are up to date.
docs-gen: $(STAMPS)/deps
	PYTHONPATH=python $(PY) -m ttlstate.docs.generate docs

docs: docs-gen
	$(PY) -m mkdocs build --strict -d site

# ruff, and mypy on python/ (its settings: pyproject.toml's [tool.mypy]).
lint: $(STAMPS)/deps
	$(PY) -m ruff check python tests benchmarks integration build_support
	$(PY) -m mypy

clean:
	rm -rf $(STAMPS) build dist site python/ttlstate/_native*.so python/ttlstate/libttlstate_native.so \
	  $(JAR_DIR)/*.jar jvm-shim/target
