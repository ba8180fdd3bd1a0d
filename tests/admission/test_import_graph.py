"""No import circle in the package: the admission engine and its handlers used to import each
other (``engine`` <-> ``workloads``, through a lazy import inside a function, which grimp sees
as an import too). Computed over grimp's graph, the one import-linter builds."""

from __future__ import annotations

from pathlib import Path

import grimp
import pytest


def import_cycles(package: str) -> list[list[str]]:
    """Each strongly connected set of more than one module under ``package`` (iterative Tarjan)."""
    graph = grimp.build_graph(package)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    for root in sorted(graph.modules):
        if root in index:
            continue
        work: list[tuple[str, list[str]]] = []
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        work.append((root, sorted(graph.find_modules_directly_imported_by(root))))
        while work:
            module, pending = work[-1]
            if pending:
                target = pending.pop()
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, sorted(graph.find_modules_directly_imported_by(target))))
                elif target in on_stack:
                    low[module] = min(low[module], index[target])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[module])
            if low[module] == index[module]:
                component: list[str] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == module:
                        break
                if len(component) > 1:
                    cycles.append(sorted(component))
    return cycles


def test_the_package_has_no_import_cycle() -> None:
    assert import_cycles("webhook") == []


def test_the_cycle_finder_sees_a_lazy_import(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "circle_pkg"
    root.mkdir()
    (root / "__init__.py").write_text("")
    (root / "a.py").write_text("from circle_pkg import b\n")
    (root / "b.py").write_text("def f():\n    from circle_pkg import a\n")
    (root / "c.py").write_text("from circle_pkg import a\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert import_cycles("circle_pkg") == [["circle_pkg.a", "circle_pkg.b"]]
