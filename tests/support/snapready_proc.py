"""A real ``snapready serve`` subprocess over HTTPS, with its own CA, for end-to-end tests.

Like ``tests/conftest.py``'s ``start_server`` (file mode), but for any source: pass a kubeconfig
for cluster mode (``--kubeconfig`` implies ``--source kube``) and optionally a settings file (e.g.
the chart's ConfigMap ``settings.yaml``, so the server runs with exactly what an install would
give it). Flags always set the listener (127.0.0.1, a free port, the generated certificate), so a
chart settings file's ``0.0.0.0:10250`` and ``/etc/snapready/tls`` paths are overridden.

API::

    certs_dir = generate_certs(tmp / "certs")          # CA + serving pair for 127.0.0.1
    proc = start_snapready(tmp, certs_dir, kubeconfig=kubeconfig, config_file=settings)
    proc.url                                          # https://127.0.0.1:PORT
    rotate_serving_cert(certs_dir)                    # new pair from the same CA (hot reload)
    served_serial(proc.port, proc.ca_file)            # serial a new handshake presents
    peer_ports(proc.port)                             # clients connected now (/proc/net/tcp)
    proc.stop()                                       # SIGTERM by pid, SIGKILL after 10 s

The process runs in its own session (``start_new_session``) and is stopped by its pid only.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import json
import os
import socket
import ssl
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from tests.support.ports import free_port
from webhook.server import certs

ROOT = Path(__file__).resolve().parents[2]

TEST_ENV = {
    "PYTHONUNBUFFERED": "1",
    "SNAPREADY_SERVER__DRAIN_SECONDS": "0",
    "SNAPREADY_SERVER__CERT_RELOAD_SECONDS": "0.2",
    "SNAPREADY_SOURCE__BACKOFF_INITIAL_SECONDS": "0.05",
    "SNAPREADY_SOURCE__BACKOFF_MAX_SECONDS": "1",
    "SNAPREADY_OUTCOMES__NAMESPACES": '["t-untracked"]',
}
"""No shutdown drain (stops in well under a second), fast certificate polls and API retries;
outcomes tracked in no test's namespace (the tests share one API server, and each test that
checks outcomes runs its own tracker on its own namespace)."""


def generate_certs(directory: Path) -> Path:
    """A new CA and a serving certificate for ``127.0.0.1``/``localhost`` in ``directory``
    (``ca.crt``, ``ca.key``, ``tls.crt``, ``tls.key``, as ``snapready certs`` writes them)."""
    certs.generate(directory, dns_names=("localhost",), ip_addresses=("127.0.0.1",))
    return directory


def ca_bundle(directory: Path) -> str:
    """Base64 PEM of the CA in ``directory``: a webhook's ``clientConfig.caBundle``."""
    return certs.ca_bundle(directory / "ca.crt")


def _replace(path: Path, data: bytes, mode: int) -> None:
    temporary = path.with_name(f".{path.name}.new")
    temporary.write_bytes(data)
    temporary.chmod(mode)
    temporary.replace(path)


def rotate_serving_cert(directory: Path) -> int:
    """Replace ``tls.crt``/``tls.key`` in ``directory`` by a new pair signed by its CA.

    The certificate is written first, then the key (each file atomically): for a moment the files
    hold a mismatched pair, as any non-atomic rotation would; the server must keep the old pair
    until both match. Returns the new certificate's serial number.
    """
    ca_cert = x509.load_pem_x509_certificate((directory / "ca.crt").read_bytes())
    ca_key = serialization.load_pem_private_key((directory / "ca.key").read_bytes(), None)
    assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
    key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.UTC)
    sans = x509.SubjectAlternativeName(
        [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
    )
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "snapready-rotated")]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=30))
        .add_extension(sans, critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    _replace(directory / "tls.crt", cert.public_bytes(serialization.Encoding.PEM), 0o644)
    _replace(directory / "tls.key", key_pem, 0o600)
    return cert.serial_number


def served_serial(port: int, ca_file: Path) -> int:
    """Serial number of the certificate a new TLS handshake with ``127.0.0.1:port`` presents
    (verified against ``ca_file``)."""
    context = ssl.create_default_context(cafile=str(ca_file))
    with (
        socket.create_connection(("127.0.0.1", port), timeout=5) as raw,
        context.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
    ):
        der = tls.getpeercert(True)
    assert der is not None
    return x509.load_der_x509_certificate(der).serial_number


def peer_ports(port: int) -> set[int]:
    """Remote ports of the established IPv4 connections to ``127.0.0.1:port`` (Linux
    ``/proc/net/tcp``): which client connections exist, e.g. the API server's to a webhook.
    A port missing from an earlier snapshot is a connection (and TLS handshake) made since."""
    found: set[int] = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local, remote, state = fields[1], fields[2], fields[3]
        if state == "01" and int(local.split(":")[1], 16) == port:
            found.add(int(remote.split(":")[1], 16))
    return found


@dataclass
class SnapreadyProcess:
    """A running ``snapready serve`` and how to reach it."""

    process: subprocess.Popen[bytes]
    port: int
    cert_dir: Path
    log_file: Path

    @property
    def url(self) -> str:
        """``https://127.0.0.1:PORT`` (no path)."""
        return f"https://127.0.0.1:{self.port}"

    @property
    def ca_file(self) -> Path:
        """The CA that signed the serving certificate."""
        return self.cert_dir / "ca.crt"

    def client(self) -> httpx.Client:
        """An httpx client for ``url`` that verifies the CA."""
        context = ssl.create_default_context(cafile=str(self.ca_file))
        return httpx.Client(base_url=self.url, verify=context, timeout=10)

    def log(self) -> str:
        """Everything the server wrote so far (JSON lines)."""
        return self.log_file.read_text(errors="replace")

    def admissions(self) -> list[dict[str, Any]]:
        """The parsed ``admission`` log lines (one per answered review), in order."""
        found: list[dict[str, Any]] = []
        for line in self.log().splitlines():
            if not line.startswith("{"):
                continue
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if isinstance(entry, dict) and entry.get("msg") == "admission":
                found.append(entry)
        return found

    def readyz(self) -> tuple[int, dict[str, Any]]:
        """(status, JSON body) of ``/readyz``; raises ``httpx.HTTPError`` when unreachable."""
        with self.client() as http:
            response = http.get("/readyz")
        try:
            body = response.json()
        except ValueError:
            body = {"text": response.text}
        return response.status_code, body if isinstance(body, dict) else {"body": body}

    def wait_ready(self, timeout: float = 30.0) -> dict[str, Any]:
        """Poll ``/readyz`` until 200 (every cache synced); its body.

        Raises:
            RuntimeError: the process exited or was not ready in ``timeout`` s (log attached).
        """
        deadline = time.monotonic() + timeout
        last: object = None
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"snapready exited {self.process.returncode}:\n{self.log()}")
            try:
                status, body = self.readyz()
            except httpx.HTTPError as error:
                last = error
            else:
                if status == 200:
                    return body
                last = body
            time.sleep(0.05)
        raise RuntimeError(f"snapready not ready after {timeout}s ({last}):\n{self.log()}")

    def stop(self) -> int:
        """SIGTERM by pid, SIGKILL after 10 s; the exit code."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode


def start_snapready(
    workdir: Path,
    cert_dir: Path,
    *,
    kubeconfig: Path | None = None,
    config_file: Path | None = None,
    policy_dir: Path | None = None,
    env: dict[str, str] | None = None,
    args: tuple[str, ...] = (),
    port: int | None = None,
    wait: bool = True,
    timeout: float = 30.0,
) -> SnapreadyProcess:
    """Start ``python -m webhook serve`` on 127.0.0.1 and a free port; wait for ``/readyz``.

    Args:
        workdir: working directory; the log goes to ``workdir/serve.log``.
        cert_dir: from :func:`generate_certs` (``tls.crt``/``tls.key`` are served and reloaded).
        kubeconfig: cluster mode (``--kubeconfig``); else the file source (``policy_dir``).
        config_file: a settings YAML (``--config``), e.g. the chart's rendered ``settings.yaml``.
        env: extra environment (``SNAPREADY_*`` settings) over :data:`TEST_ENV`.
        args: extra ``serve`` flags.
        port: the HTTPS port (default: a free one), e.g. chosen earlier to register the URL.
        wait: wait until ready (raises ``RuntimeError`` with the log when it is not).
    """
    workdir.mkdir(parents=True, exist_ok=True)
    port = port or free_port()
    log_file = workdir / "serve.log"
    argv = [
        sys.executable,
        "-m",
        "webhook",
        "serve",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--cert-file",
        str(cert_dir / "tls.crt"),
        "--key-file",
        str(cert_dir / "tls.key"),
        "--metrics-port",
        "0",
    ]
    if config_file is not None:
        argv += ["--config", str(config_file)]
    if kubeconfig is not None:
        argv += ["--kubeconfig", str(kubeconfig)]
    if policy_dir is not None:
        argv += ["--policies", str(policy_dir)]
    argv += list(args)
    inherited = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("SNAPREADY_", "KUBECONFIG"))
    }
    with log_file.open("wb") as output:
        process = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            env={**inherited, **TEST_ENV, **(env or {})},
            cwd=workdir,
            start_new_session=True,
        )
    proc = SnapreadyProcess(process, port, cert_dir, log_file)
    if wait:
        try:
            proc.wait_ready(timeout)
        except BaseException:
            proc.stop()
            raise
    return proc


__all__ = [
    "ROOT",
    "TEST_ENV",
    "SnapreadyProcess",
    "ca_bundle",
    "generate_certs",
    "peer_ports",
    "rotate_serving_cert",
    "served_serial",
    "start_snapready",
]
