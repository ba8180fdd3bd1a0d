"""Fixtures for the tests that run the helpers under real gVisor checkpoint and restore.

``runsc_binary`` (session) builds or reuses runsc (``tests.support.gvisor.find_runsc``). Where it
cannot start a sandbox the tests skip and say why, except under ``CI=true``: CI runs as root with
Go, so there a missing or unstartable runsc fails them.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.gvisor import (
    Rootfs,
    Runsc,
    RunscUnavailable,
    busybox_rootfs,
    debian_rootfs,
    find_runsc,
)
from tests.support.required import unavailable

PROGRAMS = Path(__file__).resolve().parent / "programs"


@pytest.fixture(scope="session")
def runsc_binary() -> Path:
    """The runsc binary, smoke-tested once: a sandbox that sees ``/proc/gvisor``."""
    try:
        binary = find_runsc()
    except RunscUnavailable as error:
        unavailable("runsc", str(error))
    smoke = subprocess.run(
        [str(binary), "--network=none", "--ignore-cgroups", "do", "/bin/sh", "-c",
         "test -c /proc/gvisor/checkpoint && echo gvisor-ok"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    if "gvisor-ok" not in smoke.stdout:
        unavailable("runsc", f"runsc cannot start a sandbox here: {smoke.stderr.strip()[-500:]}")
    return binary


@pytest.fixture
def runsc(runsc_binary: Path, tmp_path: Path) -> Iterator[Runsc]:
    """A runsc state folder for one test; its containers are deleted afterwards."""
    runner = Runsc(runsc_binary, tmp_path)
    yield runner
    runner.close()


@pytest.fixture(scope="session")
def debian(tmp_path_factory: pytest.TempPathFactory) -> Rootfs:
    """A Debian-like root filesystem (this machine's /usr): dash, coreutils, python3."""
    return debian_rootfs(tmp_path_factory.mktemp("debian-rootfs"))


@pytest.fixture(scope="session")
def busybox(tmp_path_factory: pytest.TempPathFactory) -> Rootfs:
    """A busybox-only root filesystem (``make tools`` installs busybox)."""
    binary = shutil.which("busybox")
    if binary is None:
        unavailable("runsc", "busybox is not installed (sudo make tools)")
    return busybox_rootfs(tmp_path_factory.mktemp("busybox-rootfs"), binary)


@pytest.fixture(params=["dash", "busybox"])
def shell_rootfs(request: pytest.FixtureRequest) -> Rootfs:
    """Each shell the helper supports, as the image's /bin/sh."""
    rootfs: Rootfs = request.getfixturevalue("debian" if request.param == "dash" else "busybox")
    return rootfs
