"""The import graph: no two modules import each other (directly or round a loop), and no import runs
up a layer. Every import counts, also one inside a function or under ``TYPE_CHECKING``: a loop that
only closes at run time is still a loop a reader has to untangle."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("engine", "teaching", "viz", "ui", "bench", "app_pages", "prefixlab")
#: Bottom to top: a module may import its own layer and the ones before it, never one after it.
LAYERS = ("engine core", "engine.model", "engine.llm_engine", "engine.runtime", "engine.server",
          "teaching", "viz", "ui", "bench", "pages", "prefixlab")


def layer_of(module: str) -> str:
    """The layer a module belongs to (``engine`` itself, the package's front door, sits with llm_engine)."""
    top = module.split(".")[0]
    if top in ("app", "app_pages"):
        return "pages"
    if top != "engine":
        return top
    for part in ("engine.model", "engine.runtime", "engine.server", "engine.llm_engine"):
        if module == part or module.startswith(part + "."):
            return part
    return "engine.llm_engine" if module == "engine" else "engine core"


def project_modules(root: Path = ROOT) -> dict[str, Path]:
    """Every module of the project's layers by dotted name (a package by its ``__init__``)."""
    modules = {"app": root / "app.py"}
    for package in PACKAGES:
        for path in (root / package).rglob("*.py"):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            modules[".".join(parts)] = path
    return modules


def import_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    """Module -> the project modules it imports (``from a.b import c`` is ``a.b.c`` when c is a module)."""

    def resolve(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        targets: set[str | None] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets.update(resolve(alias.name) for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets.update(resolve(f"{node.module}.{alias.name}") for alias in node.names)
        graph[module] = {target for target in targets if target and target != module}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def upward_edges(graph: dict[str, set[str]]) -> list[str]:
    rank = {name: position for position, name in enumerate(LAYERS)}
    return [f"{source} ({layer_of(source)}) imports {target} ({layer_of(target)})"
            for source, targets in sorted(graph.items()) for target in sorted(targets)
            if rank[layer_of(target)] > rank[layer_of(source)]]


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    return import_graph(project_modules())


def test_every_module_has_a_layer(graph):
    assert {layer_of(module) for module in graph} <= set(LAYERS)


def test_no_import_cycle(graph):
    assert cycles(graph) == []


def test_no_import_runs_up_a_layer(graph):
    assert upward_edges(graph) == []


def test_the_checks_catch_a_planted_loop_and_an_upward_edge(tmp_path):
    (tmp_path / "engine").mkdir()
    (tmp_path / "teaching").mkdir()
    (tmp_path / "engine" / "__init__.py").write_text("")
    (tmp_path / "engine" / "a.py").write_text("def f():\n    from engine.b import g\n")
    (tmp_path / "engine" / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import engine.a\n")
    (tmp_path / "engine" / "c.py").write_text("from teaching import lessons\n")
    (tmp_path / "teaching" / "__init__.py").write_text("")
    (tmp_path / "teaching" / "lessons.py").write_text("import engine.a\n")
    (tmp_path / "app.py").write_text("")
    modules = {name: path for name, path in project_modules(tmp_path).items() if path.exists()}
    planted = import_graph(modules)
    assert cycles(planted) == [["engine.a", "engine.b"]]
    assert upward_edges(planted) == ["engine.c (engine core) imports teaching.lessons (teaching)"]
