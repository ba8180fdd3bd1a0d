"""Local CA and serving certificate generation (the only module importing ``cryptography``).

The webhook's serving certificate must carry DNS SANs for the Service
(``<service>.<namespace>.svc``): the API server verifies the name it dials against the SANs
(Kubernetes docs, "Dynamic Admission Control", Contacting the webhook). Keys are written 0600.
"""

from __future__ import annotations

import base64
import datetime as dt
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CA_VALIDITY = dt.timedelta(days=3650)
SERVING_VALIDITY = dt.timedelta(days=365)


@dataclass(frozen=True)
class CertPaths:
    """Files written by ``generate``: ``ca.crt``, ``ca.key``, ``tls.crt``, ``tls.key`` in a dir."""

    directory: Path

    @property
    def ca_cert(self) -> Path:
        return self.directory / "ca.crt"

    @property
    def ca_key(self) -> Path:
        return self.directory / "ca.key"

    @property
    def tls_cert(self) -> Path:
        return self.directory / "tls.crt"

    @property
    def tls_key(self) -> Path:
        return self.directory / "tls.key"


def service_dns_names(service: str, namespace: str) -> list[str]:
    """SANs a webhook Service is reached by: ``svc``, ``svc.ns``, ``svc.ns.svc``, ``...local``."""
    return [
        service,
        f"{service}.{namespace}",
        f"{service}.{namespace}.svc",
        f"{service}.{namespace}.svc.cluster.local",
    ]


def _write_private(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    path.chmod(0o600)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def generate(
    directory: Path,
    *,
    service: str = "snapready",
    namespace: str = "snapready",
    dns_names: tuple[str, ...] = ("localhost",),
    ip_addresses: tuple[str, ...] = ("127.0.0.1",),
    now: dt.datetime | None = None,
) -> CertPaths:
    """Write a new CA and a CA-signed serving certificate (ECDSA P-256) into ``directory``.

    Args:
        directory: created if missing; existing files are overwritten.
        service, namespace: the webhook Service, for the ``*.svc`` SANs.
        dns_names, ip_addresses: extra SANs (local runs use ``localhost`` and ``127.0.0.1``).
        now: issuing time (tests); default the current UTC time.

    Raises:
        ValueError: an entry of ``ip_addresses`` is not an IP address.
        OSError: the directory or files cannot be written.
    """
    issued = now or dt.datetime.now(dt.UTC)
    directory.mkdir(parents=True, exist_ok=True)
    paths = CertPaths(directory)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{service}-ca")])
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(issued - dt.timedelta(minutes=5))
        .not_valid_after(issued + CA_VALIDITY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    names = [*service_dns_names(service, namespace), *dns_names]
    sans: list[x509.GeneralName] = [x509.DNSName(n) for n in dict.fromkeys(names)]
    sans += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ip_addresses]
    cert = (
        x509.CertificateBuilder()
        .subject_name(
            x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{service}.{namespace}.svc")])
        )
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(issued - dt.timedelta(minutes=5))
        .not_valid_after(issued + SERVING_VALIDITY)
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), False
        )
        .sign(ca_key, hashes.SHA256())
    )
    paths.ca_cert.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    _write_private(paths.ca_key, _key_pem(ca_key))
    _write_private(paths.tls_key, _key_pem(key))
    paths.tls_cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return paths


def ca_bundle(ca_cert_file: Path) -> str:
    """Base64 of the CA PEM: the value of ``webhooks[].clientConfig.caBundle``."""
    return base64.b64encode(ca_cert_file.read_bytes()).decode("ascii")


def certificate_not_after(cert_file: Path) -> float:
    """Expiry of the first certificate in ``cert_file`` as a Unix timestamp (seconds).

    Raises:
        ValueError: the file holds no PEM certificate.
    """
    cert = x509.load_pem_x509_certificate(cert_file.read_bytes())
    return cert.not_valid_after_utc.timestamp()
