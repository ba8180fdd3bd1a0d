"""The package's comments point at things that exist: docs pages and rule ids, not the old domain
notes, README sections or issue numbers; and modules that are still there."""

from __future__ import annotations

import re
from pathlib import Path

from scripts.docsgen.modules import Names, stale_names
from scripts.docsgen.settings import walk
from tests.docs.conftest import ROOT
from webhook.base.config import Settings

SOURCES = sorted(
    path
    for folder in ("webhook", "chart", "scripts", "bench")
    for path in (ROOT / folder).rglob("*")
    if path.suffix in (".py", ".yaml", ".tpl", ".txt", ".json")
    and "__pycache__" not in path.parts
    and path.resolve() != (ROOT / "scripts" / "docsgen" / "modules.py")
)
EXTERNAL = {"agent-sandbox issue 952", 'pod-migration README, "'}
"""Other projects' issues and READMEs that a comment cites as a source (the project's name
before it)."""


def names() -> Names:
    settings = [s.name for s in walk(Settings)]
    return Names(ROOT, [*settings, *(name.rsplit(".", 1)[0] for name in settings)])


def test_no_comment_names_a_module_that_is_gone() -> None:
    # Not bench/: its peers are described in Go's names (``webhook.Server``, ``admission.Handler``).
    found = stale_names([p for p in SOURCES if "bench" not in p.relative_to(ROOT).parts], names())
    assert found == []


def test_a_name_of_a_module_that_is_gone_is_caught(tmp_path: Path) -> None:
    source = tmp_path / "planted.py"
    source.write_text(
        '"""Uses ``webhook.cluster.api.fence`` and ``cluster.api.leader``, the setting\n'
        "``rules.disabled``, ``fence.py`` and webhook/cluster/api/fence.py; but also\n"
        "``webhook.cluster.fence``, ``cluster.gate``, ``kube.py`` and webhook/config.py.\n"
        "A package names only what it defines: ``cluster.api.nothing_here``.\n"
        '"""\n'
        "webhook = {}\n"
        "webhook.get('not a name: code, not a comment')\n"
    )
    found = stale_names([source], names(), shown_from=tmp_path, package=True)
    assert found == [
        "planted.py:3: webhook.cluster.fence",
        "planted.py:3: cluster.gate",
        "planted.py:3: kube.py",
        "planted.py:3: webhook/config.py",
        "planted.py:4: cluster.api.nothing_here",
    ]


def _lines(pattern: str) -> list[str]:
    found = []
    for path in SOURCES:
        text = path.read_text()
        for match in re.finditer(pattern, text):
            before = " ".join(text[max(0, match.start() - 40) : match.end()].split())
            if not any(before.endswith(external) for external in EXTERNAL):
                line = text.count("\n", 0, match.start()) + 1
                found.append(f"{path.relative_to(ROOT)}:{line}: {match[0]}")
    return found


def test_no_comment_cites_the_old_domain_notes_or_readme_sections() -> None:
    assert _lines(r"domain\.md|README,?\s+\"") == []


def test_no_comment_cites_an_issue_number_instead_of_a_rule_or_page() -> None:
    assert _lines(r"\b[Ii]ssues? \d+") == []
