"""MkDocs hook (mkdocs.yml ``hooks``): fills the pages' ``<!-- snapready:NAME -->`` markers with
the references generated from the code (``scripts.docsgen.pages``)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # mkdocs loads hooks by path; the generators import the repository
    sys.path.insert(0, str(ROOT))

from scripts.docsgen.pages import expand  # noqa: E402


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """Expand the markers of one page (``page.file.src_uri``: ``reference/settings.md``)."""
    root = Path(config["config_file_path"]).resolve().parent
    return expand(markdown, page.file.src_uri, root)


def on_config(config: Any) -> Any:
    """Add every rule page (docs/rules/<id>.md) to the nav's "Rules" section, sorted by id, so a
    new rule needs its page and nothing else."""
    docs = Path(config["docs_dir"])
    pages = sorted(p.stem for p in (docs / "rules").glob("*.md") if p.stem != "index")
    for item in config["nav"]:
        if isinstance(item, dict) and "Rules" in item:
            item["Rules"] = ["rules/index.md", *(f"rules/{stem}.md" for stem in pages)]
    return config
