"""The HTTP protocol of the webhook: httptools with a request deadline and a header cap.

``HardenedHttpProtocol`` closes connections whose request (headers and body) does not arrive
within ``server.request_timeout_seconds`` and answers 431 to a request head larger than
``server.max_header_bytes``, counting both refusals (and uvicorn's 503 at
``server.max_concurrency``) through the app's reject hook. ``protocol_class`` configures it from
settings; ``webhook.server.runner`` hands it to uvicorn.
"""

from __future__ import annotations

import asyncio
import urllib.parse
from typing import Any

import httptools
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from webhook.base.config import Settings
from webhook.server.app import RejectHook

ENDPOINT_LABELS = {"/mutate": "mutate", "/validate": "validate"}
"""Metric label of a refused request by path; any other path is ``other``, an unknown one
``unknown`` (a fixed label set, whatever the client sends)."""


class CoalescedWrites:
    """A transport whose writes made in one event-loop turn leave as one write.

    uvicorn writes a response's head and its body with two ``transport.write`` calls. On a TLS
    transport each is its own TLS record and ``send`` syscall, and the API server's client reads
    (and wakes up for) each: measured under ``make bench-cluster`` the two writes were ~14 % of
    the event loop's busy time. Here the first write of a turn is held and
    ``loop.call_soon`` flushes everything written meanwhile in one ``write`` at the end of the
    turn (the ``TCP_CORK`` idea, bounded to one loop iteration). ``close`` flushes first, so no
    written byte is lost; ``abort`` drops them, as a real abort does. Every other attribute is
    the wrapped transport's.
    """

    __slots__ = ("_loop", "_pending", "_transport")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._pending: list[bytes] | None = None

    def write(self, data: bytes | bytearray | memoryview) -> None:
        """Queue ``data``; it is written at the end of this loop turn (or by ``close``)."""
        if not data:
            return
        if self._pending is None:
            self._pending = [bytes(data)]
            self._loop.call_soon(self.flush)
        else:
            self._pending.append(bytes(data))

    def writelines(self, chunks: Any) -> None:
        """``write`` each chunk."""
        for chunk in chunks:
            self.write(chunk)

    def flush(self) -> None:
        """Write what is queued now, as one write (no-op when nothing is, or once closing)."""
        pending, self._pending = self._pending, None
        if pending and not self._transport.is_closing():
            self._transport.write(pending[0] if len(pending) == 1 else b"".join(pending))

    def close(self) -> None:
        """Flush, then close the wrapped transport."""
        self.flush()
        self._transport.close()

    def abort(self) -> None:
        """Drop what is queued and abort the wrapped transport."""
        self._pending = None
        self._transport.abort()

    def is_closing(self) -> bool:
        """Whether the wrapped transport is closing or closed."""
        return self._transport.is_closing()

    def get_write_buffer_size(self) -> int:
        """Bytes queued here plus the wrapped transport's buffer."""
        queued = sum(map(len, self._pending)) if self._pending else 0
        return queued + self._transport.get_write_buffer_size()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class HardenedHttpProtocol(HttpToolsProtocol):
    """httptools protocol with one deadline per request for its headers and body.

    uvicorn times out idle keep-alive connections but not a client that opens a connection (or
    starts a request) and then sends its headers or body slowly: enough of those would hold every
    ``limit_concurrency`` slot. The deadline (``server.request_timeout_seconds``) runs from the
    connection (after TLS) or from a request's first byte until the request is complete; when it
    fires the connection is closed, after a 408 answer if the headers were complete. Kept here
    rather than around the app's body read: a timer per request costs ~1 us, an
    ``asyncio.timeout`` block several (measured with py-spy under ``make bench``).
    """

    request_timeout: float = 10.0
    max_header_bytes: int = 64 * 1024

    @staticmethod
    def on_reject(endpoint: str, code: int) -> None:
        """Called for each request refused here (408, 431) or by uvicorn at the concurrency
        limit (503): (endpoint label, HTTP status). ``protocol_class`` sets it; no-op here."""

    _deadline: asyncio.TimerHandle | None = None
    _awaiting_head = True
    """True from a connection's start, and after each request, until the next head is complete."""
    _head_bytes = 0
    _ends = 0
    """Request heads and requests completed on this connection: tells whether a chunk ended one
    (its bytes then belong to a finished head or body, not to a head still coming)."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        """Accept the connection (its writes coalesced per loop turn, ``CoalescedWrites``) and
        start the deadline for its first request."""
        super().connection_made(CoalescedWrites(transport, self.loop))  # type: ignore[arg-type]
        self._arm_deadline()

    def data_received(self, data: bytes) -> None:
        """Feed the parser; count bytes while a request head is incomplete (431 over the cap).

        httptools/llhttp buffer a header of any size (no limit of their own), so without this
        a client could grow memory by sending one endless header. A chunk received while a head
        is awaited is measured before parsing, up to the blank line that ends the head when it
        holds one (a whole oversized head can arrive in one chunk); after parsing, chunks that
        end no head or request are counted. A chunk that ends one request and starts a
        pipelined next is not measured: the cap can be overshot by about a chunk there.
        """
        if self._awaiting_head:
            end = data.find(b"\r\n\r\n")
            head = len(data) if end < 0 else end + 4
            if self._head_bytes + head > self.max_header_bytes:
                if not self.transport.is_closing():
                    # Nothing of this head was parsed: its request line gives the metric label.
                    line = data.split(b"\r\n", 1)[0] if self._head_bytes == 0 else b""
                    self._reject_head(_request_line_label(line))
                return
        ends = self._ends
        super().data_received(data)
        if not self._awaiting_head or self._ends != ends:
            return
        self._head_bytes += len(data)
        if self._head_bytes > self.max_header_bytes and not self.transport.is_closing():
            self._reject_head()

    def on_headers_complete(self) -> None:
        """The head is in: stop counting header bytes (the body has its own cap in the app).

        uvicorn answers 503 itself (``limit_concurrency``) when, at this point, it holds as
        many connections or tasks as the limit (``httptools_impl.on_headers_complete``); the
        same test is made here, before it, to count that refusal. Only public attributes are
        read; a request that starts a new cycle (not an upgrade) is counted.
        """
        self._awaiting_head = False
        self._head_bytes = 0
        self._ends += 1
        limit = self.limit_concurrency
        busy = limit is not None and (len(self.connections) >= limit or len(self.tasks) >= limit)
        cycle = self.cycle
        super().on_headers_complete()
        if busy and self.cycle is not cycle:
            self.on_reject(self._endpoint_label(), 503)

    def on_message_begin(self) -> None:
        """First byte of a request: (re)start the deadline."""
        super().on_message_begin()
        self._arm_deadline()

    def on_message_complete(self) -> None:
        """The whole request is in: no deadline while the app works on it."""
        self._cancel_deadline()
        self._awaiting_head = True  # keep-alive: the next bytes are the next request's head
        self._ends += 1
        super().on_message_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        """Drop the timer with the connection."""
        self._cancel_deadline()
        super().connection_lost(exc)

    def _reject_head(self, label: str | None = None) -> None:
        """431 (RFC 6585) and close; only the close when a response is already under way.
        ``label``: the metric's endpoint label when the parser has not seen the request line."""
        self._cancel_deadline()
        cycle = self.cycle
        if cycle is None or cycle.response_complete:
            self.transport.write(HEADERS_TOO_LARGE_RESPONSE)
        self._count_and_close(431, label)

    def _arm_deadline(self) -> None:
        self._cancel_deadline()
        self._deadline = self.loop.call_later(self.request_timeout, self._too_slow)

    def _cancel_deadline(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _too_slow(self) -> None:
        self._deadline = None
        if self.transport.is_closing():
            return
        cycle = self.cycle
        if cycle is not None and not cycle.response_started:
            # Headers of the current request are in (its cycle exists), the body is not.
            self.transport.write(REQUEST_TIMEOUT_RESPONSE)
        # Counted also when nothing could be answered (no complete head, or no byte at all on a
        # new connection): the client is refused for being too slow either way.
        self._count_and_close(408)

    def _count_and_close(self, code: int, label: str | None = None) -> None:
        """Count the refusal, then close: a client that sees the close can already scrape it.

        The close starts the TLS shutdown, bounded by ``TLS_SHUTDOWN_SECONDS`` (the listener's
        ``ssl_shutdown_timeout``): the connection's slot and descriptor return then at the
        latest, whether or not the client reads or answers.
        """
        try:
            self.on_reject(label or self._endpoint_label(), code)
        finally:
            self.transport.close()

    def _endpoint_label(self) -> str:
        """``mutate``/``validate``/``other`` for the current request's path, ``unknown``
        before its URL is complete (the head is in, or at least one header is)."""
        if not self._awaiting_head:
            return ENDPOINT_LABELS.get(str(self.scope.get("path", "")), "other")
        if self.headers and self.url:  # a header was parsed: the request line is complete
            return _url_label(self.url)
        return "unknown"


def _url_label(url: bytes) -> str:
    """The endpoint label of a request target (``/mutate?timeout=10s`` is ``mutate``)."""
    try:
        raw = httptools.parse_url(url).path or b""
    except httptools.HttpParserInvalidURLError:
        return "other"
    path = urllib.parse.unquote(raw.decode("ascii", "replace"))
    return ENDPOINT_LABELS.get(path, "other")


def _request_line_label(line: bytes) -> str | None:
    """The endpoint label of a raw request line (``POST /mutate HTTP/1.1``); None when it is
    not one (incomplete or malformed)."""
    parts = line.split(b" ")
    return _url_label(parts[1]) if len(parts) == 3 and parts[2].startswith(b"HTTP/") else None


def _json_error(status: bytes, body: bytes) -> bytes:
    """A complete ``connection: close`` HTTP/1.1 response with a JSON error body."""
    return (
        b"HTTP/1.1 " + status + b"\r\ncontent-type: application/json\r\n"
        b"content-length: " + str(len(body)).encode() + b"\r\n"
        b"connection: close\r\n\r\n" + body
    )


REQUEST_TIMEOUT_BODY = b'{"error":"request not received in time","code":408}'
REQUEST_TIMEOUT_RESPONSE = _json_error(b"408 Request Timeout", REQUEST_TIMEOUT_BODY)
HEADERS_TOO_LARGE_RESPONSE = _json_error(
    b"431 Request Header Fields Too Large",
    b'{"error":"request line and headers too large","code":431}',
)


def protocol_class(
    settings: Settings, on_reject: RejectHook | None = None
) -> type[HardenedHttpProtocol]:
    """``HardenedHttpProtocol`` with the configured request deadline and header cap, calling
    ``on_reject(endpoint, code)`` for each refusal (e.g. ``Metrics.reject``)."""
    attributes: dict[str, object] = {
        "request_timeout": settings.server.request_timeout_seconds,
        "max_header_bytes": settings.server.max_header_bytes,
    }
    if on_reject is not None:
        attributes["on_reject"] = staticmethod(on_reject)
    return type("SnapreadyHttpProtocol", (HardenedHttpProtocol,), attributes)
