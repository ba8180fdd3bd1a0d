"""Comments and docstrings that name a module of the package: does it still exist?

Only names in backticks count (``webhook.cluster.api.fence``, ``cluster.api.fence``,
``webhook/cluster/api/fence.py``, ``fence.py``), and only inside comments and string literals of
Python files (anywhere in other files), so code such as ``webhook.get(...)`` is never read as a
name. A dotted name resolves when its longest prefix that is a module or package of
``webhook/`` exists and the next part, if any, is defined or imported at its top level; in the
package's own files a short ``folder.module`` name is read under ``webhook/`` unless it is a setting
(``rules.disabled``); a bare ``fence.py`` must be some file of the repository. Paths
``webhook/<folder>/<module>.py`` count in backticks or not.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections.abc import Iterable, Iterator
from pathlib import Path

TICKED = re.compile(r"`{1,2}([A-Za-z_][\w.]*(?:/[\w.]+)*)`{1,2}")
PATHS = re.compile(r"(?<![\w./-])(webhook/[\w/]+\.py)\b")
IDENT = re.compile(r"^[A-Za-z_]\w*$")


def _texts(path: Path) -> Iterator[tuple[int, str]]:
    """(line, text) of the comments and strings of a Python file; every line of another file."""
    source = path.read_text()
    if path.suffix != ".py":
        yield from enumerate(source.splitlines(), 1)
        return
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type in (tokenize.COMMENT, tokenize.STRING):
            for offset, line in enumerate(token.string.splitlines()):
                yield token.start[0] + offset, line


def defined(source: Path) -> set[str]:
    """The names a module defines or imports at its top level (what ``module.name`` can be)."""
    names: set[str] = set()
    for node in ast.parse(source.read_text()).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return names


def _module_or_attr(parts: list[str], package: Path) -> bool:
    for cut in range(len(parts), 0, -1):
        base = package.joinpath(*parts[:cut])
        source = base.with_suffix(".py")
        if not source.is_file():
            source = base / "__init__.py"
        if source.is_file():
            rest = parts[cut:]
            return not rest or rest[0] in defined(source)
    return False


class Names:
    """What exists: the package's folders and modules, the repository's files, the settings."""

    def __init__(self, root: Path, settings: Iterable[str]) -> None:
        self.root = root
        self.package = root / "webhook"
        self.folders = {p.parent.name for p in self.package.glob("*/__init__.py")}
        self.files = {p.name for p in root.rglob("*.py") if ".venv" not in p.parts}
        self.settings = set(settings)

    inside = True
    """Whether the file being read is in ``webhook/`` (short ``folder.module`` names mean the
    package's only there)."""

    def stale(self, ref: str) -> bool:
        """Whether ``ref`` names a module, path or attribute that is not there."""
        if "/" in ref:
            return (
                ref.startswith("webhook/")
                and ref.endswith(".py")
                and not (self.root / ref).exists()
            )
        if ref.endswith(".py"):
            return ref not in self.files
        parts = ref.split(".")
        if not all(IDENT.match(p) for p in parts) or len(parts) < 2:
            return False
        if parts[0] == "webhook":
            return not _module_or_attr(parts[1:], self.package)
        if parts[0] in self.folders and ref not in self.settings and self.inside:
            prefix = ".".join(parts[:2])
            return prefix not in self.settings and not _module_or_attr(parts, self.package)
        return False


def stale_names(
    files: Iterable[Path], names: Names, *, shown_from: Path | None = None, package: bool = False
) -> list[str]:
    """``file:line: name`` for each name in ``files`` that no longer exists (``shown_from``: the
    folder the files are shown relative to, default the repository; ``package``: read every file
    as one of the package's own)."""
    found = []
    for path in files:
        names.inside = package or path.is_relative_to(names.package)
        shown = path.relative_to(shown_from or names.root).as_posix()
        for number, text in _texts(path):
            for ref in dict.fromkeys([*TICKED.findall(text), *PATHS.findall(text)]):
                if names.stale(ref.rstrip(".")):
                    found.append(f"{shown}:{number}: {ref}")
    return found
