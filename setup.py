"""Builds the native extension `ttlstate._native` (C++17, pybind11, RocksDB + TTL filter).

Set TTLSTATE_NO_NATIVE=1 to build a pure-Python package (engine=rocksdict only).
"""

import glob
import os
import subprocess
import sys

from setuptools import setup

# Headers ttlstate.codegen generates from the Python definitions (protocol constants, TtlValue layout).
GENERATED_INCLUDE = os.path.join("build", "generated", "include")

ext_modules = []
sources = sorted(glob.glob("native/src/*.cpp"))
if os.environ.get("TTLSTATE_NO_NATIVE") != "1" and sources:
    from pybind11.setup_helpers import ParallelCompile, Pybind11Extension

    ParallelCompile("TTLSTATE_BUILD_JOBS", default=0).install()  # one compiler per core
    subprocess.check_call([sys.executable, "-m", "ttlstate.codegen", "cpp", GENERATED_INCLUDE],
                          env={**os.environ, "PYTHONPATH": "python"}, stdout=subprocess.DEVNULL)

    ext_modules = [
        Pybind11Extension(
            "ttlstate._native",
            sources,
            include_dirs=["native/include", GENERATED_INCLUDE],
            cxx_std=17,
            extra_compile_args=["-Wall", "-Wextra", "-O2"],
            libraries=["rocksdb", "zstd", "z"],  # zstd and zlib: the record files' codec
        )
    ]

setup(ext_modules=ext_modules)
