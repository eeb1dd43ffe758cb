"""The project's import graph from the source, for the tests that hold the architecture to it.

Every import statement counts, wherever it stands: at module level, inside a function, under
``if TYPE_CHECKING:``. Importing ``a.b.c`` is an edge to ``a.b.c`` only (not to the packages ``a`` and
``a.b`` that Python runs first, whose ``__init__`` must then not import back: that would be an edge of
its own), and ``from a.b import c`` is an edge to ``a.b.c`` when that is a module, else to ``a.b``.
Only modules of the project are nodes.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# import name -> the directory of that package
PACKAGES = {
    "static_consumer": ROOT / "static_consumer",
    "assignors": ROOT / "assignors",
    "static_consumer_lab": ROOT / "lab" / "static_consumer_lab",
}

Graph = dict[str, set[str]]


def modules(packages: Mapping[str, Path] = PACKAGES) -> dict[str, Path]:
    """Dotted module name -> its file, for every module of ``packages``. A compiled module counts by its
    type stub (``.pyi``): what it imports at run time is not in Python source."""
    found: dict[str, Path] = {}
    for name, directory in packages.items():
        for path in sorted([*directory.rglob("*.py"), *directory.rglob("*.pyi")]):
            if "__pycache__" in path.parts:
                continue
            parts = [name, *path.relative_to(directory).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            found.setdefault(".".join(parts), path)  # a stub next to its module: the module
    return found


def _imported(node: ast.Import | ast.ImportFrom, module: str, is_package: bool) -> Iterable[str]:
    """The names an import statement imports, as dotted paths (``from a import b``: ``a.b``)."""
    if isinstance(node, ast.Import):
        yield from (alias.name for alias in node.names)
        return
    base = node.module or ""
    if node.level:  # relative: from the package the module is in (or is)
        anchor = module.split(".") if is_package else module.split(".")[:-1]
        anchor = anchor[: len(anchor) - (node.level - 1)]
        base = ".".join([*anchor, base] if base else anchor)
    yield from (f"{base}.{alias.name}" for alias in node.names)


def graph(packages: Mapping[str, Path] = PACKAGES) -> Graph:
    """Module -> the project modules it imports."""
    files = modules(packages)
    edges: Graph = {name: set() for name in files}
    for name, path in files.items():
        is_package = path.name.startswith("__init__.")
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.Import | ast.ImportFrom):
                continue
            for target in _imported(node, name, is_package):
                # The most specific module of the project the name is in ("from a import b": a.b when
                # it is a module, else a).
                while target and target not in files:
                    target = target.rpartition(".")[0]
                if target and target != name:
                    edges[name].add(target)
    return edges


def circles(edges: Graph) -> list[list[str]]:
    """One circle (a -> ... -> a) per strongly connected group of modules that import each other."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[set[str]] = []

    def visit(node: str) -> None:  # Tarjan's algorithm
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(edges.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.add(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(group)

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return [_cycle_in(group, edges) for group in groups]


def _cycle_in(group: set[str], edges: Graph) -> list[str]:
    """A path through ``group`` that comes back to where it began (breadth-first: a shortest one)."""
    start = min(group)
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for target in sorted(edges[node] & group):
                if target == start:
                    return [*paths[node], start]
                if target not in paths:
                    paths[target] = [*paths[node], target]
                    following.append(target)
        frontier = following
    raise AssertionError(f"no circle through {start}")  # a strongly connected group always has one
