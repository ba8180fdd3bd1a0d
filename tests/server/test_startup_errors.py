"""``snapready serve`` start-up failures (issue: user test): each is one clear line and exit 2.

Every case runs ``python -m webhook serve`` as a real subprocess: a key that does not belong to
the certificate, files that are not PEM, missing certificate files that cannot be generated, and
a port that is already in use. None may print a traceback or claim to be listening.
"""

from __future__ import annotations

import os
import socket
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.cli.test_core import snapready
from tests.conftest import EXAMPLES
from tests.support.ports import free_port
from webhook.server import certs


def serve(
    tmp: Path, cert: Path | str, key: Path | str | None = None, port: int | None = None
) -> subprocess.CompletedProcess[bytes]:
    """``snapready serve`` in ``tmp`` with the given files (``key`` None: the default path)."""
    args = ["serve", "--policies", str(EXAMPLES), "--port", str(port or free_port())]
    args += ["--cert-file", str(cert)]
    if key is not None:
        args += ["--key-file", str(key)]
    env = {**os.environ, "SNAPREADY_SERVER__METRICS_PORT": "0"}
    return snapready(*args, cwd=tmp, env=env)


def assert_one_line_failure(result: subprocess.CompletedProcess[bytes], *parts: str) -> str:
    """Exit 2, no traceback, never "listening"; the ``snapready:`` line names all ``parts``."""
    output = (result.stdout + result.stderr).decode(errors="replace")
    assert result.returncode == 2, output
    assert "Traceback" not in output, output
    assert "listening" not in output, output
    lines = [line for line in result.stderr.decode().splitlines() if line.startswith("snapready:")]
    assert len(lines) == 1, output
    for part in parts:
        assert part in lines[0], lines[0]
    return lines[0]


def two_pairs(tmp: Path) -> tuple[Path, Path]:
    """Two independently generated cert directories ``a`` and ``b``."""
    certs.generate(tmp / "a")
    certs.generate(tmp / "b")
    return tmp / "a", tmp / "b"


def test_key_of_another_certificate_is_named_as_a_mismatch(tmp_path: Path) -> None:
    a, b = two_pairs(tmp_path)
    result = serve(tmp_path, a / "tls.crt", b / "tls.key")
    assert_one_line_failure(
        result, str(a / "tls.crt"), str(b / "tls.key"), "certificate and key do not match"
    )


Garbage = Callable[[Path], tuple[Path, Path]]


def garbage_cert(tmp: Path) -> tuple[Path, Path]:
    a, _ = two_pairs(tmp)
    (tmp / "cert.pem").write_text("not a certificate\n")
    return tmp / "cert.pem", a / "tls.key"


def garbage_key(tmp: Path) -> tuple[Path, Path]:
    a, _ = two_pairs(tmp)
    (tmp / "key.pem").write_text("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n")
    return a / "tls.crt", tmp / "key.pem"


def directory_as_cert(tmp: Path) -> tuple[Path, Path]:
    a, _ = two_pairs(tmp)
    return a, a / "tls.key"


@pytest.mark.parametrize(
    "files",
    [
        pytest.param(garbage_cert, id="certificate-file-that-is-not-pem"),
        pytest.param(garbage_key, id="key-file-with-a-broken-pem-body"),
        pytest.param(directory_as_cert, id="directory-given-as-the-certificate"),
    ],
)
def test_unloadable_tls_files_are_named(tmp_path: Path, files: Garbage) -> None:
    cert, key = files(tmp_path)
    assert_one_line_failure(serve(tmp_path, cert, key), str(cert), str(key))


def test_missing_custom_certificate_names_the_file_and_the_generation_rule(
    tmp_path: Path,
) -> None:
    line = assert_one_line_failure(serve(tmp_path, "/nonexist"), "/nonexist", "missing")
    assert "tls.crt" in line and "tls.key" in line  # generation only for a <dir>/tls.* pair
    assert "cannot generate into" not in line


def test_missing_key_next_to_an_existing_certificate_is_not_regenerated(tmp_path: Path) -> None:
    a, _ = two_pairs(tmp_path)
    (a / "tls.key").unlink()
    before = (a / "tls.crt").read_bytes()
    line = assert_one_line_failure(serve(tmp_path, a / "tls.crt", a / "tls.key"), "missing")
    assert str(a / "tls.key") in line
    assert (a / "tls.crt").read_bytes() == before
    assert not (a / "tls.key").exists()


def test_port_in_use_is_one_line_and_exit_2(tmp_path: Path) -> None:
    a, _ = two_pairs(tmp_path)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = serve(tmp_path, a / "tls.crt", a / "tls.key", port=port)
    assert_one_line_failure(result, f"127.0.0.1:{port}", "in use")
