"""The executor jar holds the shim only: the migration tool and the command-line test hooks are
in the tools jar, which executors load only when `ttlstate migrate` adds it."""

from __future__ import annotations

import zipfile

from ttlstate.spark.configure import jar_path, tools_jar_path


def _classes(path: str) -> set[str]:
    with zipfile.ZipFile(path) as z:
        return {n for n in z.namelist() if n.endswith(".class")}


def test_the_executor_jar_has_no_tools() -> None:
    shim = _classes(jar_path())
    assert "ttlstate/spark/TtlStateStoreProvider.class" in shim
    assert not {n for n in shim if n.startswith("ttlstate/tools/")}


def test_the_tools_jar_has_the_migration_and_the_hooks_and_no_shim_class() -> None:
    tools = _classes(tools_jar_path())
    for name in ("Migration", "Constants", "ExpiryCases", "KeyHashes", "OperatorNamesJson", "ConfValueCases",
                 "ServerPythonChoice", "DriverPythonChoice"):
        assert f"ttlstate/tools/{name}.class" in tools
    assert tools.isdisjoint(_classes(jar_path()))
