"""Certificate hot reload (webhook/server/tls.py): the reloader alone, then a real ``snapready
serve``.

The end-to-end test replaces the serving pair of a running server while a client keeps sending
AdmissionReviews, each over a fresh TLS handshake, and checks that new handshakes present the new
certificate, that no request fails (including while a half-written pair sits on disk), and that
the expiry metric follows the new certificate.
"""

from __future__ import annotations

import datetime as dt
import http.client
import ipaddress
import json
import re
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

from tests.conftest import load_review, start_server, stop_server
from tests.support.ports import free_port
from webhook.server import certs
from webhook.server.tls import CertPair, CertReloader, check_pair

FAST_SERVER = {
    "SNAPREADY_SERVER__CERT_RELOAD_SECONDS": "0.05",
    "SNAPREADY_SERVER__DRAIN_SECONDS": "0",
}
"""Poll every 50 ms and stop without the SIGTERM drain: keeps the tests short."""


@dataclass(frozen=True)
class Issued:
    """A PEM pair and what identifies it."""

    cert: bytes
    key: bytes
    serial: int
    not_after: float


def issue_leaf(ca_dir: Path, days: int) -> Issued:
    """A new serving certificate for localhost/127.0.0.1, signed by the CA in ``ca_dir``."""
    ca_cert = x509.load_pem_x509_certificate((ca_dir / "ca.crt").read_bytes())
    ca_key = serialization.load_pem_private_key((ca_dir / "ca.key").read_bytes(), None)
    assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
    key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.UTC)
    sans = x509.SubjectAlternativeName(
        [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
    )
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(x509.NameOID.COMMON_NAME, "rotated")]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=1))
        .not_valid_after((now + dt.timedelta(days=days)).replace(microsecond=0))
        .add_extension(sans, critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    return Issued(
        cert.public_bytes(serialization.Encoding.PEM),
        key_pem,
        cert.serial_number,
        cert.not_valid_after_utc.timestamp(),
    )


# --- the reloader on its own -------------------------------------------------------------------


@pytest.fixture
def pki(tmp_path: Path) -> Path:
    """A CA and a serving pair in ``tmp_path``: ``ca.crt``, ``ca.key``, ``tls.crt``, ``tls.key``."""
    certs.generate(tmp_path)
    return tmp_path


def make_reloader(pki: Path, seen: list[float]) -> CertReloader:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    return CertReloader(context, pki / "tls.crt", pki / "tls.key", 0.05, seen.append)


def test_first_poll_loads_the_pair_and_reports_its_expiry(pki: Path) -> None:
    seen: list[float] = []
    reloader = make_reloader(pki, seen)
    assert reloader.poll() is True
    assert seen == [certs.certificate_not_after(pki / "tls.crt")]
    assert reloader.poll() is False, "unchanged files must not reload"


def test_a_changed_pair_is_swapped_in(pki: Path) -> None:
    seen: list[float] = []
    reloader = make_reloader(pki, seen)
    reloader.poll()
    new = issue_leaf(pki, days=30)
    (pki / "tls.crt").write_bytes(new.cert)
    (pki / "tls.key").write_bytes(new.key)
    assert reloader.poll() is True
    assert seen[-1] == new.not_after
    assert reloader.current == CertPair(new.cert, new.key)


def _truncate_key(pki: Path, new: Issued) -> None:
    (pki / "tls.crt").write_bytes(new.cert)
    (pki / "tls.key").write_bytes(new.key[: len(new.key) // 2])


def _new_cert_old_key(pki: Path, new: Issued) -> None:
    (pki / "tls.crt").write_bytes(new.cert)


def _empty_cert(pki: Path, new: Issued) -> None:
    (pki / "tls.crt").write_bytes(b"")
    (pki / "tls.key").write_bytes(new.key)


def _missing_key(pki: Path, new: Issued) -> None:
    (pki / "tls.key").unlink()


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(_truncate_key, id="keeps-old-pair-when-key-is-half-written"),
        pytest.param(_new_cert_old_key, id="keeps-old-pair-when-key-does-not-match-cert"),
        pytest.param(_empty_cert, id="keeps-old-pair-when-cert-file-is-empty"),
        pytest.param(_missing_key, id="keeps-old-pair-when-key-file-is-missing"),
    ],
)
def test_an_unusable_pair_is_not_loaded_and_is_retried(
    pki: Path, damage: Callable[[Path, Issued], None]
) -> None:
    seen: list[float] = []
    reloader = make_reloader(pki, seen)
    reloader.poll()
    old = reloader.current
    new = issue_leaf(pki, days=30)
    damage(pki, new)
    assert reloader.poll() is False
    assert reloader.poll() is False
    assert reloader.current == old
    assert len(seen) == 1
    (pki / "tls.crt").write_bytes(new.cert)
    (pki / "tls.key").write_bytes(new.key)
    assert reloader.poll() is True, "the completed pair is picked up at the next poll"
    assert seen[-1] == new.not_after


def test_check_pair_rejects_a_key_of_another_certificate(pki: Path) -> None:
    other = issue_leaf(pki, days=1)
    with pytest.raises(ssl.SSLError):
        check_pair(CertPair((pki / "tls.crt").read_bytes(), other.key))


# --- a running server ------------------------------------------------------------------------


@dataclass
class Traffic:
    """What the client thread saw: per request the certificate serial, or the failure."""

    serials: list[int] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)


def one_request(port: int, context: ssl.SSLContext, body: bytes, uid: str) -> int:
    """POST /validate on a new connection (new handshake); return the server cert's serial."""
    conn = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=10)
    try:
        conn.request("POST", "/validate", body, {"Content-Type": "application/json"})
        assert conn.sock is not None
        der = conn.sock.getpeercert(binary_form=True)
        response = conn.getresponse()
        payload = response.read()
    finally:
        conn.close()
    if response.status != 200:
        raise AssertionError(f"HTTP {response.status}: {payload[:200]!r}")
    if json.loads(payload)["response"]["uid"] != uid:
        raise AssertionError("uid not echoed")
    assert der is not None
    return x509.load_der_x509_certificate(der).serial_number


def client_loop(port: int, ca_file: Path, traffic: Traffic) -> None:
    """Send reviews until stopped (bounded: 30 s or 20 000 requests)."""
    context = ssl.create_default_context(cafile=str(ca_file))
    review = load_review("01")
    body, uid = json.dumps(review).encode(), review["request"]["uid"]
    deadline = time.monotonic() + 30
    while not traffic.stop.is_set() and time.monotonic() < deadline:
        if len(traffic.serials) + len(traffic.failures) >= 20_000:
            break
        try:
            traffic.serials.append(one_request(port, context, body, uid))
        except Exception as exc:  # every failure counts, whatever its type
            traffic.failures.append(f"{type(exc).__name__}: {exc}")


def wait_for(condition: Callable[[], bool], what: str, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def expiry_metric(metrics_port: int) -> float:
    text = httpx.get(f"http://127.0.0.1:{metrics_port}/metrics").text
    for line in text.splitlines():
        if line.startswith("snapready_tls_certificate_expiry_timestamp_seconds "):
            return float(line.split()[1])
    raise AssertionError("expiry gauge not exported")


@pytest.mark.e2e
def test_rotation_under_load_has_no_failed_request(tmp_path: Path) -> None:
    server = start_server(tmp_path, env=FAST_SERVER)
    traffic = Traffic()
    port = int(server.base_url.rsplit(":", 1)[1])
    old_serial = x509.load_pem_x509_certificate(
        (server.cert_dir / "tls.crt").read_bytes()
    ).serial_number
    new = issue_leaf(server.cert_dir, days=42)
    thread = threading.Thread(target=client_loop, args=(port, server.ca_file, traffic))
    thread.start()
    try:
        wait_for(lambda: len(traffic.serials) >= 5, "first requests")
        # 1. A half-written pair (new cert, truncated key): must be refused, old pair kept.
        (server.cert_dir / "tls.crt").write_bytes(new.cert)
        (server.cert_dir / "tls.key").write_bytes(new.key[: len(new.key) // 2])
        wait_for(lambda: "not usable yet" in server.log(), "the reloader to refuse the pair")
        time.sleep(0.3)  # several more polls see the same half-written pair
        during = len(traffic.serials)
        wait_for(lambda: len(traffic.serials) >= during + 5, "requests on the half-written pair")
        # 2. The key completes the pair: new handshakes must switch to it.
        (server.cert_dir / "tls.key").write_bytes(new.key)
        wait_for(lambda: new.serial in traffic.serials, "a handshake with the new certificate")
        after = len(traffic.serials)
        wait_for(lambda: len(traffic.serials) >= after + 20, "requests after the rotation")
    finally:
        traffic.stop.set()
        thread.join(15)
        stop_server(server)
    print(f"{len(traffic.serials)} requests, {len(traffic.failures)} failed")
    assert traffic.failures == []
    assert traffic.serials[0] == old_serial
    assert set(traffic.serials) == {old_serial, new.serial}
    first_new = traffic.serials.index(new.serial)
    assert first_new >= during + 5, "the half-written pair must not have been served"
    assert set(traffic.serials[first_new:]) == {new.serial}, "no handshake went back"
    assert "reloaded serving certificate" in server.log()
    # The log line dates the certificate as people read dates (RFC 3339), not as a Unix number.
    expiry = dt.datetime.fromtimestamp(new.not_after, dt.UTC).isoformat().replace("+00:00", "Z")
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", expiry)
    assert f"(notAfter {expiry})" in server.log()


@pytest.mark.e2e
def test_expiry_metric_follows_the_reloaded_certificate(tmp_path: Path) -> None:
    metrics_port = free_port()
    env = {**FAST_SERVER, "SNAPREADY_SERVER__METRICS_PORT": str(metrics_port)}
    server = start_server(tmp_path, env=env)
    try:
        initial = certs.certificate_not_after(server.cert_dir / "tls.crt")
        assert expiry_metric(metrics_port) == initial
        new = issue_leaf(server.cert_dir, days=7)
        (server.cert_dir / "tls.key").write_bytes(new.key)
        (server.cert_dir / "tls.crt").write_bytes(new.cert)
        wait_for(lambda: expiry_metric(metrics_port) == new.not_after, "the gauge to change")
    finally:
        stop_server(server)
