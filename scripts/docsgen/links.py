"""The code's citations of the docs (``docs/gke-facts.md#section-9``) and whether they resolve.

Comments and docstrings cite a page by its path in the repository and, optionally, an anchor.
``unresolved`` checks each against the built site: the page exists and its HTML carries the
anchor (a heading's id, or an explicit ``{ #id }``), so a renamed heading breaks the test, not
the reader. Dead links between the pages themselves are MkDocs' own check (``--strict`` with
``validation``: links and anchors).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

CITATION = re.compile(r"(?<![\w/.-])docs/((?:[a-z0-9_-]+/)*[a-z0-9_-]+\.md)(?:#([A-Za-z0-9_-]+))?")


@dataclass(frozen=True)
class Citation:
    """``docs/<page>#<anchor>`` at ``source:line``."""

    source: str
    line: int
    page: str
    anchor: str

    def __str__(self) -> str:
        target = self.page + (f"#{self.anchor}" if self.anchor else "")
        return f"{self.source}:{self.line}: docs/{target}"


def citations(files: Iterable[Path], root: Path) -> list[Citation]:
    """Every docs citation in ``files`` (paths shown relative to ``root``)."""
    found = []
    for path in files:
        for number, line in enumerate(path.read_text().splitlines(), 1):
            for match in CITATION.finditer(line):
                source = path.relative_to(root).as_posix()
                found.append(Citation(source, number, match[1], match[2] or ""))
    return found


def _html(site: Path, page: str) -> Path:
    stem = page.removesuffix(".md")
    if stem == "index" or stem.endswith("/index"):
        return site / stem.removesuffix("index") / "index.html"
    return site / stem / "index.html"


def anchors(html: str) -> set[str]:
    """The ids a built page can be linked to."""
    return set(re.findall(r'\bid="([^"]+)"', html))


def unresolved(found: Iterable[Citation], docs: Path, site: Path) -> list[str]:
    """The citations whose page is not in ``docs`` or whose anchor is not in the built page."""
    bad = []
    cache: dict[str, set[str]] = {}
    for citation in found:
        if not (docs / citation.page).is_file():
            bad.append(f"{citation}: no such page")
            continue
        if not citation.anchor:
            continue
        if citation.page not in cache:
            html = _html(site, citation.page)
            cache[citation.page] = anchors(html.read_text()) if html.is_file() else set()
        if citation.anchor not in cache[citation.page]:
            bad.append(f"{citation}: no such anchor")
    return bad
