"""The native transaction's key index (native/include/ttlstate/pending_index.h) against a
model, with hashes that collide on purpose: the store tests' keys are too few to grow it far
or to make two keys share a hash."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_pending_index_matches_a_map_model(tmp_path: Path) -> None:
    compiler = shutil.which("c++") or shutil.which("g++")
    if compiler is None:
        pytest.fail("no C++ compiler on PATH: the native library needs one to build")
    binary = tmp_path / "pending_index_check"
    subprocess.run([compiler, "-std=c++17", "-O1", "-Wall", "-Wextra", "-Werror",
                    "-I", str(ROOT / "native/include"), str(ROOT / "native/tests/pending_index_check.cpp"),
                    "-o", str(binary)], check=True)
    result = subprocess.run([str(binary)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "ok" in result.stdout
