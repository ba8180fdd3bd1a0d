"""The Kubernetes API edge of cluster mode: the only module that imports ``kubernetes``.

``KubeTransport`` speaks the API's JSON through the client's ``ApiClient`` (kubeconfig or
in-cluster service-account auth, TLS, connection pool): paginated lists, watch streams read line
by line, single GETs, with 404 -> ``NotServed``, 410 -> ``Gone`` and everything else ->
``TransportError``. ``open_cluster_source`` wires it into a ``ClusterSource`` (``cluster.py``),
which keeps the caches and the ``ClusterState`` the admission path reads.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

import orjson
import urllib3
import yaml
from kubernetes import client as kube_client
from kubernetes import config as kube_config
from kubernetes.watch.watch import iter_resp_lines

from webhook.base.config import Settings
from webhook.base.errors import ConfigError
from webhook.base.types import RawObject
from webhook.cluster.syncing import Conflict, Gone, NotServed, TransportError, describe

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
        sequentially; at 20,000 pods the list took ~19 s, half of it waiting; issue 35).

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


def api_client(settings: Settings) -> Any:
    """An ``ApiClient`` from ``settings.source.kubeconfig``, else the in-cluster service account.

    Raises:
        ConfigError: the kubeconfig is missing/invalid, or not running in a pod without one.
    """
    configuration = kube_client.Configuration()
    kubeconfig = settings.source.kubeconfig
    try:
        if kubeconfig is not None:
            kube_config.load_kube_config(  # type: ignore[no-untyped-call]
                config_file=str(kubeconfig),
                client_configuration=configuration,
                persist_config=False,
            )
        else:
            kube_config.load_incluster_config(  # type: ignore[no-untyped-call]
                client_configuration=configuration
            )
    except (kube_config.ConfigException, OSError, ValueError, TypeError, yaml.YAMLError) as exc:
        where = f"kubeconfig {kubeconfig}" if kubeconfig else "in-cluster config"
        raise ConfigError(f"cannot load {where}: {config_problem(exc)}") from None
    return kube_client.ApiClient(configuration)


def config_problem(exc: BaseException) -> str:
    """One line saying what is wrong with a kubeconfig: where its YAML breaks (a parser error
    is several lines), that it is not a mapping (the client fails on a list with a TypeError
    about indices), else ``describe``."""
    if isinstance(exc, yaml.MarkedYAMLError) and exc.problem_mark is not None:
        mark = exc.problem_mark
        return f"invalid YAML at line {mark.line + 1}, column {mark.column + 1}: {exc.problem}"
    if isinstance(exc, yaml.YAMLError):
        return f"invalid YAML: {describe(exc)}"
    if isinstance(exc, TypeError | AttributeError) and "indices" in str(exc):
        return "not a kubeconfig (expected a YAML mapping with clusters, contexts and users)"
    return describe(exc)


SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


@dataclass(frozen=True)
class Connection:
    """A transport for a one-shot command (``snapready status``/``explain``).

    Attributes:
        transport: the ``KubeTransport``; ``close``: releases its connection pool.
        namespace: the kubeconfig context's namespace (in a pod: the service account's), else
            ``default``, like ``kubectl``.
        where: what was loaded (``kubeconfig PATH`` or ``in-cluster config``), for messages.
        host: the API server's URL.
    """

    transport: KubeTransport
    namespace: str
    where: str
    close: Callable[[], None]
    host: str = ""


def connect(kubeconfig: Path | None, *, request_timeout: float) -> Connection:
    """Connect the way ``kubectl`` does: ``kubeconfig``, else ``$KUBECONFIG`` (``:``-separated
    files are merged), else ``~/.kube/config`` when it exists, else the in-cluster service
    account. Nothing is requested from the API server yet.

    Raises:
        ConfigError: the configuration cannot be loaded (the message names which one).
    """
    configuration = kube_client.Configuration()
    config_file = str(kubeconfig) if kubeconfig is not None else os.environ.get("KUBECONFIG")
    if not config_file and Path("~/.kube/config").expanduser().is_file():
        config_file = str(Path("~/.kube/config").expanduser())
    where = f"kubeconfig {config_file}" if config_file else "in-cluster config"
    try:
        if config_file:
            contexts = kube_config.list_kube_config_contexts
            _, current = contexts(config_file)  # type: ignore[no-untyped-call]
            kube_config.load_kube_config(  # type: ignore[no-untyped-call]
                config_file=config_file, client_configuration=configuration, persist_config=False
            )
            context = current.get("context") if isinstance(current, dict) else None
            namespace = context.get("namespace") if isinstance(context, dict) else None
        else:
            kube_config.load_incluster_config(  # type: ignore[no-untyped-call]
                client_configuration=configuration
            )
            namespace = _read_text(SERVICE_ACCOUNT_NAMESPACE)
    except (
        kube_config.ConfigException,
        OSError,
        ValueError,
        TypeError,
        KeyError,
        yaml.YAMLError,
    ) as exc:
        hint = "" if config_file else " (no --kubeconfig, $KUBECONFIG or ~/.kube/config)"
        raise ConfigError(f"cannot load {where}{hint}: {config_problem(exc)}") from None
    client = kube_client.ApiClient(configuration)
    return Connection(
        KubeTransport(client, request_timeout),
        namespace if isinstance(namespace, str) and namespace else "default",
        where,
        client.close,
        str(configuration.host),
    )


def _read_text(path: Path) -> str | None:
    try:
        return path.read_text().strip() or None
    except OSError:
        return None
