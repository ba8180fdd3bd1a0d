"""``webhook.server.admission_metrics``: plain counts exposed exactly as prometheus_client's own
``Counter`` and ``Histogram`` would expose the same observations (the library is the reference)."""

from __future__ import annotations

import random
import threading

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from webhook.server.admission_metrics import AdmissionCounts
from webhook.server.metrics import DURATION_BUCKETS

Sample = tuple[str, tuple[tuple[str, str], ...], float]


def samples(registry: CollectorRegistry) -> set[Sample]:
    """Every sample of a scrape, ``_created`` ones left out (the counts do not keep them)."""
    text = generate_latest(registry).decode()
    return {
        (s.name, tuple(sorted(s.labels.items())), s.value)
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if not s.name.endswith("_created")
    }


def reference_registry() -> tuple[CollectorRegistry, dict[str, object]]:
    registry = CollectorRegistry()
    series: dict[str, object] = {
        "requests": Counter(
            "snapready_admission_requests",
            "AdmissionReviews answered, by endpoint, object kind, operation and decision "
            "(allowed, patched, denied, error).",
            ["endpoint", "kind", "operation", "decision"],
            registry=registry,
        ),
        "duration": Histogram(
            "snapready_admission_duration_seconds",
            "Seconds from reading the request to the decision, by endpoint.",
            ["endpoint"],
            buckets=DURATION_BUCKETS,
            registry=registry,
        ),
        "findings": Counter(
            "snapready_rule_findings",
            "Rule findings, by rule id and where they ended: enforce (denied), warn, audit.",
            ["rule", "mode"],
            registry=registry,
        ),
        "mutations": Counter(
            "snapready_mutations",
            "Pods changed by each mutator (one count per mutator per patched pod).",
            ["mutator"],
            registry=registry,
        ),
        "errors": Counter(
            "snapready_internal_errors",
            "Reviews answered by the failure policy after an unexpected exception.",
            registry=registry,
        ),
    }
    return registry, series


def test_the_exposition_is_what_prometheus_client_writes_for_the_same_reviews() -> None:
    rng = random.Random(7)
    registry, ref = reference_registry()
    ours = CollectorRegistry()
    counts = AdmissionCounts(DURATION_BUCKETS)
    ours.register(counts)
    # durations on the bucket bounds (``le`` includes its bound), between them and past them
    durations = [*DURATION_BUCKETS, 0.0, 0.0001, 0.0007, 0.3, 2.6, 40.0]
    for number in range(400):
        endpoint = rng.choice(["mutate", "validate"])
        labels = (endpoint, rng.choice(["Pod", "Deployment"]), "CREATE", rng.choice(["a", "d"]))
        seconds = durations[number % len(durations)] if number < 100 else rng.random() / 10
        findings = [(rng.choice(["gpu-mig", "gvisor"]), rng.choice(["enforce", "warn"]))] * (
            number % 3
        )
        mutators = ["spec-hash", "helpers"][: number % 3]
        error = number % 17 == 0
        counts.add(labels, seconds, findings, mutators, internal_error=error)
        ref["requests"].labels(*labels).inc()  # type: ignore[attr-defined]
        ref["duration"].labels(endpoint).observe(seconds)  # type: ignore[attr-defined]
        for rule, mode in findings:
            ref["findings"].labels(rule, mode).inc()  # type: ignore[attr-defined]
        for name in mutators:
            ref["mutations"].labels(name).inc()  # type: ignore[attr-defined]
        if error:
            ref["errors"].inc()  # type: ignore[attr-defined]
    expected = samples(registry)
    assert samples(ours) == expected
    assert len(expected) > 40


def test_before_any_review_only_the_internal_error_count_is_exposed() -> None:
    registry, _ = reference_registry()
    ours = CollectorRegistry()
    ours.register(AdmissionCounts(DURATION_BUCKETS))
    assert samples(ours) == samples(registry) == {("snapready_internal_errors_total", (), 0.0)}


def test_counts_from_many_threads_add_up_while_scrapes_run() -> None:
    counts = AdmissionCounts(DURATION_BUCKETS)
    registry = CollectorRegistry()
    registry.register(counts)
    stop = threading.Event()

    def scrape() -> None:
        while not stop.is_set():
            generate_latest(registry)

    def count(worker: int) -> None:
        for number in range(2000):
            # a new label set now and then: dicts grow while a scrape copies them
            counts.add(
                ("validate", "Pod", "CREATE", f"d{number % 50}"), 0.001, [("r", f"m{worker}")]
            )

    scraper = threading.Thread(target=scrape)
    scraper.start()
    workers = [threading.Thread(target=count, args=(n,)) for n in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    stop.set()
    scraper.join()
    got = samples(registry)
    total = sum(v for name, _, v in got if name == "snapready_admission_requests_total")
    assert total == 8000
    assert (
        "snapready_admission_duration_seconds_count",
        (("endpoint", "validate"),),
        8000.0,
    ) in got
