"""The one controller shape (``controllers.base.Reconciler``): wait, reconcile, next delay.

Real threads and real time, with generous bounds (a shared 2-core machine): a wake-up must
arrive long before the period, a stop long before any wait would end on its own.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from webhook.base.bucket import Bucket
from webhook.cluster.api.syncing import Timing
from webhook.cluster.controllers import base
from webhook.cluster.controllers.base import FAILED, Reconciler
from webhook.server.collectors import ControllerCollector

LONG = 60.0
"""A period no test waits for: a pass before it means something woke the loop."""


class Counting(Reconciler):
    """Records the monotonic time of each pass; ``behave`` decides its return (or raises)."""

    def __init__(self, behave: Callable[[int], float | None] = lambda _n: None) -> None:
        super().__init__("counting", threading.Lock(), lambda: None, period=LONG)
        self.behave = behave
        self.passes: list[float] = []
        self.passed = threading.Event()

    def reconcile(self) -> float | None:
        self.passes.append(time.monotonic())
        self.passed.set()
        return self.behave(len(self.passes))


@pytest.fixture
def started() -> Iterator[list[Reconciler]]:
    """Reconcilers a test started; each is stopped (and must end) afterwards."""
    running: list[Reconciler] = []
    yield running
    for reconciler in running:
        reconciler.stop()
        assert reconciler.join(5.0), f"{reconciler.name} did not end"


def start(running: list[Reconciler], reconciler: Reconciler) -> None:
    running.append(reconciler)
    reconciler.start()


def wait_until(predicate: Callable[[], bool], timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return predicate()


def test_notify_wakes_the_loop_long_before_the_period(started: list[Reconciler]) -> None:
    counting = Counting()
    start(started, counting)
    assert wait_until(lambda: counting.status == "idle")  # running, waiting out its period
    assert counting.passes == [], "the first pass waits for the period or a notify"
    notified = time.monotonic()
    counting.notify()
    assert counting.passed.wait(5.0), "notify did not wake the loop"
    assert counting.passes[0] - notified < 5.0 < LONG
    assert counting.synced, "a controller that sets an initial status never gates readiness"


def test_stop_ends_the_loop_promptly_from_a_long_wait(started: list[Reconciler]) -> None:
    counting = Counting()
    counting.start()
    assert wait_until(lambda: counting.status == "idle")
    asked = time.monotonic()
    counting.stop()
    assert counting.join(2.0)
    assert time.monotonic() - asked < 2.0
    assert counting.passes == [], "a stop is not a pass"


def test_stop_during_the_pause_after_a_pass_ends_the_loop(started: list[Reconciler]) -> None:
    class Paused(Counting):
        first_delay = 0.0
        min_interval = LONG

    paused = Paused()
    paused.start()
    assert paused.passed.wait(5.0)
    paused.stop()
    assert paused.join(2.0)
    assert len(paused.passes) == 1


def test_the_requested_delay_is_honoured_instead_of_the_period(
    started: list[Reconciler],
) -> None:
    """``reconcile`` returning seconds requeues after them (controller-runtime's
    ``RequeueAfter``); None means the period."""
    soon = Counting(lambda n: 0.05 if n < 5 else None)
    soon.first_delay = 0.0
    start(started, soon)
    assert wait_until(lambda: len(soon.passes) >= 5), "requeued passes did not come"
    time.sleep(0.5)
    assert len(soon.passes) == 5, "after None the loop waits the whole period"
    gaps = [b - a for a, b in zip(soon.passes, soon.passes[1:], strict=False)]
    assert all(gap >= 0.04 for gap in gaps), gaps


def test_a_failing_reconcile_is_logged_backs_off_and_the_loop_lives_on(
    started: list[Reconciler], caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(base, "ERROR_BACKOFF", Timing(backoff_initial=0.2, backoff_max=0.4))

    def behave(n: int) -> float | None:
        if n <= 3:
            raise RuntimeError(f"bug number {n}")
        return None

    failing = Counting(behave)
    failing.first_delay = 0.0
    with caplog.at_level(logging.ERROR, logger="snapready.controllers"):
        start(started, failing)
        assert wait_until(lambda: len(failing.passes) >= 4), "the loop died after an exception"
    assert failing.failures == 3
    errors = [r for r in caplog.records if "reconcile failed" in r.getMessage()]
    assert len(errors) == 3 and all(r.exc_info for r in errors), "logged with the traceback"
    gaps = [b - a for a, b in zip(failing.passes, failing.passes[1:], strict=False)]
    assert all(gap >= 0.09 for gap in gaps), f"no backoff between failed passes: {gaps}"
    assert failing.status == "idle", "a successful pass clears the failed status"
    assert failing.join(0.01) is False, "still running"


def test_a_reconcile_that_always_fails_shows_in_readyz_and_does_not_spin(
    started: list[Reconciler], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(base, "ERROR_BACKOFF", Timing(backoff_initial=0.2, backoff_max=0.4))
    seen: list[str] = []

    class Broken(Counting):
        first_delay = 0.0

        def __init__(self) -> None:
            super().__init__(lambda _n: 1 / 0)
            self.on_change = lambda: seen.append(self.status)

    broken = Broken()
    start(started, broken)
    time.sleep(1.0)
    assert 2 <= len(broken.passes) <= 8, f"{len(broken.passes)} passes in 1 s"
    assert broken.status == FAILED and FAILED in seen


def test_notifications_during_the_pause_start_the_next_pass_right_after_it(
    started: list[Reconciler],
) -> None:
    """``min_interval`` (the snapshot lifecycle's): at most one pass per pause, none lost."""

    class Paced(Counting):
        first_delay = 0.0
        min_interval = 0.3

    paced = Paced()
    start(started, paced)
    assert paced.passed.wait(5.0)
    paced.notify()
    paced.notify()
    assert wait_until(lambda: len(paced.passes) >= 2)
    gap = paced.passes[1] - paced.passes[0]
    assert 0.29 <= gap < 5.0, gap
    time.sleep(0.5)
    assert len(paced.passes) == 2, "two notifies in one pause make one pass"


def test_the_token_bucket_refills_at_its_rate() -> None:
    now = [0.0]
    bucket = Bucket(2, 1.0, lambda: now[0])
    assert [bucket.take(), bucket.take(), bucket.take()] == [True, True, False]
    now[0] = 1.0
    assert [bucket.take(), bucket.take()] == [True, False]


class Burning(Reconciler):
    """Spends ``cpu`` seconds of its own thread's CPU per pass; raises on pass 2."""

    def __init__(self, cpu: float) -> None:
        super().__init__("burning", threading.Lock(), lambda: None, period=0.0)
        self.cpu, self.calls = cpu, 0

    def reconcile(self) -> float | None:
        self.calls += 1
        end = time.thread_time() + self.cpu
        while time.thread_time() < end:
            pass
        if self.calls == 2:
            raise RuntimeError("planted")
        return 0.0 if self.calls < 4 else LONG


def test_passes_failures_and_their_cpu_are_counted_and_exported(
    started: list[Reconciler], caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``snapready_controller_*`` (controller-runtime's reconcile total, errors and time): four
    passes of 30 ms thread CPU each, one of which raised (counted as a pass and a failure)."""
    monkeypatch.setattr(base, "ERROR_BACKOFF", Timing(backoff_initial=0.01, backoff_max=0.02))
    burning = Burning(0.03)
    with caplog.at_level(logging.ERROR, logger="snapready.controllers"):
        start(started, burning)
        assert wait_until(lambda: burning.pass_count >= 4, timeout=10)
    assert (burning.calls, burning.pass_count, burning.failures) == (4, 4, 1)
    assert 0.12 <= burning.pass_cpu_seconds < 1.0
    assert burning.pass_seconds >= burning.pass_cpu_seconds
    collector = ControllerCollector(lambda: [burning])
    samples = {
        (family.name, sample.labels["controller"]): sample.value
        for family in collector.collect()
        for sample in family.samples
    }
    assert samples == {
        ("snapready_controller_passes", "burning"): 4.0,
        ("snapready_controller_pass_failures", "burning"): 1.0,
        ("snapready_controller_pass_seconds", "burning"): burning.pass_seconds,
        ("snapready_controller_pass_cpu_seconds", "burning"): burning.pass_cpu_seconds,
    }
