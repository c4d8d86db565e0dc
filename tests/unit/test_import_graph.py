"""The package's import graph has no cycles, and library modules never import ``mechrag`` itself.

Every module under ``mechrag/`` is parsed with :mod:`ast` (nothing is imported, so a broken
cycle cannot hide the report). Every ``import`` statement counts, also those inside functions:
a lazy import that closes a cycle still runs against a half-initialised module. Imports under
``if TYPE_CHECKING:`` are left out of the cycle check, since they never run; the top-level rule
applies to them too.

Edges: ``import a.b.c`` and ``from a.b import c`` (``c`` a submodule) point at ``a.b.c`` only.
Importing it also runs ``a/__init__.py`` and ``a/b/__init__.py``, but that is how Python works
and not a cycle by itself; ``from a.b import name`` (``name`` defined in ``a/b/__init__.py``)
points at the package ``a.b``. So ``mechrag/__init__.py`` importing ``mechrag.sweep`` while
``mechrag/sweep/methods.py`` imports ``mechrag`` is a cycle.

Command-line rule: no library module imports the ``cli`` package (the command line sits on the
library, never under it).

Top-level rule: a library module imports what it needs from the defining submodule
(``from mechrag.case import Case``), never ``import mechrag`` or ``from mechrag import Case``;
``from mechrag.models import adapter`` (a submodule) is fine. Command-line modules (the
``mechrag.cli`` package, the ``__main__`` modules and deprecated ``cli`` shims) are the
package's users and are excepted.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections import deque
from dataclasses import dataclass
from pathlib import Path

from helpers import REPO

PACKAGE_ROOT = REPO / "mechrag"


@dataclass(frozen=True)
class Import:
    """One resolved import: the module it names, its line, and whether it runs at all."""

    target: str
    line: int
    type_checking_only: bool


def module_names(root: Path) -> dict[str, Path]:
    """Dotted name of every module in the package at ``root`` (a package by its own name)."""
    names = {}
    for path in sorted(root.rglob("*.py")):
        parts = [root.name, *path.relative_to(root).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        names[".".join(parts)] = path
    return names


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _import_nodes(tree: ast.Module):
    """``(node, type_checking_only)`` for every import statement anywhere in ``tree``."""
    stack = [(tree, False)]
    while stack:
        node, guarded = stack.pop()
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node, guarded
        for field, value in ast.iter_fields(node):
            children = value if isinstance(value, list) else [value]
            # Only the body of ``if TYPE_CHECKING:`` is guarded; its ``else`` runs.
            inside = guarded or (
                isinstance(node, ast.If) and field == "body" and _is_type_checking(node.test)
            )
            stack.extend((child, inside) for child in children if isinstance(child, ast.AST))


def _known(name: str, modules: dict[str, Path]) -> str:
    """``name`` itself if it is a module, else its longest prefix that is one."""
    while name not in modules and "." in name:
        name = name.rsplit(".", 1)[0]
    return name


def resolve_imports(name: str, modules: dict[str, Path]) -> list[Import]:
    """The imports of module ``name`` that point inside the package, resolved to modules."""
    path = modules[name]
    top = name.split(".")[0]
    is_package = path.name == "__init__.py"
    package_parts = name.split(".") if is_package else name.split(".")[:-1]
    imports = []
    for node, guarded in _import_nodes(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        else:
            if node.level:
                base_parts = package_parts[: len(package_parts) - node.level + 1]
                base = ".".join([*base_parts, *([node.module] if node.module else [])])
            else:
                base = node.module
            targets = [
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                for alias in node.names
            ]
        for target in dict.fromkeys(targets):
            if target == top or target.startswith(top + "."):
                imports.append(Import(_known(target, modules), node.lineno, guarded))
    return sorted(imports, key=lambda found: found.line)


def import_graph(root: Path) -> dict[str, dict[str, int]]:
    """``module -> {imported module: first line}``, runtime imports only."""
    modules = module_names(root)
    graph: dict[str, dict[str, int]] = {}
    for name in modules:
        edges = graph.setdefault(name, {})
        for found in resolve_imports(name, modules):
            if not found.type_checking_only:
                edges.setdefault(found.target, found.line)
    return graph


def strongly_connected(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """Tarjan's strongly connected components, each sorted, in a stable order."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, {})):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            components.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(components)


def shortest_cycle(graph: dict[str, dict[str, int]], start: str, within: set[str]) -> list[str]:
    """The shortest import path from ``start`` back to itself, staying inside ``within``."""
    previous: dict[str, str] = {}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for target in sorted(graph.get(node, {})):
            if target not in within:
                continue
            if target == start:
                path = [node]
                while path[-1] != start:
                    path.append(previous[path[-1]])
                return [start, *reversed(path[:-1]), start]
            if target not in previous:
                previous[target] = node
                queue.append(target)
    raise ValueError(f"{start} is on no cycle")


def find_cycles(root: Path) -> list[str]:
    """The shortest cycle through each module that is on one, without repeats, written
    ``a (line 3) -> b (line 9) -> a``: ``a`` imports ``b`` on its line 3, and so on."""
    graph = import_graph(root)
    cycles: dict[tuple[str, ...], str] = {}
    for component in strongly_connected(graph):
        if len(component) == 1 and component[0] not in graph[component[0]]:
            continue
        for start in component:
            path = shortest_cycle(graph, start, set(component))[:-1]
            first = path.index(min(path))
            path = path[first:] + path[:first]  # the same cycle from any start reads the same
            steps = [f"{a} (line {graph[a][b]})" for a, b in zip(path, [*path[1:], path[0]])]
            cycles.setdefault(tuple(path), " -> ".join([*steps, path[0]]))
    return list(cycles.values())


def is_command_line(name: str, top: str) -> bool:
    """The ``cli`` package and its modules, the ``__main__`` modules and a deprecated ``cli``
    shim left at an old path (``mechrag.sweep.cli``): the package's own users."""
    return (
        name == f"{top}.cli"
        or name.startswith(f"{top}.cli.")
        or name.endswith((".__main__", ".cli"))
    )


def top_level_imports(root: Path) -> list[str]:
    """``file:line`` of every import of the top-level package itself by a library module."""
    modules = module_names(root)
    top = root.name
    found = []
    for name in modules:
        if name == top or is_command_line(name, top):
            continue
        for imported in resolve_imports(name, modules):
            if imported.target == top:
                where = modules[name].relative_to(root.parent).as_posix()
                found.append(f"{where}:{imported.line} imports {top}")
    return found


def command_line_imports(root: Path) -> list[str]:
    """``file:line`` of every import of the command-line package by a library module."""
    modules = module_names(root)
    top = root.name
    found = []
    for name in modules:
        if is_command_line(name, top):
            continue
        for imported in resolve_imports(name, modules):
            if is_command_line(imported.target, top):
                where = modules[name].relative_to(root.parent).as_posix()
                found.append(f"{where}:{imported.line} imports {imported.target}")
    return found


def test_the_package_has_no_import_cycles():
    cycles = find_cycles(PACKAGE_ROOT)
    assert not cycles, "import cycles:\n" + "\n".join(cycles)


def test_library_modules_do_not_import_the_top_level_package():
    found = top_level_imports(PACKAGE_ROOT)
    assert not found, "import the defining submodule instead:\n" + "\n".join(found)


def test_library_modules_do_not_import_the_command_line():
    found = command_line_imports(PACKAGE_ROOT)
    assert not found, "the command line sits on the library, not under it:\n" + "\n".join(found)


def write_package(root: Path, files: dict[str, str]) -> Path:
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root / "pkg"


def test_checker_resolves_imports_and_finds_cycles_and_top_level_imports(tmp_path):
    package = write_package(
        tmp_path,
        {
            "pkg/__init__.py": "from pkg.a import f\nfrom pkg import c\n",
            "pkg/a.py": "from . import b\n\ndef f():\n    pass\n",
            "pkg/b.py": "def g():\n    from .a import f\n",  # lazy, and closes a -> b -> a
            "pkg/c.py": "from pkg import f\n",  # a name of the package: runs pkg/__init__.py
            "pkg/d.py": "from pkg import a\nimport pkg.sub.e\n",  # submodules only: fine
            "pkg/sub/__init__.py": "",
            "pkg/sub/e.py": "from .. import a\nfrom . import helper\nimport os\n",
            "pkg/sub/helper.py": "",
            "pkg/t.py": (
                "from typing import TYPE_CHECKING\n"
                "if TYPE_CHECKING:\n    from pkg.u import U\n    import pkg\n"
                "else:\n    import pkg.d\n"
            ),
            "pkg/u.py": "from pkg.t import T\n",  # no cycle: t imports u only for types
            "pkg/cli/__init__.py": "import pkg\n",  # command line: may import the package
            "pkg/cli/run.py": "from pkg.cli import x\n",
            "pkg/v.py": "def h():\n    from pkg.cli.run import main\n",  # library -> cli
            "pkg/__main__.py": "from pkg import f\n",
        },
    )
    assert import_graph(package) == {
        "pkg": {"pkg.a": 1, "pkg.c": 2},
        "pkg.__main__": {"pkg": 1},
        "pkg.a": {"pkg.b": 1},
        "pkg.b": {"pkg.a": 2},
        "pkg.c": {"pkg": 1},
        "pkg.cli": {"pkg": 1},
        "pkg.cli.run": {"pkg.cli": 1},
        "pkg.d": {"pkg.a": 1, "pkg.sub.e": 2},
        "pkg.sub": {},
        "pkg.sub.e": {"pkg.a": 1, "pkg.sub.helper": 2},
        "pkg.sub.helper": {},
        "pkg.t": {"pkg.d": 6},
        "pkg.u": {"pkg.t": 1},
        "pkg.v": {"pkg.cli.run": 2},
    }
    assert find_cycles(package) == [
        "pkg (line 2) -> pkg.c (line 1) -> pkg",
        "pkg.a (line 1) -> pkg.b (line 2) -> pkg.a",
    ]
    assert top_level_imports(package) == ["pkg/c.py:1 imports pkg", "pkg/t.py:4 imports pkg"]
    assert command_line_imports(package) == ["pkg/v.py:2 imports pkg.cli.run"]


PACKAGES = [
    "mechrag", "mechrag.data", "mechrag.mechanism", "mechrag.metrics", "mechrag.models",
    "mechrag.results", "mechrag.retrieval", "mechrag.sweep",
]


def lazy_tables(root: Path) -> dict[str, dict[str, int]]:
    """``package -> {module: line}`` of each lazy ``_MODULES`` table (the imports a package
    makes by name, on first use of one of its public names)."""
    modules = module_names(root)
    tables = {}
    for name, path in modules.items():
        if path.name != "__init__.py":
            continue
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "_MODULES" for t in node.targets
            ):
                table = ast.literal_eval(node.value)
                tables[name] = {module: node.lineno for module in table}
    return tables


def test_lazy_tables_name_modules_and_close_no_cycle():
    """The lazy imports count as edges too: with them the graph still has no cycle."""
    modules = module_names(PACKAGE_ROOT)
    tables = lazy_tables(PACKAGE_ROOT)
    assert set(tables) == set(PACKAGES)
    graph = import_graph(PACKAGE_ROOT)
    for package, table in tables.items():
        assert set(table) <= set(modules), f"{package} names a module that does not exist"
        for module, line in table.items():
            graph[package].setdefault(module, line)
    cycles = []
    for component in strongly_connected(graph):
        if len(component) > 1:
            cycles.append(" -> ".join(shortest_cycle(graph, component[0], set(component))))
    assert not cycles, "import cycles through lazy names:\n" + "\n".join(cycles)


def test_every_public_name_is_its_defining_modules_object():
    """Each lazy ``__all__`` name is the object its module defines, also a name that a submodule
    shares (``mechrag.mechanism.echo`` the function, ``mechrag.sweep`` the function) after that
    submodule was imported, as it was when the names were imported eagerly."""
    code = """
import importlib, pkgutil, mechrag
for info in pkgutil.walk_packages(mechrag.__path__, "mechrag."):
    if not info.name.endswith("__main__"):
        importlib.import_module(info.name)
for package in PACKAGES:
    module = importlib.import_module(package)
    table = {name: m for m, names in module._MODULES.items() for name in names}
    assert sorted(module.__all__) == sorted(table), package
    for name in module.__all__:
        defined = getattr(importlib.import_module(table[name]), name)
        assert getattr(module, name) is defined, (package, name, getattr(module, name))
print("ok")
"""
    done = subprocess.run(
        [sys.executable, "-c", f"PACKAGES = {PACKAGES!r}\n{code}"],
        capture_output=True,
        text=True,
        check=False,
        env={"PYTHONPATH": str(PACKAGE_ROOT.parent), "PATH": ""},
    )
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr
