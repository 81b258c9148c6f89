"""Every module of the package imports: the state server's modules run in their own
processes, where a broken import shows only as a server that does not start."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import ttlstate

# libttlstate_native.so is the native library ctypes loads (ttlstate._native), not a Python module.
MODULES = sorted(m.name for m in pkgutil.walk_packages(ttlstate.__path__, "ttlstate.")
                 if m.name != "ttlstate.libttlstate_native")


@pytest.mark.parametrize("name", MODULES)
def test_module_imports(name: str) -> None:
    importlib.import_module(name)
