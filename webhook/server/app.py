"""The HTTPS edge: a FastAPI app serving ``/mutate``, ``/validate``, ``/healthz`` and ``/readyz``.

Wire contract (k8s "Dynamic Admission Control"): the response is an AdmissionReview with the
request's ``apiVersion`` and ``response.uid`` echoed on every path. Broken requests get HTTP 400
(413 body over the cap, 415 a content type other than JSON, 503 in-flight body budget
exhausted) with a JSON error,
or an error review when the uid is known. Internal errors never escape as a bare 500: the failure
policy decides the answer.

FastAPI owns routing, 404/405 and the probes. The two admission routes are plain ASGI endpoints
(``ReviewEndpoint``), registered as FastAPI routes and also dispatched straight from
``SnapreadyApp.__call__`` for ``POST`` on their exact paths: the hot path builds no
``Request``/``Response`` objects, runs no body validation of its own and skips the middleware
stack (~16 us of a ~43 us unselected-pod review in-process; docs/performance.md).
Hostile-input guards run before any parsing: content type, size cap (declared and streamed) and
a process-wide budget of body bytes held in memory; the read deadline lives in the server's
protocol (``webhook.server.protocol``), where it costs a timer instead of a task timeout.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from typing import Any

import orjson
from fastapi import FastAPI, Request, Response
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Route

from webhook.admission.engine import Engine, admit
from webhook.base.errors import BadRequest
from webhook.base.types import Endpoint
from webhook.kube.responses import (
    HTTP_INTERNAL_ERROR,
    Decision,
    allowed,
    denied,
    finalize,
    malformed_review,
)
from webhook.kube.review import AdmissionReviewRequest, api_version_hint, parse_review
from webhook.server.body import JSON, BodyBudget, ClientGone, Receive, Scope, Send, read_body

log = logging.getLogger("snapready.admission")

Observer = Callable[[Endpoint, AdmissionReviewRequest, Decision, float], None]
"""Called after each answered review: (endpoint, review, decision, seconds). Logs and metrics."""
RejectHook = Callable[[str, int], None]
"""Called for each request refused before admission: (endpoint, HTTP status)."""

BLOCKING_GROUPS = frozenset({"podsnapshot.gke.io"})
"""API groups whose validation may do network I/O (bucket checks): run in a worker thread."""
_JSON_HEADERS = [(b"content-type", JSON.encode())]
_CLOSE = [(b"connection", b"close")]


def failure_decision(engine: Engine, error_id: str) -> Decision:
    """The answer to an internal error, following ``settings.failure_policy``.

    ``Fail`` denies with code 500 and the error id (also in the logs); ``Ignore`` allows with a
    warning, mirroring what the API server does with ``failurePolicy`` when a webhook fails.
    """
    text = f"snapready internal error {error_id}; see the webhook logs"
    if engine.settings.failure_policy == "Ignore":
        return allowed(warnings=(f"{text} (failurePolicy Ignore: admitted unchecked)",))
    return denied(f"{text} (failurePolicy Fail)", code=HTTP_INTERNAL_ERROR)


async def _respond(
    send: Send, status: int, payload: Any, headers: list[tuple[bytes, bytes]] | None = None
) -> None:
    body = orjson.dumps(payload)
    start_headers = [*_JSON_HEADERS, (b"content-length", str(len(body)).encode()), *(headers or [])]
    await send({"type": "http.response.start", "status": status, "headers": start_headers})
    await send({"type": "http.response.body", "body": body})


async def _error(send: Send, status: int, message: str, *, close: bool = False) -> None:
    await _respond(send, status, {"error": message, "code": status}, _CLOSE if close else None)


class AdmissionApp:
    """The admission side of the app: the engine, readiness, the observer hook and the input guards.

    Attributes:
        engine: the admission engine.
        observer: called after each answered review (logs, metrics); its errors are logged only.
        on_reject: called for each request refused before admission.
        shutting_down: set on SIGTERM by the server; ``/readyz`` then answers 503 at once.
        budget: in-flight body bytes (``settings.server.max_inflight_body_bytes``).
    """

    def __init__(
        self, engine: Engine, observer: Observer | None = None, on_reject: RejectHook | None = None
    ) -> None:
        self.engine = engine
        self.observer = observer
        self.on_reject = on_reject
        self.shutting_down = False
        server = engine.settings.server
        self.budget = BodyBudget(server.max_inflight_body_bytes)

    def ready(self) -> tuple[bool, dict[str, Any]]:
        """(ready, details): policies synced and not draining for shutdown."""
        state = self.engine.state()
        ok = state.synced and not self.shutting_down
        return ok, {"synced": state.synced, "shuttingDown": self.shutting_down, **state.details}

    async def handle(self, scope: Scope, receive: Receive, send: Send, endpoint: Endpoint) -> None:
        """Serve one review: 1. read (guards), 2. parse, 3. admit, 4. observe, 5. answer.

        The body's bytes stay counted in ``budget`` until the decision is made: the parsed
        object lives as long (a review waiting for its worker thread holds both).
        """
        started = time.perf_counter()
        server = self.engine.settings.server
        body: bytes | None = None
        try:
            # No timeout here: the server's protocol enforces server.request_timeout_seconds
            # from the request's first byte to its last
            # (webhook.server.protocol.HardenedHttpProtocol).
            body = await read_body(scope, receive, server.max_body_bytes, self.budget)
            review = parse_review(body)
            if review.request.kind.group in BLOCKING_GROUPS and endpoint == "validate":
                # Governance may call GCS (bounded by storage.timeout_seconds): off the loop.
                decision = await run_in_threadpool(self._decide, review, endpoint)
            else:
                decision = self._decide(review, endpoint)
        except ClientGone:
            return
        except BadRequest as exc:
            await self._reject(send, endpoint, exc, body)
            return
        finally:
            if body is not None:
                self.budget.give(len(body))
        if self.observer is not None:
            try:
                self.observer(endpoint, review, decision, time.perf_counter() - started)
            except Exception:
                log.exception("observer failed on uid %s", review.request.uid)
        wire = finalize(decision, uid=review.request.uid, api_version=review.api_version)
        # While draining, each answer closes its connection: the client's next request opens a
        # new one, which the Service routes to another replica once our endpoint is removed,
        # instead of racing the listener's close on a kept-alive connection.
        await _respond(send, 200, wire, _CLOSE if self.shutting_down else None)

    def _decide(self, review: AdmissionReviewRequest, endpoint: Endpoint) -> Decision:
        try:
            return admit(review.request, endpoint, self.engine)
        except RecursionError:
            # Within orjson's depth limit (1024) but deeper than Python's recursion limit allows
            # the rules to walk: a broken request, not our failure.
            return denied("malformed AdmissionReview: object nested too deeply", code=400)
        except Exception:
            error_id = uuid.uuid4().hex[:12]
            log.exception("internal error %s on uid %s", error_id, review.request.uid)
            decision = failure_decision(self.engine, error_id)
            decision.audit["internal_error"] = error_id
            return decision

    async def _reject(
        self, send: Send, endpoint: Endpoint, exc: BadRequest, body: bytes | None = None
    ) -> None:
        """Answer a broken request: an error review when its uid is known, else a JSON error."""
        if self.on_reject is not None:
            self.on_reject(endpoint, exc.status)
        extra = {"endpoint": endpoint, "code": exc.status, "uid": exc.uid}
        log.info("rejected request: %s", exc, extra=extra)
        if exc.uid is None or exc.status != 400 or body is None:
            # The body may be partly unread: close rather than parse the rest as a next request.
            await _error(send, exc.status, str(exc), close=body is None)
            return
        wire = malformed_review(str(exc), uid=exc.uid, api_version=api_version_hint(body))
        await _respond(send, 200, wire)


class ReviewEndpoint:
    """The ASGI endpoint of one admission route (``/mutate`` or ``/validate``)."""

    def __init__(self, admission: AdmissionApp, endpoint: Endpoint) -> None:
        self.admission = admission
        self.endpoint: Endpoint = endpoint

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve one review through ``AdmissionApp.handle``."""
        await self.admission.handle(scope, receive, send, self.endpoint)


class SnapreadyApp(FastAPI):
    """FastAPI with a front door for the admission routes.

    ``POST /mutate`` and ``POST /validate`` go straight to their ``ReviewEndpoint``: FastAPI's
    middleware (error and exception middleware, the exit stack, the router's path matching) adds
    nothing there, as ``AdmissionApp.handle`` answers every error itself, and costs ~16 us per
    review. Anything else (other methods on those paths, other paths, lifespan) takes the whole
    FastAPI stack, so 404/405 and the probes behave as usual.
    """

    review_endpoints: dict[str, ReviewEndpoint]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Dispatch one ASGI connection (see the class docstring)."""
        if scope["type"] == "http" and scope["method"] == "POST":
            endpoint = self.review_endpoints.get(scope["path"])
            if endpoint is not None:  # straight to the handler: one coroutine frame less
                await endpoint.admission.handle(scope, receive, send, endpoint.endpoint)
                return
        await super().__call__(scope, receive, send)


def create_app(
    engine: Engine, observer: Observer | None = None, on_reject: RejectHook | None = None
) -> SnapreadyApp:
    """Build the FastAPI application around ``engine``.

    Routes: ``POST /mutate``, ``POST /validate`` (AdmissionReview in and out); ``GET`` or
    ``HEAD``: ``/healthz`` (process alive), ``/readyz`` (200 when policies are synced and not
    shutting down, else 503).
    ``app.state.admission`` is the ``AdmissionApp`` (the server flips its ``shutting_down``).
    """
    admission = AdmissionApp(engine, observer, on_reject)
    # No docs/OpenAPI routes (nothing to browse on a webhook) and no slash redirects: the API
    # server does not follow redirects, so "/mutate/" must be a plain 404.
    app = SnapreadyApp(
        title="snapready", docs_url=None, redoc_url=None, openapi_url=None, redirect_slashes=False
    )
    app.state.admission = admission
    app.review_endpoints = {}
    routes: tuple[tuple[str, Endpoint], ...] = (("/mutate", "mutate"), ("/validate", "validate"))
    for path, endpoint in routes:
        review_endpoint = app.review_endpoints[path] = ReviewEndpoint(admission, endpoint)
        # Also a FastAPI route (a non-function endpoint is mounted as a raw ASGI app), so the
        # route table stays the one description of the app.
        app.router.routes.append(Route(path, review_endpoint, methods=["POST"]))

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> Response:
        # 404/405 in the same JSON shape as every other error of this edge.
        body = orjson.dumps({"error": str(exc.detail), "code": exc.status_code})
        return Response(body, exc.status_code, headers=exc.headers, media_type=JSON)

    # HEAD too: load balancers and uptime checkers probe with it (RFC 9110 9.3.2: the same
    # status and headers as GET, no body; uvicorn leaves the body out).
    @app.api_route("/healthz", methods=["GET", "HEAD"])
    async def healthz() -> Response:
        return Response(orjson.dumps({"status": "ok"}), media_type=JSON)

    @app.api_route("/readyz", methods=["GET", "HEAD"])
    async def readyz() -> Response:
        ok, details = admission.ready()
        return Response(orjson.dumps({"ready": ok, **details}), 200 if ok else 503, media_type=JSON)

    return app
