"""Every rule id a finding can carry, read from the package's source (not from a list kept by hand).

A rule id is a string literal in one of the shapes the code builds findings with: the second
argument of ``Finding(...)``, the ``rule`` argument of a module's own helper that has one, a
``rule=`` keyword, a ``rule_ids`` tuple, or a module constant whose name ends in ``RULE``.
Each id has a page ``docs/rules/<id>.md``; ``missing_pages`` and ``stale_pages`` compare them.
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

RULE_ID = re.compile(r"^[a-z][a-z0-9]*(?:-[a-z0-9]+)*$")


def _literal(node: ast.AST | None) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value if RULE_ID.match(node.value) else None
    return None


def _callee(node: ast.Call) -> str:
    func = node.func
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return ""


def _constants(tree: ast.Module) -> dict[str, str]:
    found: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            value = _literal(node.value)
            for target in targets:
                if isinstance(target, ast.Name) and value is not None:
                    found[target.id] = value
    return found


def _ids_in(tree: ast.Module) -> set[str]:
    constants = _constants(tree)
    ids = {value for name, value in constants.items() if name.endswith("RULE")}

    def resolve(node: ast.AST | None) -> str | None:
        if isinstance(node, ast.Name):
            return constants.get(node.id)
        return _literal(node)

    position = {"Finding": 1}
    for statement in tree.body:
        if isinstance(statement, ast.FunctionDef):
            names = [arg.arg for arg in statement.args.posonlyargs + statement.args.args]
            if "rule" in names:
                position[statement.name] = names.index("rule")
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and (index := position.get(_callee(node))) is not None:
            if len(node.args) > index and (value := resolve(node.args[index])):
                ids.add(value)
            ids.update(v for k in node.keywords if k.arg == "rule" and (v := resolve(k.value)))
        target: ast.expr | None = None
        value_node: ast.expr | None = None
        if isinstance(node, ast.AnnAssign):
            target, value_node = node.target, node.value
        elif isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value_node = node.targets[0], node.value
        if isinstance(target, ast.Name | ast.Attribute) and isinstance(value_node, ast.Tuple):
            name = target.id if isinstance(target, ast.Name) else target.attr
            if name == "rule_ids":
                ids.update(v for e in value_node.elts if (v := _literal(e)))
    return ids


def rule_ids(package: Path) -> dict[str, list[str]]:
    """Each rule id in ``package`` and the modules (paths relative to its parent) that raise it."""
    where: dict[str, set[str]] = defaultdict(set)
    for path in sorted(package.rglob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        for rule in _ids_in(tree):
            where[rule].add(path.relative_to(package.parent).as_posix())
    return {rule: sorted(paths) for rule, paths in sorted(where.items())}


def missing_pages(ids: dict[str, list[str]], rules_dir: Path) -> list[str]:
    """Rule ids without a page ``rules_dir/<id>.md``."""
    return [rule for rule in ids if not (rules_dir / f"{rule}.md").is_file()]


def stale_pages(ids: dict[str, list[str]], rules_dir: Path) -> list[str]:
    """Pages of ``rules_dir`` for a rule id the code no longer raises."""
    return sorted(
        page.stem
        for page in rules_dir.glob("*.md")
        if page.stem != "index" and page.stem not in ids
    )
