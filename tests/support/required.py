"""A real component the suite needs (runsc, the Go peer) that cannot run here: skipped, and a
failure under CI, where every component is installed by the repository (``.ci/run``)."""

from __future__ import annotations

import os
from typing import NoReturn

import pytest


def unavailable(what: str, reason: str) -> NoReturn:
    """Skip the test with ``reason``; fail it when ``CI=true``, where ``what`` must run."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"{what} must run in CI: {reason}")
    pytest.skip(reason)
