"""The site builds with warnings as errors, and the build fails on a dead link or anchor; the
code's citations of the docs (``docs/gke-facts.md#section-9``) resolve."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from scripts.docsgen import links, pages
from tests.docs.conftest import ROOT, build

CITING = sorted(
    path
    for folder in ("webhook", "chart", "bench", "scripts", "tests")
    for path in (ROOT / folder).rglob("*")
    if path.suffix in (".py", ".yaml", ".tpl", ".txt", ".json", ".sh")
    and "__pycache__" not in path.parts
    and "data" not in path.relative_to(ROOT).parts
    and path.resolve() != Path(__file__).resolve()
)


def test_the_site_builds_strict(built_site: Path) -> None:
    """Every page is in the nav, every link and anchor resolves, every marker expands."""
    assert (built_site / "index.html").is_file()
    assert (built_site / "rules" / "gvisor-runtime" / "index.html").is_file()


PLANTED = {
    "[gone](no-such-page.md)": "contains a link 'no-such-page.md'",
    "[gone](security.md#no-such-anchor)": "does not contain an anchor '#no-such-anchor'",
}


def test_a_dead_link_or_a_page_outside_the_nav_fails_the_build(
    docs_copy: Callable[[], Path], tmp_path: Path
) -> None:
    """One build of a copy with two dead links (a page, an anchor) and an orphan page: it
    fails, and names each."""
    copy = docs_copy()
    page = copy / "docs" / "architecture.md"
    page.write_text(page.read_text() + "".join(f"\nSee {link}.\n" for link in PLANTED))
    (copy / "docs" / "orphan.md").write_text("# Orphan\n")
    result = build(copy, tmp_path / "site")
    assert result.returncode != 0
    for message in PLANTED.values():
        assert message in result.stderr
    assert "orphan.md" in result.stderr


def test_an_unknown_marker_fails_the_build(docs_copy: Callable[[], Path], tmp_path: Path) -> None:
    copy = docs_copy()
    page = copy / "docs" / "architecture.md"
    page.write_text(page.read_text() + "\n<!-- snapready:setings -->\n")
    result = build(copy, tmp_path / "site")
    assert result.returncode != 0
    assert "unknown marker 'setings'" in result.stderr


def test_every_citation_of_the_docs_in_the_code_resolves(built_site: Path) -> None:
    found = links.citations(CITING, ROOT)
    assert links.unresolved(found, ROOT / "docs", built_site) == []


def test_a_citation_of_a_missing_page_or_anchor_is_caught(built_site: Path, tmp_path: Path) -> None:
    source = tmp_path / "module.py"
    source.write_text(
        "# docs/gke-facts.md#section-9 holds\n"
        "# docs/gke-facts.md#section-99 does not\n"
        "# docs/no-such-page.md neither\n"
    )
    bad = links.unresolved(links.citations([source], tmp_path), ROOT / "docs", built_site)
    assert bad == [
        "module.py:2: docs/gke-facts.md#section-99: no such anchor",
        "module.py:3: docs/no-such-page.md: no such page",
    ]


def test_no_page_shows_raw_markdown(built_site: Path) -> None:
    """A table or heading that Markdown did not render (an HTML block swallowing it, a table
    without its blank line) shows as raw text: none in the built pages."""
    raw = [
        page.relative_to(built_site).as_posix()
        for page in built_site.rglob("index.html")
        if "|---|" in page.read_text() or "\n## " in page.read_text()
    ]
    assert raw == []


def test_the_gke_facts_keep_one_anchor_per_section(built_site: Path) -> None:
    """The code cites ``docs/gke-facts.md#section-N``: each of the ten sections keeps its id."""
    html = (built_site / "gke-facts" / "index.html").read_text()
    assert {f"section-{n}" for n in range(1, 11)} <= links.anchors(html)


def test_the_rule_marker_refuses_a_page_that_is_no_rule() -> None:
    with pytest.raises(pages.MarkerError, match="no finding in the code"):
        pages.expand("<!-- snapready:rule -->", "rules/no-such-rule.md", ROOT)
