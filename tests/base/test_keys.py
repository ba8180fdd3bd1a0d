"""``base.keys``: every snapready annotation and label name is spelt in one module.

A key written as a string literal beside the prefix (``prefix + "spec-hash"``,
``settings.annotation("spec-hash")``) anywhere else in the package would be a second spelling
that a rename can miss; this scan fails on one.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from webhook.base import keys

PACKAGE = Path(__file__).resolve().parents[2] / "webhook"
NAMES = {value for name, value in vars(keys).items() if name.isupper() and isinstance(value, str)}


def _literal_keys(path: Path, root: Path = PACKAGE.parent) -> list[str]:
    """``file:line`` of every ``<x>prefix + "<literal>"`` or ``<x>.annotation("<literal>")``."""
    found: list[str] = []
    for node in ast.walk(ast.parse(path.read_text())):
        literal: ast.expr | None = None
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            left = node.left
            named = isinstance(left, ast.Name) and left.id == "prefix"
            attr = isinstance(left, ast.Attribute) and left.attr == "prefix"
            if named or attr:
                literal = node.right
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "annotation"
            and node.args
        ):
            literal = node.args[0]
        if isinstance(literal, ast.Constant) and isinstance(literal.value, str):
            found.append(f"{path.relative_to(root)}:{literal.lineno}: {literal.value!r}")
    return found


def test_no_key_is_spelt_outside_base_keys() -> None:
    """No module builds a prefixed key from a string literal: each one names ``base.keys``."""
    offenders = [
        hit
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.name != "keys.py"
        for hit in _literal_keys(path)
    ]
    assert offenders == []


def test_the_scan_finds_a_literal_key(tmp_path: Path) -> None:
    """The scan itself sees both spellings (so the test above can fail)."""
    sample = tmp_path / "sample.py"
    sample.write_text('a = prefix + "spec-hash"\nb = settings.annotation("policy")\n')
    assert len(_literal_keys(sample, tmp_path)) == 2


@pytest.mark.parametrize("name", sorted(NAMES))
def test_each_key_is_a_valid_annotation_name_part(name: str) -> None:
    """Each name, after the default ``snapready.io/`` prefix, is a valid qualified name
    (apimachinery ``IsQualifiedName``: <= 63 characters, alphanumerics, ``-``, ``_``, ``.``)."""
    assert 0 < len(name) <= 63
    assert name[0].isalnum() and name[-1].isalnum()
    assert all(c.isalnum() or c in "-_." for c in name)


def test_keys_are_distinct() -> None:
    """Two constants never share a value (a copy-paste slip would make two meanings one key)."""
    values = [v for n, v in vars(keys).items() if n.isupper() and isinstance(v, str)]
    assert len(values) == len(set(values))
