"""The linters check the Python the package supports: ruff's target version and mypy's Python
version follow `requires-python` (a newer target would let syntax pass that the oldest
supported interpreter cannot run; an older one would flag code it can)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

PYPROJECT = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())


def test_ruff_and_mypy_target_the_oldest_python_the_package_supports() -> None:
    floor = re.fullmatch(r">=\s*3\.(\d+)", PYPROJECT["project"]["requires-python"])
    assert floor is not None, "requires-python is not a plain floor: update this test"
    minor = floor.group(1)
    assert PYPROJECT["tool"]["ruff"]["target-version"] == f"py3{minor}"
    assert PYPROJECT["tool"]["mypy"]["python_version"] == f"3.{minor}"
