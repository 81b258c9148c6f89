"""Builds the native engine `ttlstate/libttlstate_native.so` (C++17, RocksDB + TTL filter).

The library has a plain C ABI (native/include/ttlstate/c_api.h) that `ttlstate._native` binds
with ctypes, so it does not depend on the Python version. This build (`make setup`, editable
installs) links the system's librocksdb; the portable wheel's library is built by
scripts/build_wheel.sh and handed over in TTLSTATE_PREBUILT_LIB, which is then packaged as is
under a py3-none-<platform> tag.

Set TTLSTATE_NO_NATIVE=1 to build a pure-Python package (engine=rocksdict only).
"""

import glob
import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

LIBRARY = "libttlstate_native.so"
PREBUILT = os.environ.get("TTLSTATE_PREBUILT_LIB", "")
PLATFORM_TAG = os.environ.get("TTLSTATE_PLATFORM_TAG", "")


class BuildNativeLibrary(build_ext):
    """Builds the C-ABI library (not a CPython extension: no PyInit, no Python ABI in its name),
    compiling its sources on every core, or copies TTLSTATE_PREBUILT_LIB."""

    def get_ext_filename(self, fullname: str) -> str:
        return os.path.join(*fullname.split(".")[:-1], LIBRARY)

    def get_export_symbols(self, ext: Extension) -> list[str]:
        return []

    def build_extension(self, ext: Extension) -> None:
        target = self.get_ext_fullpath(ext.name)
        if PREBUILT:
            os.makedirs(os.path.dirname(target), exist_ok=True)
            shutil.copyfile(PREBUILT, target)
            return
        compile_one = self.compiler.compile

        def parallel(sources, *args, **kwargs):  # type: ignore[no-untyped-def]
            with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
                parts = pool.map(lambda s: compile_one([s], *args, **kwargs), sources)
                return [obj for objs in parts for obj in objs]

        self.compiler.compile = parallel
        try:
            super().build_extension(ext)
        finally:
            self.compiler.compile = compile_one


# Headers ttlstate.codegen generates from the Python definitions (protocol constants, TtlValue layout).
GENERATED_INCLUDE = os.path.join("build", "generated", "include")

ext_modules = []
sources = sorted(glob.glob("native/src/*.cpp"))
if os.environ.get("TTLSTATE_NO_NATIVE") != "1" and (sources or PREBUILT):
    subprocess.check_call([sys.executable, "-m", "ttlstate.codegen", "cpp", GENERATED_INCLUDE],
                          env={**os.environ, "PYTHONPATH": "python"}, stdout=subprocess.DEVNULL)
    ext_modules = [
        Extension(
            "ttlstate.libttlstate_native",
            sources,
            include_dirs=["native/include", GENERATED_INCLUDE],
            language="c++",
            # Warnings are errors (RocksDB's headers are the system's: their warnings are not
            # ours); scripts/build_wheel.sh compiles with the same flags.
            extra_compile_args=["-std=c++17", "-Wall", "-Wextra", "-Werror", "-O2", "-fvisibility=hidden"],
            libraries=["rocksdb", "zstd", "z"],  # zstd and zlib: the record files' codec
        )
    ]

cmdclass: dict = {"build_ext": BuildNativeLibrary}
if PLATFORM_TAG:
    from setuptools.command.bdist_wheel import bdist_wheel

    class PortableWheel(bdist_wheel):
        """One wheel for every CPython 3: the library has no Python ABI, only a platform."""

        def get_tag(self) -> tuple[str, str, str]:
            return "py3", "none", PLATFORM_TAG

    cmdclass["bdist_wheel"] = PortableWheel

setup(ext_modules=ext_modules, cmdclass=cmdclass)
