"""The store package's modules import each other without a circle: each part (store/*.py) can
be read, and tested, from the modules it imports down, and the data plane (store/planes/) never
reaches back into the control plane that uses it. The graph is read from the source with `ast`,
every import counted (those under TYPE_CHECKING and inside functions too), and importing a
module counts as importing the packages above it, whose `__init__` runs first."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PYTHON = Path(__file__).resolve().parents[2] / "python"
PACKAGE = "ttlstate.store"


def _modules(package: str) -> dict[str, Path]:
    root = PYTHON.joinpath(*package.split("."))
    out = {}
    for path in root.rglob("*.py"):
        parts = path.relative_to(PYTHON).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def _imported(path: Path, name: str) -> set[str]:
    """Every module name `path` (module `name`) imports, absolute, relative imports resolved."""
    is_package = path.name == "__init__.py"
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = name.split(".")[: len(name.split(".")) - node.level + (1 if is_package else 0)]
                base = ".".join(anchor + ([base] if base else []))
            out.add(base)
            out.update(f"{base}.{a.name}" for a in node.names)  # `from package import module`
    return out


def import_graph(package: str) -> dict[str, set[str]]:
    """module -> the package's modules it imports (the packages above them included)."""
    modules = _modules(package)
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        deps: set[str] = set()
        for target in _imported(path, name):
            parts = target.split(".")
            deps.update(".".join(parts[:i]) for i in range(1, len(parts) + 1))
        graph[name] = {d for d in deps if d in modules and d != name}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle of `graph` (its modules in order, the first repeated last), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for dep in sorted(graph[node]):
            if state.get(dep) == 1:
                return path[path.index(dep):] + [dep]
            if dep not in state and (found := visit(dep)) is not None:
                return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)) is not None:
            return found
    return None


def test_the_store_package_has_no_import_circle() -> None:
    graph = import_graph(PACKAGE)
    assert f"{PACKAGE}.provider" in graph and f"{PACKAGE}.planes.base" in graph  # read the package
    assert f"{PACKAGE}.local_db" in graph[f"{PACKAGE}.provider"]
    cycle = find_cycle(graph)
    assert cycle is None, "import circle: " + " -> ".join(cycle or [])


def test_the_data_plane_imports_nothing_of_the_control_plane() -> None:
    """Both may read the key layout of column families (constants and pure functions that
    import nothing), which the data plane counts keys by."""
    graph = import_graph(PACKAGE)
    shared = {PACKAGE, f"{PACKAGE}.column_families"}
    assert not graph[f"{PACKAGE}.column_families"]
    for name, deps in graph.items():
        if name.startswith(f"{PACKAGE}.planes"):
            outside = {d for d in deps if not d.startswith(f"{PACKAGE}.planes") and d not in shared}
            assert not outside, f"{name} imports {sorted(outside)}"


def test_the_store_package_imports_nothing_of_the_server() -> None:
    for name, path in _modules(PACKAGE).items():
        server = {m for m in _imported(path, name) if m.startswith("ttlstate.server")}
        assert not server, f"{name} imports {sorted(server)}"


@pytest.mark.parametrize(("graph", "cycle"), [
    ({"a": {"b"}, "b": {"c"}, "c": {"a"}}, ["a", "b", "c", "a"]),
    ({"a": {"b"}, "b": {"c"}, "c": set()}, None),
    ({"a": {"a.x"}, "a.x": {"a"}}, ["a", "a.x", "a"]),
])
def test_the_cycle_finder_finds_a_circle_where_there_is_one(graph: dict[str, set[str]],
                                                            cycle: list[str] | None) -> None:
    assert find_cycle(graph) == cycle


def test_a_circle_through_a_package_init_counts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Importing `p.m` runs `p/__init__.py` first: an `__init__` that imports a module which
    imports a sibling forms a circle."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("from pkg.a import f\n")
    (pkg / "a.py").write_text("from pkg.b import g\n")
    (pkg / "b.py").write_text("from .a import f\n")
    monkeypatch.setattr(f"{__name__}.PYTHON", tmp_path)
    assert find_cycle(import_graph("pkg")) is not None
