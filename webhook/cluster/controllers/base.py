"""The one controller shape: a ``Reconciler`` thread that waits, reconciles, and sleeps again.

Every controller of ``cluster.controllers`` is its ``reconcile`` function and its options; this
base owns the rest, as controller-runtime's ``Result{RequeueAfter}`` and kopf's
sleep-with-wakeup do:

1. wait up to the requested delay, or until ``notify()`` (a cache changed, leadership was
   gained) or ``stop()``;
2. ``reconcile()``, which returns the seconds until it wants to run again (None: ``period``);
3. optionally pause ``min_interval`` seconds (notifications arriving meanwhile are kept, so the
   next pass starts right after the pause), then back to 1.

An exception in ``reconcile`` never ends the thread: it is logged with its traceback, shown in
``/readyz`` as ``failed (see logs), retrying`` and retried after an exponential backoff
(``ERROR_BACKOFF``, with jitter), which a successful pass resets. ``notify`` is O(1) and never
blocks: the caches call it from their watch threads.

Also here: ``Bucket``, the token bucket the prune and audit controllers pace their writes with.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from webhook.cluster.api.syncing import Backoff, Timing, Worker

log = logging.getLogger("snapready.controllers")
ERROR_BACKOFF = Timing(backoff_initial=2.0, backoff_max=60.0)
"""Seconds before a failed pass is retried: 1-2 s, doubling to 30-60 s (a bug must neither spin
nor stop the controller; before the shared base a failed controller restarted after 5 s)."""
FAILED = "failed (see logs), retrying"


class Reconciler(Worker):
    """A controller thread: ``wait -> reconcile -> next delay`` (module docstring).

    Subclasses implement ``reconcile`` and may set the class options:

    Attributes:
        first_delay: seconds before the first pass (0: at once; None: ``period``).
        initial_status: the ``/readyz`` status set (synced) when the thread starts; None leaves
            ``synced`` to the controller (the webhook scope gates readiness).
        min_interval: seconds of pause after each pass, not cut short by ``notify``.

    Args:
        name: the ``/readyz`` details key and thread name suffix.
        lock, on_change: the caches' lock and rebuild (``Worker``).
        period: seconds between passes when nothing wakes the controller and ``reconcile``
            returns None.
    """

    first_delay: float | None = None
    initial_status: str | None = "idle"
    min_interval: float = 0.0

    def __init__(
        self, name: str, lock: threading.Lock, on_change: Callable[[], None], *, period: float
    ) -> None:
        super().__init__(name, lock, on_change)
        self.period = period
        self.failures = 0
        """Passes that raised (tests, logs)."""
        self.pass_count = 0
        """Passes, failed ones too (tests wait for one that began after a change)."""
        self.pass_seconds = 0.0
        """Wall-clock seconds in ``reconcile``, every pass (failed ones too)."""
        self.pass_cpu_seconds = 0.0
        """This thread's CPU seconds in ``reconcile`` (``time.thread_time``): what a pass takes
        from the interpreter the event loop answers the API server with."""
        self._wake = threading.Event()
        self._errors = Backoff(ERROR_BACKOFF)

    def reconcile(self) -> float | None:
        """One pass; seconds until the next one is due (None: ``period``)."""
        raise NotImplementedError

    def notify(self) -> None:
        """Reconcile soon (O(1), never blocks; safe from any thread)."""
        self._wake.set()

    def stop(self) -> None:
        """Ask the loop to end, waking it from any wait (``join`` waits for it)."""
        super().stop()
        self._wake.set()

    def run(self) -> None:
        """The loop (module docstring); returns once ``stop()`` was called."""
        if self.initial_status is not None:
            self.set_status(self.initial_status, synced=True)
        delay = self.period if self.first_delay is None else self.first_delay
        while not self.stopping:
            if delay > 0:
                self._wake.wait(delay)
            self._wake.clear()
            if self.stopping:
                return
            delay = self._pass()
            if self.min_interval and self.wait(self.min_interval):
                return

    def _pass(self) -> float:
        """``reconcile`` guarded: its delay, or the error backoff after an exception."""
        wall = time.perf_counter()
        cpu = time.thread_time()
        try:
            requested = self.reconcile()
        except Exception:
            self.failures += 1
            delay = self._errors.next()
            log.exception("%s: reconcile failed; retrying in %.1f s", self.name, delay)
            self.set_status(FAILED)
            return delay
        finally:
            self.pass_cpu_seconds += time.thread_time() - cpu
            self.pass_seconds += time.perf_counter() - wall
            self.pass_count += 1
        self._errors.reset()
        if self.status == FAILED:
            self.set_status(self.initial_status or "recovered")
        return self.period if requested is None else max(0.0, requested)
