"""`make wheel` builds a wheel that carries its own RocksDB.

The wheel is built once for the module (`make wheel WHEEL_DIR=<tmp>`), installed with
`pip install --no-deps --no-index` into a fresh venv (no system site packages: not even pyspark
is importable there), and `wheel_probe.py` then runs in that venv: it opens a native DB with
the TTL compaction filter, writes, compacts, reopens and reads back. Checked: the wheel's files
(the extension, the vendored libraries, the shim jar), the extension's RPATH and `ldd`, the
libraries the running process has mapped, and, in a private mount namespace where the system's
librocksdb, gflags, snappy, lz4, zstd and bz2 are replaced by empty files, that the installed
wheel still works while the extension built against the system library (`make setup`'s) no
longer loads. That last test needs root and `unshare`; it skips, saying why, without them.
"""

from __future__ import annotations

import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.long

ROOT = Path(__file__).resolve().parents[2]
PROBE = Path(__file__).resolve().parent / "wheel_probe.py"
VENDORED = ("librocksdb", "libgflags", "libsnappy", "liblz4", "libzstd", "libbz2")
# What auditwheel must leave to the system (manylinux's base set).
SYSTEM = ("libc.so", "libm.so", "libstdc++.so", "libgcc_s.so", "libz.so", "libpthread.so")


@dataclass(frozen=True)
class Installed:
    wheel: Path
    python: Path  # the fresh venv's interpreter
    extension: Path  # ttlstate/_native*.so as installed from the wheel
    libs: Path  # site-packages/ttlstate.libs
    build_seconds: float


def clean_env() -> dict[str, str]:
    """The caller's environment without anything that could point the loader or Python at the
    repository or at system libraries."""
    drop = ("PYTHONPATH", "PYTHONHOME", "LD_LIBRARY_PATH", "LD_PRELOAD", "VIRTUAL_ENV")
    return {k: v for k, v in os.environ.items() if k not in drop}


def run(*args: str | Path, cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(a) for a in args], cwd=cwd, env=clean_env(), capture_output=True,
                          text=True, timeout=timeout)


def vendored_name(path: str) -> str | None:
    base = os.path.basename(path)
    return next((v for v in VENDORED if re.match(rf"{v}[-.]", base)), None)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    work = tmp_path_factory.mktemp("wheel")
    dist = work / "dist"
    start = time.monotonic()
    built = run("make", "-C", ROOT, "wheel", f"WHEEL_DIR={dist}", cwd=ROOT, timeout=1800)
    build_seconds = time.monotonic() - start
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    wheels = sorted(dist.glob("ttlstate-*.whl"))
    assert len(wheels) == 1, wheels

    venv = work / "venv"
    made = run(sys.executable, "-m", "venv", venv, cwd=work)
    assert made.returncode == 0, made.stderr
    python = venv / "bin" / "python"
    pip = run(python, "-m", "pip", "install", "-q", "--no-deps", "--no-index", wheels[0], cwd=work)
    assert pip.returncode == 0, pip.stderr
    site = Path(run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['platlib'])",
                    cwd=work).stdout.strip())
    extensions = sorted((site / "ttlstate").glob("_native*.so"))
    assert len(extensions) == 1, extensions
    print(f"\nmake wheel: {build_seconds:.0f} s, {wheels[0].name}, {wheels[0].stat().st_size} bytes")
    yield Installed(wheels[0], python, extensions[0], site / "ttlstate.libs", build_seconds)


def probe(python: Path, *prefix: str | Path, cwd: Path) -> dict[str, Any]:
    """Runs wheel_probe.py with `python` (behind `prefix`, e.g. unshare) on a new directory."""
    data = cwd / f"probe-{time.monotonic_ns()}"
    data.mkdir()
    done = run(*prefix, python, PROBE, data, cwd=cwd)
    assert done.returncode == 0, done.stdout + done.stderr
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def check_probe(result: dict[str, Any], inst: Installed) -> None:
    assert Path(result["native_file"]).resolve() == inst.extension.resolve(), result
    assert result["has_filter"] is True
    assert result["before_equal"] is True  # nothing expired yet: every entry byte for byte
    assert result["after_equal"] is True  # after the TTL: exactly the live entries
    assert result["reopen_equal"] is True  # and so after reopening the DB
    assert result["filter_removed"] == 200
    assert result["sst_bytes"] > 0
    # RocksDB found every compression library (its LOG says so); the DB itself uses LZ4.
    assert {"kLZ4Compression", "kSnappyCompression", "kZSTD", "kBZip2Compression"} <= set(
        result["compressions"])
    mapped: list[str] = result["mapped"]
    assert sorted({vendored_name(p) for p in mapped}) == sorted(VENDORED), mapped
    assert all(Path(p).resolve().parent == inst.libs.resolve() for p in mapped), mapped


def test_wheel_holds_the_extension_its_libraries_and_the_jar(installed: Installed) -> None:
    names = zipfile.ZipFile(installed.wheel).namelist()
    assert "ttlstate/jars/ttlstate-shim.jar" in names
    assert "ttlstate/jars/ttlstate-tools.jar" in names
    assert any(re.fullmatch(r"ttlstate/_native\.cpython-.*\.so", n) for n in names)
    libs = [n for n in names if n.startswith("ttlstate.libs/") and not n.endswith("/")]
    assert sorted({vendored_name(n) for n in libs}) == sorted(VENDORED), libs
    assert not [n for n in libs if any(s in n for s in SYSTEM)], libs
    # Debian 12 (glibc 2.36, GCC 12's libstdc++) allows manylinux_2_35; never above this glibc.
    tag = re.search(r"-(manylinux_(\d+)_(\d+)_x86_64)\.whl$", installed.wheel.name)
    assert tag, installed.wheel.name
    glibc = tuple(int(x) for x in platform.libc_ver()[1].split(".")[:2])
    assert (int(tag.group(2)), int(tag.group(3))) <= glibc
    assert f"cp{sys.version_info.major}{sys.version_info.minor}" in installed.wheel.name


def test_fresh_venv_has_nothing_but_the_wheel(installed: Installed) -> None:
    cfg = (installed.python.parent.parent / "pyvenv.cfg").read_text()
    assert "include-system-site-packages = false" in cfg
    for module in ("pyspark", "rocksdict", "pybind11"):
        done = run(installed.python, "-c", f"import {module}", cwd=installed.wheel.parent)
        assert done.returncode != 0, f"{module} importable in the fresh venv"


def test_extension_resolves_rocksdb_inside_the_wheel(installed: Installed) -> None:
    dynamic = run("readelf", "-d", installed.extension, cwd=installed.wheel.parent).stdout
    assert "[$ORIGIN/../ttlstate.libs]" in dynamic, dynamic
    ldd = run("ldd", installed.extension, cwd=installed.wheel.parent)
    assert ldd.returncode == 0 and "not found" not in ldd.stdout, ldd.stdout + ldd.stderr
    resolved = dict(re.findall(r"^\s*(\S+) => (\S+)", ldd.stdout, re.M))
    ours = {vendored_name(name): path for name, path in resolved.items() if vendored_name(name)}
    assert sorted(ours) == sorted(VENDORED), ldd.stdout
    for path in ours.values():
        assert Path(path).resolve().parent == installed.libs.resolve(), ldd.stdout
    assert "/usr/lib/x86_64-linux-gnu/librocksdb" not in ldd.stdout


def test_native_db_with_ttl_filter_runs_from_the_installed_wheel(installed: Installed,
                                                                 tmp_path: Path) -> None:
    check_probe(probe(installed.python, cwd=tmp_path), installed)


def system_copies() -> list[str]:
    """Real files of the system's libraries that the wheel vendors, as the loader's cache has them."""
    cache = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True, check=True).stdout
    paths = {os.path.realpath(p) for name, p in re.findall(r"^\s*(\S+) .*=> (\S+)$", cache, re.M)
             if vendored_name(name)}
    return sorted(p for p in paths if os.path.isfile(p))


def can_make_mount_namespaces() -> bool:
    """Root, and `unshare -m` permitted (not in every container)."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return False
    return subprocess.run(["unshare", "-m", "true"], capture_output=True).returncode == 0


@pytest.mark.skipif(not can_make_mount_namespaces(),
                    reason="hiding the system libraries needs root and `unshare -m` (a mount namespace)")
def test_works_with_the_system_libraries_hidden(installed: Installed, tmp_path: Path) -> None:
    """A private mount namespace where each system copy is an empty file: the loader cannot use
    them. Control: `make setup`'s extension, linked against the system librocksdb, fails there."""
    hidden = system_copies()
    assert {vendored_name(p) for p in hidden} == set(VENDORED), hidden
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    hide = tmp_path / "hide.sh"
    hide.write_text('set -eu\nempty=$1; shift\nwhile [ "$1" != -- ]; do mount --bind "$empty" "$1";'
                    ' [ ! -s "$1" ]; shift; done\nshift\nexec "$@"\n')
    in_namespace = ("unshare", "-m", "--propagation", "private", "sh", hide, empty, *hidden, "--")

    system_linked = sorted((ROOT / "python" / "ttlstate").glob("_native*.so"))
    assert system_linked, "make setup builds python/ttlstate/_native*.so (the control)"
    load = ("import importlib.util as u, sys; s = u.spec_from_file_location('ttlstate._native', "
            "sys.argv[1]); s.loader.exec_module(u.module_from_spec(s))")
    control = run(*in_namespace, installed.python, "-c", load, system_linked[0], cwd=tmp_path)
    assert control.returncode != 0 and "librocksdb.so.7.8" in control.stderr, control.stderr

    check_probe(probe(installed.python, *in_namespace, cwd=tmp_path), installed)
    for path in hidden:  # the namespace was private: the host's files are untouched
        assert os.path.getsize(path) > 0
