"""Reading an admission request body under the hostile-input guards, before any parsing.

Content type must be JSON (415 otherwise), the declared and the streamed size stay under
``server.max_body_bytes`` (413 beyond), and every body held in memory counts against one
process-wide ``BodyBudget`` (503 when exhausted), so many slow large uploads cannot exhaust memory.
The read deadline lives in the server's protocol (``webhook.server.protocol``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from webhook.base.errors import BadRequest
from webhook.base.text import clip

JSON = "application/json"

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


class ClientGone(Exception):
    """The client disconnected before its body was read; nothing can be answered."""


def _header(scope: Scope, name: bytes) -> str | None:
    """The value of header ``name`` (lowercase bytes, as ASGI gives names), the first when the
    request repeats it; None when absent."""
    for key, value in scope["headers"]:
        if key == name:
            text: str = value.decode("latin-1")
            return text
    return None


def _content_type(scope: Scope) -> str:
    """The request's one ``Content-Type`` value (``""`` when it has none).

    Raises:
        BadRequest: (400) the header appears more than once. Content-Type is a singleton field
            (RFC 9110 sections 5.3 and 8.3): two values cannot be combined, and whichever one a
            server picked, a proxy in front of it may have picked the other.
    """
    values = [value for key, value in scope["headers"] if key == b"content-type"]
    if len(values) > 1:
        raise BadRequest(
            f"the request has {len(values)} Content-Type headers; "
            f"send one, {JSON} (RFC 9110 sections 5.3 and 8.3)",
            status=400,
        )
    return values[0].decode("latin-1") if values else ""


async def read_body(scope: Scope, receive: Receive, max_bytes: int, budget: BodyBudget) -> bytes:
    """Read the body, enforcing the content type and the size cap before parsing.

    Raises:
        BadRequest: wrong or missing content type (415, RFC 9110 section 15.5.16), more than
            one Content-Type header (400), over
            ``max_bytes`` (413) by ``Content-Length`` or while streaming (the rest is not
            read), or the in-flight ``budget`` is exhausted (503). On any error the bytes
            taken from ``budget`` are given back; on success the caller gives back
            ``len(body)``.
        ClientGone: the client disconnected mid-body.
    """
    content_type = _content_type(scope)
    if content_type.split(";", 1)[0].strip().lower() != JSON:
        got = f"got {clip(content_type)!r}" if content_type else "the request has none"
        raise BadRequest(f"content type must be {JSON}, {got}", status=415)
    declared = _header(scope, b"content-length")
    if declared is not None and declared.isdigit() and int(declared) > max_bytes:
        raise BadRequest(f"body of {declared} bytes exceeds the {max_bytes}-byte limit", status=413)
    chunks: list[bytes] = []
    size = 0
    more = True
    try:
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise ClientGone
            chunk: bytes = message.get("body", b"")
            more = message.get("more_body", False)
            if size + len(chunk) > max_bytes:
                raise BadRequest(f"body exceeds the {max_bytes}-byte limit", status=413)
            budget.take(len(chunk))
            size += len(chunk)
            chunks.append(chunk)
    except BaseException:
        budget.give(size)
        raise
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


class BodyBudget:
    """Bytes of request bodies held by this worker at once (event-loop thread only, no lock).

    Without it, ``max_concurrency`` bodies of ``max_body_bytes`` each could be buffered together
    (1024 x 7 MiB by default); with it, memory for bodies stays under ``limit`` and extra
    requests get 503, which the API server handles by its failure policy and retries of its client.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0

    def take(self, size: int) -> None:
        """Account ``size`` more bytes.

        Raises:
            BadRequest: 503 when the budget would be exceeded (nothing is taken then).
        """
        if self.used + size > self.limit:
            raise BadRequest("webhook busy: too many request bytes in flight; retry", status=503)
        self.used += size

    def give(self, size: int) -> None:
        """Return ``size`` bytes taken earlier."""
        self.used -= size
