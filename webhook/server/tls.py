"""Serving-certificate hot reload: swap a changed cert/key pair into the live ``ssl.SSLContext``.

Kubernetes rotates a mounted Secret by swapping a symlink (kubelet "atomic writer"), but other
writers (a sidecar, ``cp``) can leave a half-written pair for a moment. So every
``cert_reload_seconds`` the reloader reads both files, and when their digest changed it first
loads the pair into a scratch context: only a complete, matching pair (OpenSSL
``SSL_CTX_check_private_key``) reaches the live context; anything else keeps the old pair and is
retried at the next poll. New TLS handshakes then present the new certificate; open connections
keep theirs (OpenSSL copies the certificate into each connection at ``SSL_new``).

The live context is changed only on the event loop thread: ``load_cert_chain`` sets the
certificate and the key in two steps, and a connection accepted between them would get a
certificate without its key. Running in the loop that accepts connections makes the swap atomic
for them.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import ssl
import tempfile
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import uvicorn

from webhook.base.config import ServerSettings
from webhook.server import certs

log = logging.getLogger("snapready.tls")

ExpiryObserver = Callable[[float], None]
"""Called with the loaded certificate's notAfter (Unix seconds) after every successful load."""


@dataclass(frozen=True)
class CertPair:
    """The bytes of one certificate chain (PEM) and its private key (PEM), read together."""

    cert: bytes
    key: bytes

    @property
    def digest(self) -> str:
        """SHA-256 over both files (length-prefixed, so moving bytes between them changes it)."""
        sha = hashlib.sha256()
        for part in (self.cert, self.key):
            sha.update(len(part).to_bytes(8, "big"))
            sha.update(part)
        return sha.hexdigest()


def read_pair(cert_file: Path, key_file: Path) -> CertPair:
    """Read both files. Raises ``OSError`` when either cannot be read (e.g. mid-rename)."""
    return CertPair(cert_file.read_bytes(), key_file.read_bytes())


@contextlib.contextmanager
def _pair_files(pair: CertPair) -> Iterator[tuple[str, str]]:
    """Expose in-memory bytes as two file paths (``ssl`` only loads chains from files).

    Linux: anonymous ``memfd`` files, so a read-only root filesystem needs no writable dir.
    Elsewhere: private temporary files. Both vanish when the block exits.
    """
    if hasattr(os, "memfd_create"):
        fds = [os.memfd_create("snapready-tls") for _ in range(2)]
        try:
            for fd, data in zip(fds, (pair.cert, pair.key), strict=True):
                os.write(fd, data)
            yield f"/proc/self/fd/{fds[0]}", f"/proc/self/fd/{fds[1]}"
        finally:
            for fd in fds:
                os.close(fd)
        return
    with tempfile.TemporaryDirectory(prefix="snapready-tls-") as tmp:
        paths = (Path(tmp) / "tls.crt", Path(tmp) / "tls.key")
        for path, data in zip(paths, (pair.cert, pair.key), strict=True):
            path.write_bytes(data)
        yield str(paths[0]), str(paths[1])


def check_pair(pair: CertPair) -> float:
    """Validate ``pair`` in a scratch context and return the certificate's notAfter (Unix s).

    Raises:
        ssl.SSLError: unparsable PEM, or a key that does not match the certificate.
        ValueError: the certificate file holds no PEM certificate.
    """
    scratch = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    with _pair_files(pair) as (cert_path, key_path):
        scratch.load_cert_chain(cert_path, key_path)
        return certs.certificate_not_after(Path(cert_path))


def load_into(context: ssl.SSLContext, pair: CertPair) -> None:
    """Load ``pair`` into ``context`` (call on the thread that accepts connections).

    Raises:
        ssl.SSLError: as ``check_pair``; callers validate first so this does not happen.
    """
    with _pair_files(pair) as (cert_path, key_path):
        context.load_cert_chain(cert_path, key_path)


@dataclass
class CertReloader:
    """Polls ``cert_file``/``key_file`` and keeps ``context`` serving the newest valid pair.

    Attributes:
        context: the live server context (uvicorn's ``config.ssl``).
        interval: seconds between polls (``settings.server.cert_reload_seconds``).
        on_expiry: receives the notAfter of each loaded certificate (the expiry metric).
    """

    context: ssl.SSLContext
    cert_file: Path
    key_file: Path
    interval: float
    on_expiry: ExpiryObserver | None = None
    current: CertPair | None = None
    not_after: float | None = None
    _rejected: str | None = field(default=None, repr=False)

    @classmethod
    def from_settings(
        cls, context: ssl.SSLContext, server: ServerSettings, on_expiry: ExpiryObserver | None
    ) -> CertReloader:
        """A reloader for ``server.cert_file``/``key_file`` every ``cert_reload_seconds``."""
        return cls(
            context, server.cert_file, server.key_file, server.cert_reload_seconds, on_expiry
        )

    def poll(self) -> bool:
        """One poll: read, compare digests, validate, swap. True when a new pair was loaded.

        Never raises for bad files: a missing, half-written or mismatched pair is logged once
        per distinct content and the current pair stays in service.
        """
        try:
            pair = read_pair(self.cert_file, self.key_file)
        except OSError as exc:
            self._reject(f"unreadable:{exc.errno}", f"cannot read the pair ({exc.strerror})")
            return False
        if self.current is not None and pair.digest == self.current.digest:
            return False
        try:
            not_after = check_pair(pair)
        except (ssl.SSLError, ValueError) as exc:
            self._reject(pair.digest, f"the new pair is not usable yet ({exc})")
            return False
        self._swap(pair, not_after)
        return True

    def _reject(self, marker: str, reason: str) -> None:
        if marker != self._rejected:
            log.warning(
                "tls: %s; keeping the current certificate, retrying every %ss",
                reason,
                self.interval,
            )
        self._rejected = marker

    def _swap(self, pair: CertPair, not_after: float) -> None:
        try:
            load_into(self.context, pair)
        except ssl.SSLError:
            # Cannot happen after check_pair with the same bytes; put the old pair back anyway
            # so the context never keeps a certificate without its key.
            if self.current is not None:
                load_into(self.context, self.current)
            raise
        first = self.current is None
        self.current, self.not_after, self._rejected = pair, not_after, None
        if self.on_expiry is not None:
            self.on_expiry(not_after)
        log.info(
            "tls: %s serving certificate %s (notAfter %s)",
            "loaded" if first else "reloaded",
            self.cert_file,
            datetime.fromtimestamp(not_after, UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        )

    async def run(self) -> None:
        """Poll forever on the running event loop (cancel the task to stop)."""
        while True:
            self.poll()
            await asyncio.sleep(self.interval)


async def serve_with_reloader(main: Awaitable[None], reloader: CertReloader) -> None:
    """Await ``main`` (uvicorn's ``Server.serve()``) with ``reloader`` polling on the same loop.

    The first poll runs before ``main`` starts, so the expiry is known before the first request.
    """
    reloader.poll()
    task = asyncio.create_task(reloader.run(), name="snapready-cert-reloader")
    try:
        await main
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def run_with_reloader(server: uvicorn.Server, reloader: CertReloader) -> None:
    """``server.run()`` with the reloader on the same event loop (same loop factory as uvicorn).

    Blocks until the server stops.
    """
    with asyncio.Runner(loop_factory=server.config.get_loop_factory()) as runner:
        runner.run(serve_with_reloader(server.serve(), reloader))
