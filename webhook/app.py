"""The HTTPS edge: FastAPI routes for ``/mutate``, ``/validate``, ``/healthz`` and ``/readyz``.

Wire contract (k8s "Dynamic Admission Control"): the response is an AdmissionReview with the
request's ``apiVersion`` and ``response.uid`` echoed on every path. Broken requests get HTTP 400
(413 when the body exceeds the cap) with a JSON error, or an error review when the uid is known.
Internal errors never escape as a bare 500: the failure policy decides the answer.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from typing import Any

import orjson
from fastapi import FastAPI, Request
from fastapi.responses import Response

from webhook.admission import Engine, admit
from webhook.errors import BadRequest
from webhook.responses import (
    HTTP_INTERNAL_ERROR,
    Decision,
    allowed,
    denied,
    finalize,
)
from webhook.review import AdmissionReviewRequest, api_version_hint, parse_review
from webhook.types import Endpoint

log = logging.getLogger("snapready.admission")
JSON = "application/json"

Observer = Callable[[Endpoint, AdmissionReviewRequest, Decision, float], None]
"""Called after each answered review: (endpoint, review, decision, seconds). Logs and metrics."""


def _json(status: int, payload: Any) -> Response:
    return Response(orjson.dumps(payload), status_code=status, media_type=JSON)


def _error(status: int, message: str) -> Response:
    return _json(status, {"error": message, "code": status})


async def read_body(request: Request, max_bytes: int) -> bytes:
    """Read the body, enforcing the content type and the size cap before parsing.

    Raises:
        BadRequest: wrong content type (400), or over ``max_bytes`` (413) by ``Content-Length``
            or while streaming (the rest is not read).
    """
    content_type = request.headers.get("content-type", "")
    if content_type.split(";", 1)[0].strip().lower() != JSON:
        raise BadRequest(f"content type must be {JSON}, got {content_type or 'none'!r}")
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > max_bytes:
        raise BadRequest(f"body of {declared} bytes exceeds the {max_bytes}-byte limit", status=413)
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > max_bytes:
            raise BadRequest(f"body exceeds the {max_bytes}-byte limit", status=413)
        chunks.append(chunk)
    return b"".join(chunks)


def failure_decision(engine: Engine, error_id: str) -> Decision:
    """The answer to an internal error, following ``settings.failure_policy``.

    ``Fail`` denies with code 500 and the error id (also in the logs); ``Ignore`` allows with a
    warning, mirroring what the API server does with ``failurePolicy`` when a webhook fails.
    """
    text = f"snapready internal error {error_id}; see the webhook logs"
    if engine.settings.failure_policy == "Ignore":
        return allowed(warnings=(f"{text} (failurePolicy Ignore: admitted unchecked)",))
    return denied(f"{text} (failurePolicy Fail)", code=HTTP_INTERNAL_ERROR)


class AdmissionApp:
    """State shared by the routes: the engine, readiness and the observer hook."""

    def __init__(self, engine: Engine, observer: Observer | None = None) -> None:
        self.engine = engine
        self.observer = observer
        self.shutting_down = False

    def ready(self) -> tuple[bool, dict[str, Any]]:
        """(ready, details): policies synced and not draining for shutdown."""
        state = self.engine.state()
        ok = state.synced and not self.shutting_down
        return ok, {
            "synced": state.synced,
            "shuttingDown": self.shutting_down,
            **dict(state.details),
        }

    async def handle(self, request: Request, endpoint: Endpoint) -> Response:
        """Serve one review: read, parse, admit, finalize (numbered in the module docstring)."""
        started = time.perf_counter()
        max_bytes = self.engine.settings.server.max_body_bytes
        body = b""
        try:
            body = await read_body(request, max_bytes)
            review = parse_review(body)
        except BadRequest as exc:
            if exc.uid is None or exc.status != 400:
                log.info("rejected request: %s", exc, extra={"endpoint": endpoint})
                return _error(exc.status, str(exc))
            decision = denied(f"malformed AdmissionReview: {exc}", code=400)
            return _json(200, finalize(decision, uid=exc.uid, api_version=api_version_hint(body)))
        try:
            decision = admit(review.request, endpoint, self.engine)
        except Exception:
            error_id = uuid.uuid4().hex[:12]
            log.exception("internal error %s on uid %s", error_id, review.request.uid)
            decision = failure_decision(self.engine, error_id)
            decision.audit["internal_error"] = error_id
        if self.observer is not None:
            self.observer(endpoint, review, decision, time.perf_counter() - started)
        wire = finalize(decision, uid=review.request.uid, api_version=review.api_version)
        return Response(orjson.dumps(wire), media_type=JSON)


def create_app(engine: Engine, observer: Observer | None = None) -> FastAPI:
    """Build the FastAPI application around ``engine``.

    Routes: ``POST /mutate``, ``POST /validate`` (AdmissionReview in and out), ``GET /healthz``
    (process alive), ``GET /readyz`` (200 when policies are synced and not shutting down, else 503).
    """
    state = AdmissionApp(engine, observer)
    app = FastAPI(title="snapready", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.admission = state

    @app.post("/mutate")
    async def mutate(request: Request) -> Response:
        return await state.handle(request, "mutate")

    @app.post("/validate")
    async def validate(request: Request) -> Response:
        return await state.handle(request, "validate")

    @app.get("/healthz")
    async def healthz() -> Response:
        return _json(200, {"status": "ok"})

    @app.get("/readyz")
    async def readyz() -> Response:
        ok, details = state.ready()
        return _json(200 if ok else 503, {"ready": ok, **details})

    return app
