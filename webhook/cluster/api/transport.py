"""``KubeTransport``: the API server's JSON through the ``kubernetes`` client's ``ApiClient``.

Paginated lists, watch streams read line by line, single GETs and the writes (create, delete
with a uid precondition, JSON/merge/strategic patches), with 404 -> ``NotServed``, 409 ->
``Conflict``, 410 -> ``Gone`` and everything else -> ``TransportError``. Raw JSON, no model
classes: only the fields the caches read are ever looked at. ``client`` builds it from the
configuration; ``manager`` wires it into the caches and, fenced, into the controllers' writes.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any
from urllib.parse import parse_qsl

import orjson
import urllib3
from kubernetes import client as kube_client
from kubernetes.watch.watch import iter_resp_lines

from webhook.base.types import RawObject
from webhook.cluster.api.syncing import Conflict, Gone, NotServed, TransportError, describe

log = logging.getLogger("snapready.kube")


class KubeWatchStream:
    """One watch response, iterated line by line (one JSON event per line)."""

    def __init__(self, response: urllib3.BaseHTTPResponse) -> None:
        self._response = response

    def __iter__(self) -> Iterator[RawObject]:
        finished = False
        try:
            for line in iter_resp_lines(self._response):  # type: ignore[no-untyped-call]
                if line.strip():
                    event = orjson.loads(line)
                    if isinstance(event, dict):
                        yield event
            finished = True
        except (urllib3.exceptions.HTTPError, OSError, orjson.JSONDecodeError) as exc:
            raise TransportError(f"watch stream broken: {describe(exc)}") from None
        finally:
            if not finished:  # unread or broken data: never hand this connection out again
                self._response.close()
            self._response.release_conn()

    def close(self) -> None:
        """Unblock a reader waiting on the socket (shutdown of the read side), then close."""
        # Already finished or released: nothing to interrupt.
        with contextlib.suppress(RuntimeError, ValueError, OSError):
            self._response.shutdown()


JSON = "application/json"
METADATA_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
METADATA_ONE = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
"""Accept headers of a metadata-only client (client-go's metadata client; apimachinery
``meta.k8s.io/v1`` PartialObjectMetadata): a list asks for ``PartialObjectMetadataList``, a GET
and a watch (its events) for ``PartialObjectMetadata``. The API server refuses (406) a list type
on a GET instead of trying the next one, so each request sends exactly one."""


def _document(path: str, raw: bytes) -> RawObject:
    """``raw`` decoded as a JSON object.

    Raises:
        TransportError: not JSON, or not an object.
    """
    try:
        document = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise TransportError(f"{path}: {describe(exc)}") from None
    if not isinstance(document, dict):
        raise TransportError(f"{path}: expected a JSON object")
    return document


class KubeTransport:
    """``syncing.Transport`` over ``kubernetes.client.ApiClient`` (raw JSON, no model classes).

    Raw JSON keeps CPU and memory low: only the fields the caches read are ever looked at.
    """

    def __init__(
        self, api_client: Any, request_timeout: float, *, metadata_only: bool = False
    ) -> None:
        self._client = api_client
        self._timeout = request_timeout
        self._metadata_only = metadata_only

    def metadata_only(self) -> KubeTransport:
        """The same connection asking for ``PartialObjectMetadata`` (``METADATA_ONE``): GETs,
        lists and watches answer ``metadata`` alone, so a Secret's data never reaches this
        process. No plain-JSON fallback is offered: a server that cannot answer metadata-only
        fails the request (406) rather than sending whole objects."""
        return KubeTransport(self._client, self._timeout, metadata_only=True)

    def _accept(self, metadata: str) -> str:
        """``metadata`` for a metadata-only transport, plain JSON otherwise."""
        return metadata if self._metadata_only else JSON

    def _request(
        self,
        path: str,
        query: list[tuple[str, Any]],
        timeout: Any,
        *,
        method: str = "GET",
        body: Any = None,
        content_type: str | None = None,
        accept: str = JSON,
    ) -> Any:
        if "?" in path:  # a collection path with its own query (a label selector)
            path, own = path.split("?", 1)
            query = [*parse_qsl(own), *query]
        headers = {"Accept": accept}
        if content_type is not None:
            headers["Content-Type"] = content_type
        method, url, headers, body, post = self._client.param_serialize(
            method,
            path,
            query_params=query,
            header_params=headers,
            body=body,
            auth_settings=["BearerToken"],
        )
        try:
            response = self._client.call_api(
                method, url, headers, body, post, _request_timeout=timeout
            )
        except kube_client.ApiException as exc:
            raise TransportError(f"HTTP {exc.status} {exc.reason}") from None
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise TransportError(describe(exc)) from None
        if 200 <= response.status <= 299:
            return response
        detail = _status_message(response.read())
        if response.status == 404:
            raise NotServed(f"{path}: {detail}")
        if response.status == 410:
            raise Gone(detail)
        if response.status == 409:
            raise Conflict(f"HTTP 409: {detail}")
        raise TransportError(f"HTTP {response.status} {response.reason}: {detail}")

    def _raw(self, path: str, query: list[tuple[str, Any]], **request: Any) -> bytes:
        response = self._request(path, query, self._timeout, **request)
        try:
            return bytes(response.read())
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise TransportError(f"{path}: {describe(exc)}") from None

    def _json(self, path: str, query: list[tuple[str, Any]], **request: Any) -> RawObject:
        return _document(path, self._raw(path, query, **request))

    def list(
        self, path: str, *, page_size: int, each: Callable[[RawObject], None] | None = None
    ) -> tuple[list[RawObject], str]:
        """All items, following ``metadata.continue`` (pages of ``page_size``).

        With ``each``, every item is handed to it as its page arrives and the returned list is
        empty: a 20,000-pod list then never holds more than one page of decoded JSON in memory
        (collecting every page first peaked at ~900 MB RSS at that scale). The next page's
        bytes are fetched by a helper thread while ``each`` converts this page, so the API
        server's work and the network overlap the decoding (client-go's reflector pages
        sequentially; at 20,000 pods the list took ~19 s, half of it waiting; docs/performance.md).

        Raises:
            TransportError, NotServed, Gone: as a single GET (for any page).
        """
        items: list[RawObject] = []
        accept = self._accept(METADATA_LIST)

        def query(token: str) -> list[tuple[str, Any]]:
            return [("limit", page_size), *([("continue", token)] if token else [])]

        with ThreadPoolExecutor(1, thread_name_prefix="snapready-page") as pages:
            pending: Future[bytes] | None = None
            raw = self._raw(path, query(""), accept=accept)
            try:
                while True:
                    document = _document(path, raw)
                    del raw
                    metadata = document.get("metadata") or {}
                    token = str(metadata.get("continue") or "")
                    if token:
                        pending = pages.submit(self._raw, path, query(token), accept=accept)
                    page = [i for i in document.pop("items", None) or [] if isinstance(i, dict)]
                    del document
                    if each is None:
                        items.extend(page)
                    else:
                        for item in page:
                            each(item)
                    del page
                    if pending is None:
                        return items, str(metadata.get("resourceVersion") or "")
                    raw, pending = pending.result(), None
            finally:
                if pending is not None:  # an error while converting: drop the page in flight
                    pending.cancel()

    def watch(self, path: str, *, resource_version: str, timeout_seconds: int) -> KubeWatchStream:
        """Open a watch; the read timeout outlasts the server-side ``timeoutSeconds``."""
        query: list[tuple[str, Any]] = [
            ("watch", "true"),
            ("allowWatchBookmarks", "true"),
            ("resourceVersion", resource_version),
            ("timeoutSeconds", timeout_seconds),
        ]
        response = self._request(
            path,
            query,
            (self._timeout, timeout_seconds + self._timeout),
            accept=self._accept(METADATA_ONE),
        )
        return KubeWatchStream(response.response)

    def get(self, path: str) -> RawObject:
        """One JSON document."""
        return self._json(path, [], accept=self._accept(METADATA_ONE))

    def patch(
        self, path: str, ops: Sequence[RawObject], *, field_manager: str = "snapready"
    ) -> RawObject:
        """Apply a JSON Patch (RFC 6902) to one object; returns the patched object.

        ``fieldManager`` names snapready in the object's managedFields, so ``kubectl`` and Helm
        show who owns the fields it writes.
        """
        return self._json(
            path,
            [("fieldManager", field_manager)],
            method="PATCH",
            body=list(ops),
            content_type="application/json-patch+json",
        )

    def create(self, path: str, body: RawObject) -> RawObject:
        """POST ``body`` to a collection; returns the created object (409 -> ``Conflict``)."""
        return self._json(
            path,
            [("fieldManager", "snapready")],
            method="POST",
            body=body,
            content_type="application/json",
        )

    def delete(self, path: str, *, uid: str = "") -> RawObject:
        """DELETE one object, with ``preconditions.uid`` when ``uid`` is given (a 409 then
        means the name now belongs to another object: ``Conflict``); returns the API server's
        answer (the object, marked for deletion when it has finalizers, or a Status)."""
        body: RawObject = {"apiVersion": "v1", "kind": "DeleteOptions"}
        if uid:
            body["preconditions"] = {"uid": uid}
        return self._json(path, [], method="DELETE", body=body, content_type="application/json")

    def merge_patch(
        self, path: str, patch: RawObject, *, field_manager: str = "snapready"
    ) -> RawObject:
        """Apply a JSON merge patch (RFC 7386) to one object; returns the patched object."""
        return self._json(
            path,
            [("fieldManager", field_manager)],
            method="PATCH",
            body=patch,
            content_type="application/merge-patch+json",
        )

    def strategic_patch(
        self, path: str, patch: RawObject, *, field_manager: str = "snapready"
    ) -> RawObject:
        """Apply a strategic merge patch (built-in kinds only): lists with a merge key, such as a
        pod's ``status.conditions`` (key ``type``), are merged by it, not replaced."""
        return self._json(
            path,
            [("fieldManager", field_manager)],
            method="PATCH",
            body=patch,
            content_type="application/strategic-merge-patch+json",
        )


def _status_message(body: bytes) -> str:
    """The ``message`` of a ``Status`` body, else the body's first line (a 404 is plain text)."""
    try:
        status = orjson.loads(body)
    except orjson.JSONDecodeError:
        return body.decode("utf-8", "replace").strip().splitlines()[0][:160] if body.strip() else ""
    return str(status.get("message", ""))[:400] if isinstance(status, dict) else ""
