"""In-process cost of one selected pod's admission (``make bench-admit``; design.md targets).

Review 03 (the gVisor + 4 x L4 pod) through ``admit`` in this process, with the chart's defaults
(``injectHelpers: false``; ``--inject`` turns injection on) and a cluster-mode state whose
PodSnapshots were listed (none Ready: the prediction runs and says ``none``), as in
``make bench-cluster``:

* ``parse_review`` of the ``/mutate`` body;
* a template's first replica: ``admit /mutate`` with every memo empty (the replica memo of
  ``admission.replicas``, the fingerprint memo of ``webhook.pod.memo``), and ``admit /validate``
  of the pod as snapready's patch left it (what the API server sends next) with the fingerprint
  memo holding ``/mutate``'s (the same replica served both calls), and again with it empty
  (another replica served ``/mutate``);
* what a request costs beyond decoding and answering, each part on its own: the
  fingerprint (``distill`` + RFC 8785 + SHA-256, memo empty), the prediction against 100 Ready
  snapshots of the pod's policy in its namespace, 21 of them in its group (``hit``: one has its
  fingerprint; ``miss``: none has, the differing fields are named), and a first replica's
  ``admit /mutate`` under each of those states;
* a StatefulSet's pod (``statefulset_bodies``; a LeaderWorkerSet's pods are StatefulSet
  pods): ``/mutate`` and ``/validate`` as for a first replica, since each pod has its own
  name label and hostname;
* a later replica of the same template (the replica memo holds its decisions): ``/mutate``,
  ``/validate``, and ``/mutate`` on the prediction-miss state.

Each figure is the best of 5 rounds: the same request objects again and again, so the CPU
caches hold everything (the classic micro-benchmark). Then the whole pod (both parses,
``/mutate``, ``/validate``, fresh objects from the bodies each time), median of 2000 pods, once
with warm caches and once after reading and writing 16 MiB between pods: what the API server,
etcd and the load generator do to the caches of a 2-CPU machine between two webhook calls.
Baseline: the targets of design.md ("Targets": ``admit`` <= 60 us per call); the
flushed-cache whole pod against the warm one. No assertions: exit 0 whatever the figures.

Usage: ``python -m bench.admit [--inject] [--rounds 5] [--number 2000]``
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import time
import timeit
from collections.abc import Callable
from typing import Any

import jsonpatch
import orjson

from bench.harness import results
from bench.harness.objects import review_file
from tests.conftest import make_settings
from webhook.admission.context import selected_pod_context
from webhook.admission.engine import Engine, admit
from webhook.base.types import Endpoint
from webhook.kube.review import parse_review
from webhook.mutation.patch import Draft
from webhook.mutation.prediction import pod_facts
from webhook.pod import distill, memo
from webhook.pod.fields import field_digests
from webhook.pod.restore import predict
from webhook.server.runner import build_engine
from webhook.snapshots.index import SnapshotIndex
from webhook.snapshots.views import OriginRecord, SnapshotView

TARGET_ADMIT_US = 60.0
CACHE_FLUSH_BYTES = 16 * 1024 * 1024


@dataclasses.dataclass(frozen=True)
class Timing:
    """One measured step: ``name``, microseconds per call, and the target it has (or None)."""

    name: str
    micros: float
    target: float | None = None


def cluster_engine(inject: bool) -> Engine:
    """The example policies, the chart's injection default (or on), snapshots listed."""
    engine = build_engine(make_settings(injection={"enabled": inject}))
    state = dataclasses.replace(engine.state(), snapshots_known=True)
    engine.state = lambda: state
    return engine


def with_snapshots(engine: Engine, body: bytes, *, match: bool) -> Engine:
    """``engine`` with 100 Ready recorded snapshots of ``llm-policy`` in ``snap``, 21 of them in
    review 03's group (``model``), as on the scale bench's cluster: two templates' fingerprints
    on five node versions; with ``match`` the newest-but-some one has the stamped pod's
    fingerprint (a hit), else none does (a miss naming the image)."""
    request = parse_review(body).request
    admitted = jsonpatch.apply_patch(request.object, list(admit(request, "mutate", engine).patch))
    spec_hash = distill.fingerprint(admitted)
    digests = field_digests(admitted)
    if not match:
        spec_hash = "v1:sha256:" + "0" * 64
        digests = {**digests, "spec.containers[0].image": "0" * 12}
    group = {"model": admitted["metadata"]["labels"]["model"]}
    hashes = [spec_hash, "v1:sha256:" + "1" * 64]  # the scale bench's group: two templates
    views = [
        SnapshotView(
            "snap", f"llm-policy-{number:03d}", "llm-policy", None, True, "Ready",
            f"2026-12-01T10:{number % 60:02d}:00Z", None,
            OriginRecord(
                "origin", hashes[number % 2 if not match or number != 7 else 0], digests,
                {"version": f"1.35.{number % 5}-gke.1"},
                group if number % 5 == 2 or number == 7 else {"model": f"other-{number}"},
            ),
        )
        for number in range(100)
    ]  # fmt: skip
    state = dataclasses.replace(engine.state(), snapshots=SnapshotIndex.build(views))
    copy = dataclasses.replace(engine)
    copy.state = lambda: state
    return copy


def bodies(engine: Engine) -> tuple[bytes, bytes]:
    """Review 03's ``/mutate`` body and its ``/validate`` body (the pod after snapready's patch)."""
    body = review_file("03").read_bytes()
    request = parse_review(body).request
    decision = admit(request, "mutate", engine)
    review = orjson.loads(body)
    review["request"]["object"] = jsonpatch.apply_patch(request.object, list(decision.patch))
    return body, orjson.dumps(review)


def statefulset_bodies(engine: Engine, ordinal: int = 3) -> tuple[bytes, bytes]:
    """``bodies`` of review 03's pod as pod ``ordinal`` of a StatefulSet ``model`` (a
    LeaderWorkerSet's leader and workers are StatefulSet pods too): named, not generated, with
    the labels and hostname the StatefulSet controller gives each pod
    (pkg/controller/statefulset/stateful_set_utils.go in kubernetes/kubernetes)."""
    review = orjson.loads(review_file("03").read_bytes())
    pod = review["request"]["object"]
    name = f"model-{ordinal}"
    metadata = pod["metadata"]
    metadata.pop("generateName", None)
    metadata["name"] = review["request"]["name"] = name
    metadata["labels"] |= {
        "statefulset.kubernetes.io/pod-name": name,
        "apps.kubernetes.io/pod-index": str(ordinal),
        "controller-revision-hash": "model-7d9c5b8f4d",
    }
    pod["spec"] |= {"hostname": name, "subdomain": "model"}
    body = orjson.dumps(review)
    decision = admit(parse_review(body).request, "mutate", engine)
    review["request"]["object"] = jsonpatch.apply_patch(pod, list(decision.patch))
    return body, orjson.dumps(review)


FIRST_MUTATE = "admit /mutate (first replica)"
FIRST_VALIDATE = "admit /validate (first replica)"
SET_MUTATE = "admit /mutate (a StatefulSet's pod)"
SET_VALIDATE = "admit /validate (a StatefulSet's pod)"
LATER_MUTATE = "admit /mutate (a later replica)"
LATER_VALIDATE = "admit /validate (a later replica)"


def forget(engine: Engine, *, fingerprints: bool = True, digests: bool = False) -> None:
    """Empty ``engine``'s replica memo (``admission.replicas``) and, as asked, the fingerprint
    and field-digest memos (``webhook.pod.memo``): the next call is a template's first pod."""
    if engine.replicas is not None:
        engine.replicas.clear()
    if fingerprints:
        memo._memo.clear()
    if digests:
        memo._digests.clear()


def admit_timings(inject: bool = False, rounds: int = 5, number: int = 2000) -> list[Timing]:
    """The per-call figures of the module docstring, in microseconds."""
    engine = cluster_engine(inject)
    mutate_body, validate_body = bodies(engine)
    mutate = parse_review(mutate_body).request
    validate = parse_review(validate_body).request

    def first_mutate() -> Any:
        forget(engine)
        return admit(mutate, "mutate", engine)

    def first_validate() -> Any:
        forget(engine, fingerprints=False)
        return admit(validate, "validate", engine)

    def cold_validate() -> Any:
        forget(engine)
        return admit(validate, "validate", engine)

    set_mutate, set_validate = (parse_review(b).request for b in statefulset_bodies(engine))

    def set_pod(request: Any, endpoint: Endpoint, *, fingerprints: bool) -> Callable[[], Any]:
        """A StatefulSet's pod: every other ordinal is another pod (its name label and
        hostname differ), so its calls find no earlier replica's decision."""

        def call() -> Any:
            forget(engine, fingerprints=fingerprints)
            return admit(request, endpoint, engine)

        return call

    hit, miss = (with_snapshots(engine, mutate_body, match=m) for m in (True, False))
    stamped = parse_review(validate_body).request.object
    ctx = selected_pod_context(validate, stamped, engine)
    assert ctx is not None

    def predicts(on: Engine) -> Callable[[], Any]:
        facts = pod_facts(Draft(stamped), dataclasses.replace(ctx, cluster=on.state()))
        state = on.state()
        return lambda: predict(
            dataclasses.replace(facts, fields=lambda: field_digests(stamped)),
            state.snapshots, state.node_pools, rootfs_only=False,
        )  # fmt: skip

    def fresh(on: Engine, *, first_template_pod: bool = True) -> Callable[[], Any]:
        """A template's first pod (every memo empty); ``first_template_pod`` False: the
        field digests of its fingerprint are known (an earlier replica was admitted on
        another state)."""

        def call() -> Any:
            forget(on, digests=first_template_pod)
            return admit(mutate, "mutate", on)

        return call

    admit(mutate, "mutate", engine)  # the memos now hold the stamped pod's fingerprint
    calls: list[tuple[str, Callable[[], Any], float | None]] = [
        ("parse_review (/mutate body)", lambda: parse_review(mutate_body), None),
        (FIRST_MUTATE, first_mutate, TARGET_ADMIT_US),
        (FIRST_VALIDATE, first_validate, TARGET_ADMIT_US),
        ("admit /validate (first, another replica /mutated)", cold_validate, None),
        (SET_MUTATE, set_pod(set_mutate, "mutate", fingerprints=True), TARGET_ADMIT_US),
        (SET_VALIDATE, set_pod(set_validate, "validate", fingerprints=False), TARGET_ADMIT_US),
        ("  part: fingerprint of the pod", lambda: distill.fingerprint(stamped), None),
        ("  part: predict, no Ready snapshot", predicts(engine), None),
        ("  part: predict, hit (100 Ready)", predicts(hit), None),
        ("  part: predict, miss (fields named)", predicts(miss), None),
        ("admit /mutate, prediction hit (first replica)", fresh(hit), TARGET_ADMIT_US),
        ("admit /mutate, prediction miss (first replica)", fresh(miss), TARGET_ADMIT_US),
        ("admit /mutate, miss, state changed since a replica",
         fresh(miss, first_template_pod=False), TARGET_ADMIT_US),
        (LATER_MUTATE, lambda: admit(mutate, "mutate", engine), TARGET_ADMIT_US),
        (LATER_VALIDATE, lambda: admit(validate, "validate", engine), TARGET_ADMIT_US),
        ("admit /mutate, prediction miss (a later replica)",
         lambda: admit(mutate, "mutate", miss), TARGET_ADMIT_US),
    ]  # fmt: skip
    out = []
    for name, call, target in calls:
        call()  # a later replica's figure starts with the memo holding its template
        best = min(timeit.repeat(call, number=number, repeat=rounds)) / number
        out.append(Timing(name, best * 1e6, target))
    return out


def pod_micros(timings: list[Timing], *, later: bool) -> float:
    """One selected pod from the figures (parse x 2, ``/mutate``, ``/validate``): a template's
    first replica, or a ``later`` one."""
    by_name = {t.name: t.micros for t in timings}
    mutate, validate = (LATER_MUTATE, LATER_VALIDATE) if later else (FIRST_MUTATE, FIRST_VALIDATE)
    return 2 * by_name["parse_review (/mutate body)"] + by_name[mutate] + by_name[validate]


def whole_pod(inject: bool = False, pods: int = 2000, *, later: bool = True) -> tuple[float, float]:
    """Median microseconds of one pod's parse x 2 + ``/mutate`` + ``/validate``: warm caches,
    then with ``CACHE_FLUSH_BYTES`` read and written between pods; each pod a ``later`` replica
    of one template (the replica memo holds its decisions), else the first of its template."""
    engine = cluster_engine(inject)
    mutate_body, validate_body = bodies(engine)
    scratch = bytearray(CACHE_FLUSH_BYTES)

    def one(flush: bool) -> float:
        if flush:  # read one byte of every 64-byte cache line, then write them all
            scratch[::64] = bytes(len(scratch[::64]))
        if not later:
            forget(engine)
        started = time.thread_time_ns()
        admit(parse_review(mutate_body).request, "mutate", engine)
        admit(parse_review(validate_body).request, "validate", engine)
        return (time.thread_time_ns() - started) / 1000

    warm = statistics.median(one(False) for _ in range(pods))
    cold = statistics.median(one(True) for _ in range(pods))
    return warm, cold


def print_report(inject: bool, rounds: int, number: int) -> None:
    """Print the timings with their targets, then warm against cold caches."""
    mode = "injectHelpers: true" if inject else "chart defaults (injectHelpers: false)"
    print(f"in-process admission of review 03, {mode}, best of {rounds} x {number} calls:")
    timings = admit_timings(inject, rounds, number)
    for t in timings:
        target = ""
        if t.target is not None:
            verdict = "met" if t.micros <= t.target else "NOT met"
            target = f"   target <= {t.target:.0f} us: {verdict}"
        print(f"  {t.name:<52}{t.micros:>8.1f} us{target}")
    for later, which in ((False, "a template's first replica"), (True, "a later replica")):
        hot = pod_micros(timings, later=later)
        warm, cold = whole_pod(inject, later=later)
        print(
            f"one selected pod, {which} (parse x 2, /mutate, /validate): {hot:.0f} us from the "
            f"figures above; fresh objects each pod (median of 2000): {warm:.0f} us with warm "
            f"CPU caches, {cold:.0f} us after {CACHE_FLUSH_BYTES >> 20} MiB were read and "
            f"written ({cold / hot:.1f} x the first)"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--inject", action="store_true", help="injectHelpers: true")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--number", type=int, default=2000, help="calls per round")
    results.add_flag(parser)
    args = parser.parse_args()
    with results.recorded("admit", args.docs):
        print_report(args.inject, args.rounds, args.number)
    return 0


if __name__ == "__main__":
    sys.exit(main())
