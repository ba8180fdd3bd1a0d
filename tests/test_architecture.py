"""The package's shape holds: no import circle, a code map (docs/architecture.md) that names
every folder, no module over 400 lines.

The layers and their contracts are import-linter's (``make lint``, ``pyproject.toml``
``[tool.importlinter]``); these are the three rules it cannot state. An import circle
anywhere (even one import-linter's layers allow, inside one layer) makes the import order matter
and hides which module owns what; a folder the code map does not name is a room nobody was
told about; a module over 400 lines has become two (style.md: modules of ~100-250 lines).
"""

from __future__ import annotations

import re
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "webhook"
MAX_LINES = 400


def strongly_connected(edges: dict[str, set[str]]) -> list[list[str]]:
    """The import circles of ``edges`` (module -> modules it imports): Tarjan's strongly
    connected components with more than one module, or a module that imports itself."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(start: str) -> None:
        # Iterative, so a deep import chain cannot hit the recursion limit.
        work = [(start, iter(sorted(edges.get(start, ()))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component: list[str] = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1 or node in edges.get(node, ()):
                        found.append(sorted(component))

    for module in sorted(edges):
        if module not in index:
            visit(module)
    return found


def test_the_circle_finder_finds_a_circle() -> None:
    """A two-module circle and a three-module one are found; a chain is not a circle."""
    edges = {"a": {"b"}, "b": {"a"}, "c": {"d"}, "d": {"e"}, "e": {"c"}, "f": {"g"}, "g": set()}
    assert sorted(strongly_connected(edges)) == [["a", "b"], ["c", "d", "e"]]


def test_no_import_circle_in_the_package() -> None:
    """No module of ``webhook`` reaches itself through its imports (type-checking imports
    included: a circle drawn only for the type checker is still one to untangle)."""
    graph = grimp.build_graph("webhook", cache_dir=None)
    edges = {
        module: {
            imported
            for imported in graph.find_modules_directly_imported_by(module)
            if imported.startswith("webhook")
        }
        for module in graph.modules
        if module.startswith("webhook")
    }
    assert strongly_connected(edges) == []


def _code_map() -> str:
    """The code map: the "Code map" section of the docs' architecture page (docs/architecture.md),
    up to the next ``## `` heading."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    start = text.index("\n## Code map\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def _folders() -> list[str]:
    """Every folder of ``webhook/`` that holds Python modules or shipped files, as
    ``cluster/controllers/``."""
    found = []
    for path in sorted(PACKAGE.rglob("*")):
        if not path.is_dir() or path.name == "__pycache__":
            continue
        relative = path.relative_to(PACKAGE)
        if relative.parts[0] == "assets" and len(relative.parts) > 1:
            continue  # shipped files: the map names assets/ as a whole
        if (path / "__init__.py").exists() or relative.parts == ("assets",):
            found.append(relative.as_posix() + "/")
    return found


def test_the_code_map_names_every_folder() -> None:
    """Each folder of ``webhook/`` appears in the code map as `` `folder/` ``."""
    named = set(re.findall(r"`([a-z_]+(?:/[a-z_]+)*/)`", _code_map()))
    assert [f for f in _folders() if f not in named] == []


def test_the_code_map_names_no_folder_that_is_gone() -> None:
    """Every folder the code map's table names exists (a moved folder leaves no stale row)."""
    rows = [line for line in _code_map().splitlines() if line.startswith("| `")]
    named = {name for row in rows for name in re.findall(r"`([a-z_]+(?:/[a-z_]+)*/)`", row)}
    assert sorted(f for f in named if not (PACKAGE / f).is_dir()) == []


SOURCES = sorted(
    path
    for folder in ("webhook", "bench", "scripts")
    for path in (ROOT / folder).rglob("*.py")
    if "__pycache__" not in path.parts
)


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_module_over_400_lines(path: Path) -> None:
    """Outside ``tests/``, no Python file is over 400 lines (style.md: ~100-250)."""
    lines = len(path.read_text().splitlines())
    assert lines <= MAX_LINES, f"{lines} lines: split it by what it owns"
