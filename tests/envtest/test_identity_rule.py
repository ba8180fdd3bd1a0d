"""The rule of real-API tests: snapready never runs as admin (``system:masters``).

In-process cluster sources and ``snapready serve`` processes use a ServiceAccount with the chart's
RBAC (``tests/support/identity.py``); the admin kubeconfig is for test setup and for the CLI run
as an operator would. Checked twice: ``require_token`` refuses a certificate kubeconfig where the
tiers build snapready's settings, and this scan refuses a new use of the admin kubeconfig file
outside the places listed here (with why).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from tests.envtest.controlplane import ROOT, write_kubeconfig
from tests.support.identity import (
    RBAC_KINDS,
    NotSnapreadyIdentityError,
    chart_rbac,
    chart_values,
    require_token,
)

ALLOWED = {
    "tests/envtest/controlplane.py": "defines it",
    "tests/cli/status/test_sizes.py": "`snapready status` run by an operator (the CLI)",
    "tests/cli/test_status_explain.py": "`snapready status/explain` run by an operator (the CLI)",
    "tests/cluster/test_origin_signing.py": "`snapready status/explain` run by an operator",
}
"""Files that may name ``admin_kubeconfig``, and why none of them runs snapready's server or a
cluster source with it."""
USE = re.compile(r"\badmin_kubeconfig\b")


def test_no_test_gives_snapready_the_admin_kubeconfig() -> None:
    offending = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in sorted((ROOT / "tests").rglob("*.py"))
        if str(path.relative_to(ROOT)) not in ALLOWED and path != Path(__file__)
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if USE.search(line)
    ]
    assert not offending, (
        "snapready runs as its ServiceAccount with the chart's RBAC in real-API tests "
        "(tests/support/identity.py), never as admin:\n" + "\n".join(offending)
    )


def test_require_token_refuses_certificates_and_accepts_tokens(tmp_path: Path) -> None:
    ca = tmp_path / "ca.crt"
    admin = {"client-certificate": "admin.crt", "client-key": "admin.key"}
    certificate = write_kubeconfig(tmp_path / "admin", "https://127.0.0.1:1", ca, admin)
    with pytest.raises(NotSnapreadyIdentityError, match="not with a client certificate"):
        require_token(certificate)
    token = write_kubeconfig(tmp_path / "sa", "https://127.0.0.1:1", ca, {"token": "t"})
    assert require_token(token) == token
    assert yaml.safe_load(token.read_text())["users"][0]["user"] == {"token": "t"}


def test_chart_rbac_is_the_charts_with_the_tests_names() -> None:
    """The chart's objects for a fresh release, Roles in the test's namespace, and only the
    ``resourceNames`` of the chart's own Lease and webhook configurations re-targeted."""
    release, rendered, wanted = chart_rbac(
        {"lifecycle": {"prune": "on"}}, "t-ns", lease_name="my-lease", configuration="my-hooks"
    )
    assert release.startswith("snapready-")
    assert list(dict.fromkeys(o["kind"] for o in wanted)) == ["ServiceAccount", *RBAC_KINDS]
    # The chart's objects, plus the records' read role it aggregates into ``view``.
    assert {o["metadata"]["name"] for o in wanted} == {release, f"{release}-records-view"}
    role = next(o for o in wanted if o["kind"] == "Role")
    assert role["metadata"]["namespace"] == "t-ns"
    named = [r for r in role["rules"] if r.get("resourceNames")]
    assert [r["resourceNames"] for r in named] == [["my-lease"]]
    cluster_role = next(
        o for o in wanted if o["kind"] == "ClusterRole" and o["metadata"]["name"] == release
    )
    chart_role = next(
        o for o in rendered if o["kind"] == "ClusterRole" and o["metadata"]["name"] == release
    )
    for ours, theirs in zip(cluster_role["rules"], chart_role["rules"], strict=True):
        if "resourceNames" in theirs:
            assert ours["resourceNames"] == ["my-hooks"]
        assert {k: v for k, v in ours.items() if k != "resourceNames"} == {
            k: v for k, v in theirs.items() if k != "resourceNames"
        }
    assert chart_values({"lifecycle": {"prune": "on"}, "origin": {"record_config": False}}) == {
        "lifecycle": {"prune": "on"},
        "staleConfig": False,
    }
    assert chart_values({"outcomes": {"settle_seconds": 2}}) == {}
