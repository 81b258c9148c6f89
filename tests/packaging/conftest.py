"""The portable wheel, built once per session (`make wheel WHEEL_DIR=<tmp>`) for every module of
tests/packaging: test_wheel.py (tags, symbols, a probe with no dependencies) and
test_wheel_pythons.py (installed as a user would, on each CPython found)."""

from __future__ import annotations

import time

import pytest

from tests.packaging.support import ROOT, Built, run


@pytest.fixture(scope="session")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    dist = tmp_path_factory.mktemp("wheel") / "dist"
    start = time.monotonic()
    done = run("make", "-C", ROOT, "wheel", f"WHEEL_DIR={dist}", cwd=ROOT, timeout=4 * 3600)
    build_seconds = time.monotonic() - start
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    wheels = sorted(dist.glob("ttlstate-*.whl"))
    assert len(wheels) == 1, wheels
    print(f"\nmake wheel: {build_seconds:.0f} s, {wheels[0].name}, {wheels[0].stat().st_size} bytes")
    return Built(wheels[0], build_seconds)
