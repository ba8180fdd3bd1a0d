"""The peer webhooks of a benchmark: what other frameworks pay for the same minimal work.

Two servers doing only the gVisor check and a spec hash (``bench/peers/``: the algorithm and the
hashed fields are in their docstrings), each with its own call counter:

* the Go peer, a controller-runtime webhook (``bench/peers/go``), built once by
  ``scripts/peers.sh`` from the Go module proxy and cached under
  ``~/.cache/snapready/peers/<hash of its sources>/peer``; its calls are controller-runtime's
  ``controller_runtime_webhook_requests_total`` on its own ``/metrics`` (HTTPS, same port);
* the kopf peer (``bench/peers/kopf_peer.py``), run by kopf's CLI (``--standalone``, all
  namespaces) with a kubeconfig (kopf serves admission only for resources it discovered); its
  handlers' counts on a plain-HTTP ``/counts`` port.

Both listen on 127.0.0.1 with the benchmark's certificate (``ca.crt``, ``tls.crt``, ``tls.key``
in one folder) and serve ``/mutate`` and ``/validate``, the paths of the chart's configurations.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import re
import subprocess
import sys
from collections import defaultdict
from functools import partial
from pathlib import Path

import urllib3

from bench.harness.objects import ROOT
from bench.harness.servers import Launcher, Server, https_get, wait_ready

GO_PEER_SCRIPT = ROOT / "scripts" / "peers.sh"
KOPF_PEER_MODULE = "bench.peers.kopf_peer"
GO_METRIC = re.compile(
    r"^controller_runtime_webhook_requests_total\{([^}]*)\}\s+(\S+)$", re.MULTILINE
)


class PeerUnavailable(Exception):
    """A peer cannot run on this machine; the message says why."""


def go_peer_binary(*, echo: bool = False) -> Path:
    """The Go peer's binary, built or reused by ``scripts/peers.sh`` (``echo``: its progress
    lines are copied to stderr as they come: a cold build takes minutes).

    Raises:
        PeerUnavailable: the script failed (no Go, the module proxy unreachable, a build
            error); its last lines are the message.
    """
    with subprocess.Popen(
        ["bash", str(GO_PEER_SCRIPT)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as script:
        assert script.stdout is not None and script.stderr is not None
        progress = []
        for line in script.stderr:
            progress.append(line.rstrip())
            if echo:
                print(line, end="", file=sys.stderr, flush=True)
        stdout = script.stdout.read()
        code = script.wait()
    paths = re.findall(r"^GO_PEER=(.+)$", stdout, re.MULTILINE)
    if code != 0 or not paths:
        raise PeerUnavailable(f"scripts/peers.sh exited {code}: {' | '.join(progress[-3:])}")
    return Path(paths[-1])


def go_peer_version(binary: Path) -> str:
    """``peer go1.x controller-runtime vX`` (the binary's own build info)."""
    result = subprocess.run(
        [str(binary), "--version"], capture_output=True, text=True, check=False, timeout=30
    )
    return result.stdout.strip() or "?"


def kopf_unavailable() -> str | None:
    """Why the kopf peer cannot run here (kopf not installed), or None."""
    if importlib.util.find_spec("kopf") is None:
        return "kopf is not installed in this environment (make install: dev dependency)"
    return None


def start_go_peer(launcher: Launcher, binary: Path, port: int, certs: Path) -> Server:
    """The Go peer on ``127.0.0.1:port`` (not waited for: :func:`wait_go_peer`)."""
    argv = [str(binary), "--host", "127.0.0.1", "--port", str(port), "--cert-dir", str(certs)]
    return launcher.program("go-peer", argv, port, {})


def wait_go_peer(server: Server, certs: Path) -> float:
    """Seconds from the Go peer's start until its ``/metrics`` answers 200."""
    return wait_ready(server, certs / "ca.crt", "/metrics")


def start_kopf_peer(
    launcher: Launcher, port: int, counts_port: int, certs: Path, kubeconfig: Path
) -> Server:
    """The kopf peer on ``127.0.0.1:port``, its counts on ``counts_port``, as ``kopf run
    --standalone --all-namespaces`` with ``kubeconfig`` (not waited for:
    :func:`wait_kopf_peer`)."""
    argv = ["kopf", "run", "--standalone", "--all-namespaces", "-m", KOPF_PEER_MODULE]
    env = {
        "KUBECONFIG": str(kubeconfig),
        "KOPF_PEER_PORT": str(port),
        "KOPF_PEER_COUNTS_PORT": str(counts_port),
        "KOPF_PEER_CERT_DIR": str(certs),
    }
    return launcher.module("kopf-peer", argv, port, env)


def wait_kopf_peer(server: Server, counts_port: int, certs: Path) -> float:
    """Seconds from the kopf peer's start until its webhook server listens (``/counts`` 200)."""
    return wait_ready(server, certs / "ca.crt", probe=partial(http_get, counts_port, "/counts"))


def http_get(port: int, path: str, timeout: float = 2.0) -> tuple[int, bytes]:
    """GET over plain HTTP to 127.0.0.1."""
    with urllib3.HTTPConnectionPool("127.0.0.1", port, retries=False) as pool:
        response = pool.request("GET", path, timeout=timeout)
        return response.status, response.data


def go_peer_counts(port: int, ca: Path) -> dict[str, float]:
    """controller-runtime's ``controller_runtime_webhook_requests_total`` summed by webhook path
    (``mutate``, ``validate``), from the Go peer's ``/metrics``."""
    text = https_get(port, "/metrics", ca, timeout=5)[1].decode()
    counts: dict[str, float] = defaultdict(float)
    for labels, value in GO_METRIC.findall(text):
        path = re.search(r'webhook="/?([^"]*)"', labels)
        counts[path.group(1) if path else "?"] += float(value)
    return dict(counts)


def kopf_peer_counts(counts_port: int) -> dict[str, float]:
    """The kopf peer's handler calls by id (``mutate``, ``validate``)."""
    status, body = http_get(counts_port, "/counts", timeout=5)
    if status != 200:
        raise urllib3.exceptions.HTTPError(f"kopf peer /counts answered {status}: {body[:200]!r}")
    counts: dict[str, float] = json.loads(body)
    return counts


def kopf_version() -> str:
    """The installed kopf's version."""
    return importlib.metadata.version("kopf")
