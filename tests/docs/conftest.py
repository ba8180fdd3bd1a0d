"""The docs site, built once per test process (``mkdocs build --strict``), and a way to build a
temporary copy with a planted fault."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MKDOCS = [sys.executable, "-m", "mkdocs", "build", "--strict"]


def build(config_dir: Path, site: Path) -> subprocess.CompletedProcess[str]:
    """``mkdocs build --strict`` of ``config_dir/mkdocs.yml`` into ``site``."""
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    return subprocess.run(
        [*MKDOCS, "-f", str(config_dir / "mkdocs.yml"), "-d", str(site)],
        capture_output=True, text=True, timeout=300, env=env, check=False,
    )  # fmt: skip


@pytest.fixture(scope="session")
def built_site(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Path:
    """The repository's site, built with warnings as errors: once per run, shared by the xdist
    workers (the first one builds under a lock, the others reuse its result)."""
    shared = tmp_path_factory.getbasetemp()
    if worker_id != "master":
        shared = shared.parent
    site, done = shared / "docs-site", shared / "docs-site.result"
    with (shared / "docs-site.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            result = build(ROOT, site)
            done.write_text(f"{result.returncode}\n{result.stderr}")
    code, _, stderr = done.read_text().partition("\n")
    assert code == "0", stderr
    return site


@pytest.fixture
def docs_copy(tmp_path: Path) -> Callable[[], Path]:
    """A copy of docs/ and mkdocs.yml in ``tmp_path`` (the code, chart and generators linked),
    to plant a fault in; returns the copy's root."""

    def make() -> Path:
        shutil.copytree(ROOT / "docs", tmp_path / "docs")
        shutil.copy(ROOT / "mkdocs.yml", tmp_path / "mkdocs.yml")
        for name in ("scripts", "webhook", "chart"):
            (tmp_path / name).symlink_to(ROOT / name)
        return tmp_path

    return make
