"""``Bucket``: a token bucket (base layer: imports nothing from the package).

What bounds the leader's writes: deletions (``lifecycle.prune_per_minute``), report writes
(``reports.writes_per_second``) and Events (``cluster.api.events``), as client-go's
``flowcontrol.NewTokenBucketRateLimiter`` bounds a client's requests.
"""

from __future__ import annotations

from collections.abc import Callable


class Bucket:
    """``burst`` tokens at once, refilled at ``per_second`` tokens per second (seconds from
    ``clock``); not thread-safe (callers hold their own lock)."""

    def __init__(self, burst: int, per_second: float, clock: Callable[[], float]) -> None:
        self.burst, self.per_second, self.clock = burst, per_second, clock
        self.tokens, self.last = float(burst), clock()

    def available(self) -> bool:
        """Whether a token is there now (nothing taken): a caller asking two buckets takes
        from neither unless both have one."""
        now = self.clock()
        self.tokens = min(self.burst, self.tokens + (now - self.last) * self.per_second)
        self.last = now
        return self.tokens >= 1

    def take(self) -> bool:
        """One token if there is one (True), else False and nothing taken."""
        if not self.available():
            return False
        self.tokens -= 1
        return True

    def full(self) -> bool:
        """Whether the bucket would be full now (forgetting it loses nothing)."""
        return self.tokens + (self.clock() - self.last) * self.per_second >= self.burst
