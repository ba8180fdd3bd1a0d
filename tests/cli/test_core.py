"""``snapready certs``, ``review`` and ``serve`` start-up errors, run as real subprocesses."""

from __future__ import annotations

import base64
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

from cryptography import x509

from tests.conftest import EXAMPLES, REVIEWS
from tests.support.ports import free_port


def snapready(
    *args: str,
    cwd: Path | None = None,
    stdin: bytes | None = None,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "webhook", *args],
        capture_output=True,
        cwd=cwd,
        input=stdin,
        timeout=60,
        env=env,
        check=False,
    )


def test_certs_writes_private_keys_0600_and_prints_the_ca_bundle(tmp_path: Path) -> None:
    result = snapready(
        "certs",
        "--out",
        str(tmp_path),
        "--service",
        "hook",
        "--namespace",
        "sys",
        "--dns",
        "hook.example.com",
        "--ip",
        "10.0.0.7",
    )
    assert result.returncode == 0, result.stderr
    bundle = base64.b64decode(result.stdout.strip())
    assert bundle == (tmp_path / "ca.crt").read_bytes()
    for key in ("ca.key", "tls.key"):
        assert stat.S_IMODE((tmp_path / key).stat().st_mode) == 0o600
    cert = x509.load_pem_x509_certificate((tmp_path / "tls.crt").read_bytes())
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    names = sans.get_values_for_type(x509.DNSName)
    assert {"hook.sys.svc", "hook.sys", "hook", "hook.example.com"} <= set(names)
    assert [str(ip) for ip in sans.get_values_for_type(x509.IPAddress)] == ["127.0.0.1", "10.0.0.7"]
    ca = x509.load_pem_x509_certificate(bundle)
    cert.verify_directly_issued_by(ca)


def test_certs_refuses_to_overwrite_without_force(tmp_path: Path) -> None:
    assert snapready("certs", "--out", str(tmp_path)).returncode == 0
    again = snapready("certs", "--out", str(tmp_path))
    assert again.returncode == 2
    assert b"--force" in again.stderr
    assert snapready("certs", "--out", str(tmp_path), "--force").returncode == 0


def test_review_prints_the_response_for_a_file_and_for_stdin() -> None:
    path = REVIEWS / "01-pod-create-plain-kubectl-run.json"
    uid = json.loads(path.read_text())["request"]["uid"]
    from_file = snapready("review", str(path), "--policies", str(EXAMPLES))
    from_stdin = snapready("review", "-", "--policies", str(EXAMPLES), stdin=path.read_bytes())
    for result in (from_file, from_stdin):
        assert result.returncode == 0, result.stderr
        answer = json.loads(result.stdout)
        assert answer["kind"] == "AdmissionReview"
        assert answer["response"]["uid"] == uid


def test_review_of_a_broken_file_exits_2_with_a_message(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{nope")
    result = snapready("review", str(bad), "--policies", str(EXAMPLES))
    assert result.returncode == 2
    assert b"not valid JSON" in result.stderr
    missing = snapready("review", str(tmp_path / "absent.json"), "--policies", str(EXAMPLES))
    assert missing.returncode == 2
    assert b"cannot read" in missing.stderr


def test_review_answered_with_a_400_denial_exits_2_after_the_answer(tmp_path: Path) -> None:
    """A Deployment sent as a Pod: the webhook answers 400; the CLI prints it and exits 2."""
    review = json.loads(next(REVIEWS.glob("13-*.json")).read_text())
    review["request"]["kind"] = {"group": "", "version": "v1", "kind": "Pod"}
    path = tmp_path / "contradiction.json"
    path.write_text(json.dumps(review))
    result = snapready("review", str(path), "--policies", str(EXAMPLES))
    assert result.returncode == 2
    answer = json.loads(result.stdout)
    assert answer["response"]["allowed"] is False
    assert answer["response"]["status"]["code"] == 400
    denied = snapready("review", str(REVIEWS / "04-pod-create-mig-a100-1g5gb.json"), "--policies",
                       str(EXAMPLES), "--endpoint", "validate")  # fmt: skip
    # A denial is a finding: exit 1, after the answer (issue 36: it used to exit 0).
    assert denied.returncode == 1 and json.loads(denied.stdout)["response"]["allowed"] is False


def test_serve_refuses_to_start_on_a_malformed_policy_file(tmp_path: Path) -> None:
    policies = tmp_path / "policies"
    policies.mkdir()
    (policies / "broken.yaml").write_text(
        "apiVersion: podsnapshot.gke.io/v1\nkind: PodSnapshotPolicy\n"
        "metadata: {name: p, namespace: snap}\nspec: {selector: {}}\n"
    )
    result = snapready(
        "serve",
        "--policies",
        str(policies),
        "--port",
        str(free_port()),
        "--cert-file",
        str(tmp_path / "c" / "tls.crt"),
        "--key-file",
        str(tmp_path / "c" / "tls.key"),
        cwd=tmp_path,
    )
    assert result.returncode == 2
    assert b"broken.yaml" in result.stderr
    assert b"spec.storageConfigName" in result.stderr


def test_serve_rejects_invalid_settings_from_env(tmp_path: Path) -> None:
    env = {**os.environ, "SNAPREADY_FAILURE_POLICY": "Sometimes"}
    result = snapready("serve", "--policies", str(EXAMPLES), cwd=tmp_path, env=env)
    assert result.returncode == 2
    assert b"failure_policy" in result.stderr


def test_status_and_explain_take_no_policy_files() -> None:
    """They read the cluster's policies: a ``--policies`` flag would be silently meaningless."""
    for command in ("status", "explain"):
        result = snapready(command, "--policies", str(EXAMPLES))
        assert result.returncode == 2
        assert b"unrecognized arguments: --policies" in result.stderr


def test_review_malformed_with_a_known_uid_prints_the_servers_400_answer(tmp_path: Path) -> None:
    """``request.object`` a string, an unknown operation: the server answers a 400 review for
    the uid; ``snapready review`` prints that same answer and exits 2 (a fresh user's report)."""
    for field, value in (("object", "x"), ("operation", "FROB")):
        review = json.loads(next(REVIEWS.glob("03-*.json")).read_text())
        review["request"][field] = value
        path = tmp_path / f"{field}.json"
        path.write_text(json.dumps(review))
        result = snapready("review", str(path), "--policies", str(EXAMPLES))
        assert result.returncode == 2, result.stderr
        response = json.loads(result.stdout)["response"]
        assert response["uid"] == review["request"]["uid"]
        assert response["allowed"] is False and response["status"]["code"] == 400
        assert response["status"]["message"].startswith("malformed AdmissionReview: ")
