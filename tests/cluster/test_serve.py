"""How ``snapready serve`` flags choose the policy source.

The ``snapready serve --source kube --kubeconfig ...`` subprocess itself (``/readyz`` 503 until
every cache synced, then 200, ``/validate`` answering from the cluster's policies) runs against the
real API server: ``test_real_apiserver.py::test_serve_readyz_waits_for_every_cache_then_...``.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import make_settings
from webhook.cli.serve import with_source_flags


@pytest.mark.parametrize(
    ("flags", "kind", "kubeconfig"),
    [
        pytest.param({"source": None, "kubeconfig": None}, "files", None, id="no-flags-keep-files"),
        pytest.param({"source": "kube", "kubeconfig": None}, "kube", None, id="kube-in-cluster"),
        pytest.param(
            {"source": None, "kubeconfig": Path("k")},
            "kube",
            Path("k"),
            id="kubeconfig-implies-kube",
        ),
        pytest.param(
            {"source": "files", "kubeconfig": Path("k")},
            "files",
            Path("k"),
            id="explicit-files-wins",
        ),
    ],
)
def test_source_flags(flags: dict[str, Any], kind: str, kubeconfig: Path | None) -> None:
    settings = with_source_flags(make_settings(), argparse.Namespace(**flags))
    assert (settings.source.kind, settings.source.kubeconfig) == (kind, kubeconfig)
    assert settings.source.policy_dir == make_settings().source.policy_dir
