"""`make wheel` builds one portable wheel: py3-none-manylinux_2_28_x86_64.

The wheel is built once for the session (conftest.py: `make wheel WHEEL_DIR=<tmp>`; the static
RocksDB it links is built once per machine and cached, see scripts/build_static_deps.sh).
Checked: its tags and metadata; that every ELF file in it needs no glibc symbol newer than 2.28,
no libstdc++ symbol at all (libc++ is linked statically) and no library outside manylinux's base
set, which `auditwheel show` confirms; then, installed with `pip install --no-deps --no-index`
into a fresh venv (not even pyspark importable there), `wheel_probe.py` opens a native DB with the
TTL compaction filter, writes, compacts, reopens and reads back, with no RocksDB-family shared
library mapped. test_wheel_pythons.py installs it as a user would, on each CPython found.
Marked `integration` and `wheel`: run by `make test-integration` (a cold build of RocksDB takes long).
"""

from __future__ import annotations

import json
import re
import sys
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.packaging.support import ROOT, Built, run
from ttlstate.spark.lines import LINES

pytestmark = [pytest.mark.integration, pytest.mark.wheel]  # not in `make test`

PROBE = Path(__file__).resolve().parent / "wheel_probe.py"
TAG = "py3-none-manylinux_2_28_x86_64"
MAX_GLIBC = (2, 28)
LIBRARY = "ttlstate/libttlstate_native.so"
# manylinux's base set: what the wheel may leave to the system.
BASE_LIBS = {"libc.so.6", "libm.so.6", "libpthread.so.0", "libdl.so.2", "librt.so.1", "ld-linux-x86-64.so.2"}


@pytest.fixture(scope="module")
def elf_files(built: Built, tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Every ELF file of the wheel, extracted."""
    out = tmp_path_factory.mktemp("unpacked")
    with zipfile.ZipFile(built.wheel) as z:
        z.extractall(out)
    return sorted(p for p in out.rglob("*") if p.is_file() and p.read_bytes()[:4] == b"\x7fELF")


def symbol_versions(path: Path) -> set[str]:
    """The symbol versions an ELF file needs (its dynamic symbols' version references)."""
    dump = run("objdump", "-T", path, cwd=path.parent)
    assert dump.returncode == 0, dump.stderr
    return set(re.findall(r"\b((?:GLIBC|GLIBCXX|CXXABI|GCC)_[0-9A-Z_.]+)\b", dump.stdout))


def needed(path: Path) -> set[str]:
    dump = run("objdump", "-p", path, cwd=path.parent)
    assert dump.returncode == 0, dump.stderr
    return set(re.findall(r"^\s*NEEDED\s+(\S+)$", dump.stdout, re.M))


def test_wheel_is_tagged_for_every_python_3_and_manylinux_2_28(built: Built) -> None:
    assert built.wheel.name == f"ttlstate-0.1.0-{TAG}.whl"
    with zipfile.ZipFile(built.wheel) as z:
        names = z.namelist()
        info = next(n for n in names if n.endswith(".dist-info/WHEEL"))
        wheel_meta = z.read(info).decode()
        metadata = z.read(info.replace("/WHEEL", "/METADATA")).decode()
    assert f"Tag: {TAG}" in wheel_meta.splitlines()
    assert "Root-Is-Purelib: false" in wheel_meta
    assert LIBRARY in names
    for line in LINES.values():  # one shim and one tools jar per Spark line
        assert f"ttlstate/jars/{line.jar}" in names
        assert f"ttlstate/jars/{line.tools_jar}" in names
    assert not [n for n in names if re.search(r"cpython-\d+|\.abi3\.so$", n)], names
    assert "Requires-Python: >=3.11" in metadata
    assert "License-Expression: Apache-2.0" in metadata
    for minor in (11, 12, 13, 14):
        assert f"Classifier: Programming Language :: Python :: 3.{minor}" in metadata


def test_make_wheel_of_the_lines_asked_for_shows_its_phases(built: Built, tmp_path: Path) -> None:
    """`make wheel LINES=3.5`: that line's jars only, each phase announced with its estimate and
    timed (after the session's build everything is cached: the library is relinked, seconds)."""
    done = run("make", "-C", ROOT, "wheel", "LINES=3.5", f"WHEEL_DIR={tmp_path}", cwd=ROOT, timeout=3600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (wheel,) = tmp_path.glob("ttlstate-*.whl")
    with zipfile.ZipFile(wheel) as z:
        jars = sorted(n for n in z.namelist() if n.endswith(".jar"))
    assert jars == [f"ttlstate/jars/{LINES['3.5'].jar}", f"ttlstate/jars/{LINES['3.5'].tools_jar}"]
    said = done.stderr
    estimate = r"make wheel: Spark lines 3\.5; about \d+ min more on 2 idle cores"
    assert re.search(estimate, said), said[-3000:]
    for phase in range(1, 6):
        assert re.search(rf"make wheel \[{phase}/5\] .*: (cached|cold|\d+ to|about)", said), said[-3000:]
        assert re.search(rf"make wheel \[{phase}/5\] done in \d+ min \d+ s", said), said[-3000:]


def test_no_symbol_newer_than_glibc_2_28_and_no_libstdcxx(elf_files: list[Path]) -> None:
    assert [p.name for p in elf_files] == ["libttlstate_native.so"]
    for path in elf_files:
        versions = symbol_versions(path)
        glibc = [tuple(int(x) for x in v.removeprefix("GLIBC_").split(".")) for v in versions
                 if re.fullmatch(r"GLIBC_[0-9.]+", v)]
        assert glibc, f"{path.name}: no GLIBC_ version found in objdump -T"
        assert max(glibc) <= MAX_GLIBC, (path.name, sorted(versions))
        assert not [v for v in versions if v.startswith(("GLIBCXX_", "CXXABI_"))], sorted(versions)
        assert needed(path) <= BASE_LIBS, needed(path)


def test_auditwheel_agrees(built: Built) -> None:
    build_py = ROOT / ".venv-build" / "bin" / "python"
    shown = run(build_py, "-m", "auditwheel", "show", built.wheel, cwd=built.wheel.parent)
    assert shown.returncode == 0, shown.stdout + shown.stderr
    text = " ".join(shown.stdout.split())
    # auditwheel names the most compatible tag the binary allows (manylinux_2_24 here: the library
    # needs no symbol above GLIBC_2.18); the wheel's manylinux_2_28 tag must not be more compatible.
    tag = re.search(r'consistent with the following platform tag: "manylinux_(\d+)_(\d+)_x86_64"', text)
    assert tag, shown.stdout
    assert (int(tag[1]), int(tag[2])) <= MAX_GLIBC, shown.stdout


@pytest.fixture(scope="module")
def installed(built: Built, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A fresh venv of this interpreter with only the wheel installed; its python."""
    work = tmp_path_factory.mktemp("venv")
    venv = work / "venv"
    made = run(sys.executable, "-m", "venv", venv, cwd=work)
    assert made.returncode == 0, made.stderr
    python = venv / "bin" / "python"
    pip = run(python, "-m", "pip", "install", "-q", "--no-deps", "--no-index", built.wheel, cwd=work)
    assert pip.returncode == 0, pip.stderr
    yield python


def test_fresh_venv_has_nothing_but_the_wheel(installed: Path) -> None:
    cfg = (installed.parent.parent / "pyvenv.cfg").read_text()
    assert "include-system-site-packages = false" in cfg
    for module in ("pyspark", "rocksdict", "pybind11"):
        done = run(installed, "-c", f"import {module}", cwd=installed.parent)
        assert done.returncode != 0, f"{module} importable in the fresh venv"


def probe(python: Path, cwd: Path) -> dict[str, Any]:
    data = cwd / f"probe-{time.monotonic_ns()}"
    data.mkdir()
    done = run(python, PROBE, data, cwd=cwd)
    assert done.returncode == 0, done.stdout + done.stderr
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_native_db_with_ttl_filter_runs_from_the_installed_wheel(installed: Path, tmp_path: Path) -> None:
    result = probe(installed, tmp_path)
    site = Path(run(installed, "-c", "import sysconfig; print(sysconfig.get_paths()['platlib'])",
                    cwd=tmp_path).stdout.strip())
    assert Path(result["native_file"]).resolve() == (site / LIBRARY).resolve(), result
    assert result["has_filter"] is True
    assert result["before_equal"] is True  # nothing expired yet: every entry byte for byte
    assert result["after_equal"] is True  # after the TTL: exactly the live entries
    assert result["reopen_equal"] is True  # and so after reopening the DB
    assert result["filter_removed"] == 200
    assert result["sst_bytes"] > 0
    assert "kLZ4Compression" in result["compressions"]  # the DB's compression, linked in
    assert result["mapped"] == [], result["mapped"]  # no shared RocksDB, lz4, zstd, ... from anywhere
