"""The README is a front page: short, the two commands first, and an example that is still what
``snapready check`` prints."""

from __future__ import annotations

import re

import pytest

from tests.docs.conftest import ROOT
from webhook.cli import main

README = (ROOT / "README.md").read_text()


def test_the_readme_is_a_front_page() -> None:
    assert len(README.splitlines()) <= 150
    first_screen = "\n".join(README.splitlines()[:12])
    assert "make serve   #" in first_screen and "make test    #" in first_screen


def test_the_readme_links_only_to_files_that_exist() -> None:
    targets = re.findall(r"\]\(((?!https?:)[^)#]+)(?:#[^)]*)?\)", README)
    assert targets
    assert [t for t in targets if not (ROOT / t).exists()] == []


def test_the_readme_denial_is_what_check_prints(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)
    command = "snapready check docs/examples/llm-on-e2.yaml --policies manifests/examples"
    block = README.split(f"$ .venv/bin/{command}\n", 1)[1].split("```", 1)[0]
    assert main(command.split()[1:]) == 1
    assert capsys.readouterr().out == block
