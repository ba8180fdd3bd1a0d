"""The per-review series, counted in plain dicts and exposed when Prometheus scrapes.

``prometheus_client``'s labelled children take a lock, a value object and an exemplar check per
update: a selected pod's two reviews update eight to ten series, about 13 us of the event loop
per pod (``Metrics.observe`` timed on review 03's decisions). Here one review takes one lock and
a few dict increments; ``collect`` builds the families from a copy at scrape time, with the
names, labels, help texts and buckets the ``Counter``/``Histogram`` had (counters end in
``_total``; no ``_created`` samples, which Prometheus ignores in the text format).
"""

from __future__ import annotations

import threading
from bisect import bisect_left
from collections.abc import Iterable, Iterator, Sequence

from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.utils import floatToGoString


def _go_float(value: float) -> str:
    """A bucket bound as ``prometheus_client``'s ``Histogram`` writes its ``le`` label."""
    text: str = floatToGoString(value)  # type: ignore[no-untyped-call]
    return text


RequestLabels = tuple[str, str, str, str]
"""(endpoint, kind, operation, decision) of ``snapready_admission_requests``."""


class AdmissionCounts:
    """Counts of answered reviews; a ``prometheus_client`` collector (register it once).

    Args:
        buckets: the duration histogram's upper bounds in seconds, ascending (``+Inf`` is
            added).
    """

    def __init__(self, buckets: Sequence[float]) -> None:
        self.buckets = tuple(buckets)
        self._lock = threading.Lock()
        self._requests: dict[RequestLabels, int] = {}
        self._durations: dict[str, list[float]] = {}
        """endpoint -> one count per bucket (not cumulative), then ``+Inf``'s, then the sum."""
        self._findings: dict[tuple[str, str], int] = {}
        self._mutations: dict[str, int] = {}
        self._internal_errors = 0

    def add(
        self,
        request: RequestLabels,
        seconds: float,
        findings: Iterable[tuple[str, str]] = (),
        mutators: Iterable[str] = (),
        internal_error: bool = False,
    ) -> None:
        """Count one review: its ``request`` labels, its duration (``seconds``) under its
        endpoint, each ``(rule, mode)`` finding, each mutator that changed the pod, and whether
        it was answered after an internal error. Label values must come from bounded sets."""
        endpoint = request[0]
        slot = bisect_left(self.buckets, seconds)  # the first bound >= seconds: ``le``
        with self._lock:
            self._requests[request] = self._requests.get(request, 0) + 1
            counts = self._durations.get(endpoint)
            if counts is None:
                counts = self._durations[endpoint] = [0.0] * (len(self.buckets) + 2)
            counts[slot] += 1
            counts[-1] += seconds
            for finding in findings:
                self._findings[finding] = self._findings.get(finding, 0) + 1
            for name in mutators:
                self._mutations[name] = self._mutations.get(name, 0) + 1
            if internal_error:
                self._internal_errors += 1

    def describe(self) -> Iterator[Metric]:
        """The families, empty (the registry checks names with it)."""
        return self._families({}, {}, {}, {}, 0)

    def collect(self) -> Iterator[Metric]:
        """The families with every count so far (a copy taken under the lock)."""
        with self._lock:
            requests, findings = dict(self._requests), dict(self._findings)
            mutations, errors = dict(self._mutations), self._internal_errors
            durations = {endpoint: list(counts) for endpoint, counts in self._durations.items()}
        return self._families(requests, durations, findings, mutations, errors)

    def _families(
        self,
        requests: dict[RequestLabels, int],
        durations: dict[str, list[float]],
        findings: dict[tuple[str, str], int],
        mutations: dict[str, int],
        errors: int,
    ) -> Iterator[Metric]:
        family = CounterMetricFamily(
            "snapready_admission_requests",
            "AdmissionReviews answered, by endpoint, object kind, operation and decision "
            "(allowed, patched, denied, error).",
            labels=["endpoint", "kind", "operation", "decision"],
        )
        for request, count in sorted(requests.items()):
            family.add_metric(request, count)
        yield family
        histogram = HistogramMetricFamily(
            "snapready_admission_duration_seconds",
            "Seconds from reading the request to the decision, by endpoint.",
            labels=["endpoint"],
        )
        bounds = [*(_go_float(bound) for bound in self.buckets), "+Inf"]
        for endpoint, counts in sorted(durations.items()):
            cumulative: list[tuple[str, float]] = []
            running = 0.0
            for bound, in_bucket in zip(bounds, counts, strict=False):
                running += in_bucket
                cumulative.append((bound, running))
            histogram.add_metric([endpoint], cumulative, counts[-1])
        yield histogram
        family = CounterMetricFamily(
            "snapready_rule_findings",
            "Rule findings, by rule id and where they ended: enforce (denied), warn, audit.",
            labels=["rule", "mode"],
        )
        for (rule, mode), count in sorted(findings.items()):
            family.add_metric([rule, mode], count)
        yield family
        family = CounterMetricFamily(
            "snapready_mutations",
            "Pods changed by each mutator (one count per mutator per patched pod).",
            labels=["mutator"],
        )
        for name, count in sorted(mutations.items()):
            family.add_metric([name], count)
        yield family
        yield CounterMetricFamily(
            "snapready_internal_errors",
            "Reviews answered by the failure policy after an unexpected exception.",
            value=errors,
        )
