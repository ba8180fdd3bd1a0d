"""The constant-response webhook: the baseline every webhook pays (TLS, HTTP, the event loop).

Served like ``snapready serve`` (one uvicorn worker, uvloop, httptools, TLS >= 1.2, keep-alive
65 s, no access log): a POST answers ``allowed`` with no patch, with the request's uid echoed
(``--echo``: what an API server checks) or as a fixed body without reading the review (``make
bench``'s floor); ``GET /counts`` returns the POSTs seen per path, the server's own call counter.

Usage: ``python -m bench.harness.constant PORT CERT KEY [--echo]``
"""

from __future__ import annotations

import argparse
import ssl
import sys
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
import uvicorn

App = Callable[[dict[str, Any], Any, Any], Awaitable[None]]

FIXED_BODY = orjson.dumps(
    {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": {"uid": "00000000-0000-0000-0000-000000000000", "allowed": True},
    }
)


def constant_app(echo: bool) -> App:
    """The ASGI app: drains the body, answers ``allowed``; counts POSTs per path."""
    counts: Counter[str] = Counter()

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        chunks: list[bytes] = []
        more = True
        while more:
            message = await receive()
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        if scope["method"] == "GET":
            body = orjson.dumps(dict(counts))
        else:
            counts[scope["path"]] += 1
            body = answer(b"".join(chunks)) if echo else FIXED_BODY
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
        ]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    return app


def answer(request: bytes) -> bytes:
    """``allowed`` for the review in ``request``, its uid and apiVersion echoed."""
    review = orjson.loads(request)
    return orjson.dumps(
        {
            "apiVersion": review.get("apiVersion", "admission.k8s.io/v1"),
            "kind": "AdmissionReview",
            "response": {"uid": review["request"]["uid"], "allowed": True},
        }
    )


def serve(port: int, cert: str, key: str, *, echo: bool) -> None:
    """Serve :func:`constant_app` on 127.0.0.1 as ``snapready serve`` runs its app."""
    config = uvicorn.Config(
        constant_app(echo),
        host="127.0.0.1",
        port=port,
        ssl_certfile=cert,
        ssl_keyfile=key,
        loop="uvloop",
        http="httptools",
        log_config=None,
        access_log=False,
        server_header=False,
        lifespan="off",
        timeout_keep_alive=65,
    )
    config.load()
    assert config.ssl is not None
    config.ssl.minimum_version = ssl.TLSVersion.TLSv1_2
    uvicorn.Server(config).run()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("port", type=int)
    parser.add_argument("cert")
    parser.add_argument("key")
    parser.add_argument("--echo", action="store_true", help="answer with the request's uid")
    args = parser.parse_args()
    serve(args.port, args.cert, args.key, echo=args.echo)
    return 0


if __name__ == "__main__":
    sys.exit(main())
