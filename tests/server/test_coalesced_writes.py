"""``CoalescedWrites``: a response's head and body leave in one transport write (issue 16).

uvicorn writes them separately; on TLS each write is a record and a syscall, and the API server
reads each. The wrapper runs on a real asyncio loop here, over a transport that records writes.
"""

from __future__ import annotations

import asyncio
from typing import Any

from webhook.server.protocol import CoalescedWrites


class Recording(asyncio.Transport):
    """The transport under the wrapper: what was written, in which calls, and the close state."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[bytes] = []
        self.closed = False
        self.aborted = False

    def write(self, data: Any) -> None:
        assert not self.closed, "write after close"
        self.writes.append(bytes(data))

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.aborted = self.closed = True

    def is_closing(self) -> bool:
        return self.closed

    def get_write_buffer_size(self) -> int:
        return 7

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 1)}.get(name, default)


def run(steps: Any) -> Recording:
    async def main() -> Recording:
        inner = Recording()
        await steps(CoalescedWrites(inner, asyncio.get_running_loop()), inner)
        return inner

    return asyncio.run(main())


def test_writes_of_one_loop_turn_leave_as_one() -> None:
    async def steps(wrapped: CoalescedWrites, inner: Recording) -> None:
        wrapped.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n")
        wrapped.write(b"{}")
        assert inner.writes == []  # held until the end of the turn
        assert wrapped.get_write_buffer_size() == 7 + 40
        await asyncio.sleep(0)
        wrapped.write(b"next")
        await asyncio.sleep(0)

    inner = run(steps)
    assert inner.writes == [b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}", b"next"]


def test_close_flushes_first_abort_drops() -> None:
    async def closing(wrapped: CoalescedWrites, inner: Recording) -> None:
        wrapped.write(b"HTTP/1.1 408 Request Timeout\r\n\r\n")
        wrapped.close()
        await asyncio.sleep(0)  # the scheduled flush finds nothing and writes nothing

    inner = run(closing)
    assert inner.writes == [b"HTTP/1.1 408 Request Timeout\r\n\r\n"] and inner.closed

    async def aborting(wrapped: CoalescedWrites, inner: Recording) -> None:
        wrapped.write(b"lost")
        wrapped.abort()
        await asyncio.sleep(0)

    inner = run(aborting)
    assert inner.writes == [] and inner.aborted


def test_empty_writes_and_other_attributes() -> None:
    async def steps(wrapped: CoalescedWrites, inner: Recording) -> None:
        wrapped.write(b"")
        wrapped.writelines([b"a", b"", b"b"])
        assert wrapped.get_extra_info("peername") == ("127.0.0.1", 1)
        assert not wrapped.is_closing()
        await asyncio.sleep(0)

    assert run(steps).writes == [b"ab"]
