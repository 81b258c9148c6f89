"""Builds the native engine `ttlstate/libttlstate_native.so` (C++17, RocksDB + TTL filter).

The library has a plain C ABI (native/include/ttlstate/c_api.h) that `ttlstate._native` binds
with ctypes, so it does not depend on the Python version. This build (`make setup`, editable
installs) links the system's librocksdb; the portable wheel's library is built by
scripts/build_wheel.sh and handed over in TTLSTATE_PREBUILT_LIB, which is then packaged as is
under a py3-none-<platform> tag.

Set TTLSTATE_NO_NATIVE=1 to build a pure-Python package (engine=rocksdict only).

The shim jar: a source build compiles the one of the Spark it is installed beside (the
environment's pyspark, or SPARK_HOME's; build_support/shim_jars.py says why and how), unless the
tree holds every line's jars already (`make jars`, an sdist of `make release`). A build that
cannot make the library or the jar fails here, saying what it needs.
"""

import glob
import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py
from setuptools.errors import SetupError

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from build_support.shim_jars import JAR_DIR, ShimBuildError, ensure_jars  # noqa: E402 - the tree's own module

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


def check_native_build_deps() -> None:
    """Fails at once, saying what is missing, where the library cannot compile (before minutes of
    compiling the shim jar): RocksDB's, zstd's and zlib's headers and a C++17 compiler, the
    system's in a source build."""
    import tempfile

    from setuptools._distutils.ccompiler import new_compiler
    from setuptools._distutils.sysconfig import customize_compiler

    compiler = new_compiler()
    customize_compiler(compiler)
    with tempfile.TemporaryDirectory() as tmp:
        probe = os.path.join(tmp, "probe.cpp")
        with open(probe, "w") as f:
            f.write("#include <rocksdb/db.h>\n#include <zstd.h>\n#include <zlib.h>\n"
                    "int main() { return 0; }\n")
        try:
            compiler.compile([probe], output_dir=tmp, extra_postargs=["-std=c++17"])
        except Exception as e:  # noqa: BLE001 - distutils' CompileError, whose class differs between setuptools
            # releases (setuptools.errors' is not the one newer compilers raise), or OSError
            raise SetupError(
                "ttlstate: the native engine compiles against the system's RocksDB, zstd and zlib, and their "
                f"headers or a C++17 compiler are missing here ({e}). Install them (Debian/Ubuntu: apt-get "
                "install g++ librocksdb-dev libzstd-dev zlib1g-dev; Fedora/RHEL: dnf install gcc-c++ "
                "rocksdb-devel libzstd-devel zlib-devel), or build the portable package without the native "
                "engine: TTLSTATE_NO_NATIVE=1 pip install ... (engine=rocksdict: no compaction filter), or "
                "install a wheel built with `make wheel`.") from None


class BuildWithShimJar(build_py):
    """Packages the shim jar of the Spark this build is for, compiling it first if needed."""

    def run(self) -> None:
        if self.distribution.ext_modules and not PREBUILT:
            check_native_build_deps()
        try:
            ensure_jars(lambda text: print(text, file=sys.stderr, flush=True))
        except ShimBuildError as e:
            raise SetupError(str(e)) from None
        wanted = os.environ.get("TTLSTATE_JAR_LINES", "").split()  # `make wheel LINES=...`: those only
        if wanted:
            other = [j.name for j in JAR_DIR.glob("ttlstate-*-spark*.jar")
                     if j.stem.rsplit("-spark", 1)[1] not in wanted]
            # `ttlstate.jars` is a package of its own (a namespace package: setuptools' discovery)
            self.exclude_package_data = {"ttlstate": [f"jars/{n}" for n in other], "ttlstate.jars": other}
            self.__dict__.pop("data_files", None)  # computed on first use: with the exclusion
        super().run()


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

cmdclass: dict = {"build_ext": BuildNativeLibrary, "build_py": BuildWithShimJar}
if PLATFORM_TAG:
    from setuptools.command.bdist_wheel import bdist_wheel

    class PortableWheel(bdist_wheel):
        """One wheel for every CPython 3: the library has no Python ABI, only a platform."""

        def get_tag(self) -> tuple[str, str, str]:
            return "py3", "none", PLATFORM_TAG

    cmdclass["bdist_wheel"] = PortableWheel

setup(ext_modules=ext_modules, cmdclass=cmdclass)
