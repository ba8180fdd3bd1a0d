"""The first run (issue 36): ``make serve`` installs only what the server needs and serves with
helper injection off; ``make install``/``make test`` install the dev tools. Checked with
``make --dry-run`` against a fresh virtualenv path, so nothing is installed."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")


def dry_run(target: str, venv: Path) -> list[str]:
    result = subprocess.run(
        ["make", "--dry-run", "--always-make", target, f"VENV={venv}"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        check=True,
    )
    return result.stdout.splitlines()


def test_serve_installs_the_runtime_dependencies_only(tmp_path: Path) -> None:
    lines = dry_run("serve", tmp_path / "venv")
    installs = [line for line in lines if "pip install" in line]
    assert installs == [f"{tmp_path / 'venv'}/bin/python -m pip install --quiet -e ."]
    assert not any("[dev]" in line for line in lines)


def test_serve_runs_without_helper_injection(tmp_path: Path) -> None:
    (command,) = [line for line in dry_run("serve", tmp_path / "venv") if " serve " in line]
    assert command.startswith("SNAPREADY_INJECTION__ENABLED=false ")
    assert command.endswith("snapready serve --policies manifests/examples")


def test_install_brings_the_dev_tools(tmp_path: Path) -> None:
    installs = [line for line in dry_run("install", tmp_path / "venv") if "pip install" in line]
    assert any(line.endswith("-e '.[dev]'") for line in installs)
