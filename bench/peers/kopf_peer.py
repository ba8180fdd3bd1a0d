"""The kopf peer of ``make bench-cluster``: kopf's own admission engine doing only the gVisor check
and a spec hash, as a kopf operator would write it.

* ``@kopf.on.mutate`` (id ``mutate``, served at ``/mutate``): a gVisor pod gets the annotation
  ``snapready.io/spec-hash`` = ``peer:sha256:<hex>``, SHA-256 of the JSON (sorted keys, compact)
  of the hashed fields, through kopf's ``patch`` (kopf turns it into the JSON patch);
* ``@kopf.on.validate`` (id ``validate``, at ``/validate``): a pod CREATE that is not gVisor is
  denied (``kopf.AdmissionError``, code 403).

The gVisor check is snapready's ``gvisor-runtime`` rule with its default names:
``spec.runtimeClassName == "gvisor"``. The hashed fields are the Go peer's
(``bench/peers/go/main.go``): of every container and init container its name, image, command,
args, env, ports and resources; of the pod spec ``POD_FIELDS``.

Served by ``kopf.WebhookServer`` (aiohttp, TLS with the bench's certificate) on 127.0.0.1;
``settings.admission.managed = None``: the bench registers the chart's webhook configurations
itself. Run as kopf's CLI runs an operator file (uvloop when installed, kopf's logging)::

    KUBECONFIG=... KOPF_PEER_PORT=9443 KOPF_PEER_CERT_DIR=certs KOPF_PEER_COUNTS_PORT=9444 \\
        python -m kopf run --standalone --all-namespaces -m bench.peers.kopf_peer

kopf reads the API server's discovery at start (it serves admission only for resources it has
discovered), so it needs a kubeconfig; with ``settings.scanning.disabled`` it watches nothing.
The handlers count their calls; ``GET http://127.0.0.1:KOPF_PEER_COUNTS_PORT/counts`` returns
``{"mutate": n, "validate": n}`` once the webhook server listens (503 before).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import Counter
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import aiohttp.web
import kopf

HASH_ANNOTATION = "snapready.io/spec-hash"
HASH_PREFIX = "peer:sha256:"
GVISOR_RUNTIME = "gvisor"
CONTAINER_FIELDS = ("name", "image", "command", "args", "env", "ports", "resources")
POD_FIELDS = (
    "runtimeClassName",
    "nodeSelector",
    "hostNetwork",
    "hostPID",
    "hostIPC",
    "shareProcessNamespace",
    "securityContext",
    "dnsPolicy",
    "dnsConfig",
    "os",
    "hostUsers",
    "automountServiceAccountToken",
)

COUNTS: Counter[str] = Counter()
"""Handler calls by id (``mutate``, ``validate``)."""
SERVING: dict[str, bool] = {"webhook": False}
"""Whether kopf's webhook server listens (set when it hands out its client config)."""


def spec_hash(spec: Mapping[str, Any]) -> str:
    """``peer:sha256:<64 hex>`` over the JSON of the pod spec's hashed fields."""
    kept: dict[str, Any] = {
        kind: [{k: c[k] for k in CONTAINER_FIELDS if k in c} for c in spec.get(kind) or ()]
        for kind in ("containers", "initContainers")
    }
    kept.update((field, spec[field]) for field in POD_FIELDS if field in spec)
    data = json.dumps(kept, sort_keys=True, separators=(",", ":")).encode()
    return HASH_PREFIX + hashlib.sha256(data).hexdigest()


def gvisor_problem(spec: Mapping[str, Any]) -> str | None:
    """Why the pod is not a GKE Sandbox pod, or None when it is."""
    runtime = spec.get("runtimeClassName")
    if runtime == GVISOR_RUNTIME:
        return None
    now = "is not set" if runtime in (None, "") else "is not a GKE Sandbox runtime"
    return f"runtimeClassName {now}; set it to {GVISOR_RUNTIME} (GKE Sandbox)"


@kopf.on.mutate("", "v1", "pods", id="mutate")
async def mutate(spec: kopf.Spec, patch: kopf.Patch, **_: Any) -> None:
    """Stamp the spec hash on a gVisor pod."""
    COUNTS["mutate"] += 1
    if gvisor_problem(spec) is None:
        patch.metadata.setdefault("annotations", {})[HASH_ANNOTATION] = spec_hash(spec)


@kopf.on.validate("", "v1", "pods", id="validate")
async def validate(spec: kopf.Spec, **kwargs: Any) -> None:
    """Deny a pod CREATE that is not gVisor (kopf passes ``operation``; its handler protocol
    does not name it)."""
    COUNTS["validate"] += 1
    problem = gvisor_problem(spec) if kwargs.get("operation") == "CREATE" else None
    if problem is not None:
        raise kopf.AdmissionError(problem, code=403)


class Server(kopf.WebhookServer):
    """kopf's webhook server, noting when it listens (for the counter endpoint's readiness)."""

    async def __call__(self, fn: kopf.WebhookFn) -> AsyncIterator[kopf.WebhookClientConfig]:
        async for config in super().__call__(fn):
            SERVING["webhook"] = True
            yield config


async def counts(_: aiohttp.web.Request) -> aiohttp.web.Response:
    """The handlers' call counts; 503 until the webhook server listens."""
    if not SERVING["webhook"]:
        return aiohttp.web.json_response({"serving": False}, status=503)
    return aiohttp.web.json_response(dict(COUNTS))


@kopf.on.startup()
async def configure(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
    """The webhook server (TLS with the bench's certificate), no managed configurations, no
    scanning; the counter endpoint."""
    certs = Path(os.environ["KOPF_PEER_CERT_DIR"])
    settings.admission.server = Server(
        addr="127.0.0.1",
        port=int(os.environ["KOPF_PEER_PORT"]),
        host="127.0.0.1",
        certfile=certs / "tls.crt",
        pkeyfile=certs / "tls.key",
        cafile=certs / "ca.crt",
    )
    settings.admission.managed = None
    settings.scanning.disabled = True
    app = aiohttp.web.Application()
    app.add_routes([aiohttp.web.get("/counts", counts)])
    runner = aiohttp.web.AppRunner(app, handle_signals=False, access_log=None)
    await runner.setup()
    await aiohttp.web.TCPSite(runner, "127.0.0.1", int(os.environ["KOPF_PEER_COUNTS_PORT"])).start()
    memo["counts_runner"] = runner


@kopf.on.cleanup()
async def stop_counts(memo: kopf.Memo, **_: Any) -> None:
    """Stop the counter endpoint."""
    runner = memo.get("counts_runner")
    if isinstance(runner, aiohttp.web.AppRunner):
        await runner.cleanup()
