"""Raw JSON requests through the ``kubernetes`` client: exact API objects and ``Warning`` headers.

The typed client (v37, pydantic models) re-serialises what it sends and receives; admission tests
need the API server's own bytes instead: the object exactly as stored (what ``kubectl get -o
json`` prints, to hash it), every ``Warning`` header an admission webhook produced (the typed
client keeps only the last one), and the ``Status`` of a denial. :func:`request` goes through the
same ``ApiClient`` (its TLS, client certificate or bearer token) without any model; :func:`create`
finds the URL of any object (built-in or custom resource) through discovery.
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass, field
from typing import Any

from kubernetes import client

Obj = dict[str, Any]

_WARNING = re.compile(r'^\s*\d{3}\s+\S+\s+"(?P<text>(?:[^"\\]|\\.)*)"')


def parse_warning(header: str) -> str:
    """The text of one ``Warning`` header (``299 - "text"``, RFC 7234 section 5.5)."""
    match = _WARNING.match(header)
    if match is None:
        return header
    return re.sub(r"\\(.)", r"\1", match.group("text"))


@dataclass(frozen=True)
class Reply:
    """One API answer: HTTP status, decoded JSON body (``{}`` when empty) and warning texts."""

    status: int
    body: Obj
    warnings: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        """A 2xx answer."""
        return 200 <= self.status < 300

    @property
    def message(self) -> str:
        """The ``message`` of a ``Status`` body (a denial's text), ``""`` otherwise."""
        text = self.body.get("message")
        return text if isinstance(text, str) else ""

    def annotations(self) -> dict[str, str]:
        """``metadata.annotations`` of the returned object."""
        found = self.body.get("metadata", {}).get("annotations") or {}
        return dict(found)


def request(
    api_client: client.ApiClient,
    method: str,
    path: str,
    body: Obj | list[Obj] | None = None,
    *,
    query: dict[str, str] | None = None,
    content_type: str = "application/json",
    timeout: float = 30.0,
) -> Reply:
    """``method path`` with a JSON ``body`` through ``api_client``; never raises on HTTP errors.

    Args:
        path: e.g. ``/api/v1/namespaces/ns/pods``.
        query: query parameters, e.g. ``{"dryRun": "All"}``.
        content_type: ``application/merge-patch+json``, ``application/json-patch+json`` or
            ``application/strategic-merge-patch+json`` for PATCH.
    """
    method_, url, headers, serialized, post = api_client.param_serialize(
        method=method,
        resource_path=path,
        query_params=list((query or {}).items()),
        header_params={"Content-Type": content_type, "Accept": "application/json"},
        body=body,
        auth_settings=["BearerToken"],
    )
    response = api_client.call_api(
        method_, url, headers, serialized, post, _request_timeout=timeout
    )
    data = response.read() or b""  # type: ignore[no-untyped-call]
    try:
        decoded: Any = json.loads(data) if data.strip() else {}
    except ValueError:  # e.g. "404 page not found" for an API group that is not served
        decoded = {"message": data.decode(errors="replace").strip()}
    warnings = tuple(parse_warning(h) for h in response.headers.getlist("Warning"))
    return Reply(response.status, decoded if isinstance(decoded, dict) else {}, warnings)


@dataclass
class _Discovery:
    """(apiVersion, kind) -> (resource plural, namespaced), filled lazily per group version."""

    known: dict[tuple[str, str], tuple[str, bool]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def resource(
        self, api_client: client.ApiClient, api_version: str, kind: str
    ) -> tuple[str, bool]:
        key = (api_version, kind)
        with self.lock:
            if key not in self.known:
                base = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
                reply = request(api_client, "GET", base)
                if not reply.ok:
                    raise LookupError(f"{api_version} is not served: {reply.status} {reply.body}")
                for entry in reply.body.get("resources", []):
                    if "/" not in entry["name"]:
                        self.known[(api_version, entry["kind"])] = (
                            entry["name"],
                            bool(entry["namespaced"]),
                        )
            if key not in self.known:
                raise LookupError(f"{api_version} has no kind {kind}")
            return self.known[key]


_DISCOVERY = _Discovery()


def served(api_client: client.ApiClient, api_version: str, kind: str) -> bool:
    """Whether the API server serves ``kind`` in ``api_version`` (a CRD may be missing)."""
    try:
        _DISCOVERY.resource(api_client, api_version, kind)
    except LookupError:
        return False
    return True


def object_path(
    api_client: client.ApiClient, obj: Obj, *, namespace: str | None = None, named: bool = False
) -> str:
    """The collection URL of ``obj`` (or its own URL with ``named``), found by discovery.

    ``namespace`` (else ``metadata.namespace``) is used for namespaced kinds only.
    """
    api_version, kind = obj["apiVersion"], obj["kind"]
    plural, namespaced = _DISCOVERY.resource(api_client, api_version, kind)
    base = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
    if namespaced:
        ns = namespace or obj.get("metadata", {}).get("namespace") or "default"
        base = f"{base}/namespaces/{ns}"
    path = f"{base}/{plural}"
    return f"{path}/{obj['metadata']['name']}" if named else path


def create(
    api_client: client.ApiClient,
    obj: Obj,
    *,
    namespace: str | None = None,
    dry_run: bool = False,
    strict: bool = True,
) -> Reply:
    """POST ``obj`` (any kind) to its collection; ``dry_run`` is server-side ``dryRun=All``.

    ``strict`` asks for ``fieldValidation=Strict``: an unknown or duplicate field is a 400.
    """
    query = {"fieldValidation": "Strict" if strict else "Warn"}
    if dry_run:
        query["dryRun"] = "All"
    path = object_path(api_client, obj, namespace=namespace)
    return request(api_client, "POST", path, obj, query=query)


def delete(api_client: client.ApiClient, obj: Obj, *, namespace: str | None = None) -> Reply:
    """DELETE ``obj`` (background propagation); a 404 is a reply like any other."""
    path = object_path(api_client, obj, namespace=namespace, named=True)
    return request(api_client, "DELETE", path, {"propagationPolicy": "Background"})
