"""``bench.scale.latency.controller_passes``: the busy rounds' CPU per controller pass, read
from a real ``/metrics`` endpoint serving ``ControllerCollector``."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

from prometheus_client import CollectorRegistry, start_http_server

from bench.scale.latency import controller_passes, passes_line
from tests.support.ports import free_port
from webhook.server.collectors import ControllerCollector


def test_passes_and_cpu_per_controller_between_two_scrapes() -> None:
    lifecycle = SimpleNamespace(
        name="lifecycle", pass_count=2, failures=0, pass_seconds=0.2, pass_cpu_seconds=0.1
    )
    restores = SimpleNamespace(
        name="restores", pass_count=7, failures=1, pass_seconds=0.1, pass_cpu_seconds=0.014
    )
    idle = SimpleNamespace(
        name="scope", pass_count=1, failures=0, pass_seconds=0, pass_cpu_seconds=0
    )
    registry = CollectorRegistry()
    registry.register(ControllerCollector(lambda: cast(Any, [lifecycle, restores, idle])))
    port = free_port()
    server, thread = start_http_server(port, addr="127.0.0.1", registry=registry)
    try:
        before = controller_passes(port)
        assert before == {"lifecycle": (2.0, 0.1), "restores": (7.0, 0.014), "scope": (1.0, 0.0)}
        lifecycle.pass_count, lifecycle.pass_cpu_seconds = 7, 0.35  # 5 passes, 50 ms each
        restores.pass_count, restores.pass_cpu_seconds = 9, 0.018  # 2 passes, 2 ms each
        after = controller_passes(port)
    finally:
        server.shutdown()
        thread.join(5)
    assert passes_line(before, after) == "lifecycle 5 x 50 ms, restores 2 x 2 ms"
