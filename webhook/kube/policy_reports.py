"""Policy reports: one report object per judged pod or workload template. Pure module.

Two APIs carry the same shape, every field top level (no ``spec``):

- OpenReports, ``openreports.io/v1alpha1`` kind ``Report`` (namespaced, short name ``reps``),
  the successor of the retired wg-policy project (openreports/reports-api,
  ``apis/openreports.io/v1alpha1/report_types.go``): ``source``, ``scope`` (an ObjectReference),
  ``summary`` {pass, fail, warn, error, skip}, ``results[]`` with ``policy`` (required),
  ``rule``, ``category``, ``severity`` (critical|high|medium|low|info), ``timestamp``
  {seconds, nanos}, ``result`` (pass|fail|warn|error|skip), ``message``, ``properties``
  (string map) and ``source``.
- wg-policy, ``wgpolicyk8s.io/v1alpha2`` kind ``PolicyReport`` (kubernetes-sigs/
  wg-policy-prototypes, ``policy-report/crd/v1alpha2/``; Kyverno's default): the same, but no
  report-level ``source`` (its structural schema would prune it), so each result names it.

A report is named after the object's uid, lives in its namespace, is owned by it (the garbage
collector removes it with the object; no ``blockOwnerDeletion``), is labelled
``app.kubernetes.io/managed-by: snapready`` (snapready lists and watches only its own) and
carries the digest of its content (``DIGEST_KEY``: scope and results without timestamps), so
the leader compares digests and writes only when the content changed.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal
from urllib.parse import quote

from webhook.base.reporting import ResultStatus
from webhook.base.types import RawObject, mapping
from webhook.kube.canonical import canonical_json

SOURCE = "snapready"
"""``source`` of every report and result: the engine that wrote it (Policy Reporter's filter)."""
CATEGORY = "GKE Pod snapshots"
"""``category`` of every result (Policy Reporter groups results by it)."""
MANAGED_BY = ("app.kubernetes.io/managed-by", "snapready")
"""The label on every report snapready writes; its list and watch select on it."""
RESULT_STATUSES: tuple[ResultStatus, ...] = ("pass", "fail", "warn", "error", "skip")
Severity = Literal["critical", "high", "medium", "low", "info"]
MAX_MESSAGE_CHARS = 1024
"""A result's ``message`` at most (the fixes of one rule; the schema sets no bound)."""
MAX_PROPERTY_CHARS = 512


@dataclass(frozen=True)
class ReportApi:
    """One report API: where its namespaced reports live and what its schema accepts.

    Attributes:
        name: the setting's value (``openreports``, ``wgpolicyk8s``).
        group, version, kind, plural: the namespaced report resource.
        top_source: whether the report itself has ``source`` (OpenReports; not v1alpha2).
    """

    name: str
    group: str
    version: str
    kind: str
    plural: str
    top_source: bool

    @property
    def api_version(self) -> str:
        """``group/version``."""
        return f"{self.group}/{self.version}"

    @property
    def discovery(self) -> str:
        """The discovery document of the group version (404: not served)."""
        return f"/apis/{self.group}/{self.version}"

    def collection(self, namespace: str | None = None) -> str:
        """The reports collection, of one namespace or (None) of all."""
        where = f"/namespaces/{namespace}" if namespace else ""
        return f"/apis/{self.group}/{self.version}{where}/{self.plural}"

    def path(self, namespace: str, name: str) -> str:
        """One report's path."""
        return f"{self.collection(namespace)}/{name}"

    def watched(self) -> str:
        """The cluster-wide collection snapready lists and watches: its own reports only."""
        selector = quote(f"{MANAGED_BY[0]}={MANAGED_BY[1]}", safe="")
        return f"{self.collection()}?labelSelector={selector}"


OPENREPORTS = ReportApi("openreports", "openreports.io", "v1alpha1", "Report", "reports", True)
WGPOLICY = ReportApi(
    "wgpolicyk8s", "wgpolicyk8s.io", "v1alpha2", "PolicyReport", "policyreports", False
)
APIS = (OPENREPORTS, WGPOLICY)
"""In the order ``reports.api: auto`` tries them: OpenReports first (the successor)."""


def candidates(choice: str) -> tuple[ReportApi, ...]:
    """The APIs discovery tries for the ``reports.api`` setting (``off``: none)."""
    if choice == "auto":
        return APIS
    return tuple(api for api in APIS if api.name == choice)


@dataclass(frozen=True)
class Scope:
    """The judged object (the report's ``scope`` and owner)."""

    api_version: str
    kind: str
    namespace: str
    name: str
    uid: str

    def reference(self) -> RawObject:
        """The ObjectReference of ``scope``."""
        return {
            "apiVersion": self.api_version,
            "kind": self.kind,
            "namespace": self.namespace,
            "name": self.name,
            "uid": self.uid,
        }


@dataclass(frozen=True)
class Result:
    """One result: a rule's findings on the object, or the restore prediction.

    Attributes:
        policy: the PodSnapshotPolicies that select the object (``a,b``, sorted).
        rule: the rule id (``gvisor-runtime``) or ``restore-prediction``.
        result: pass|fail|warn|error|skip; ``severity``: critical|high|medium|low|info.
        message: what to fix (clipped to ``MAX_MESSAGE_CHARS``).
        properties: sorted ``(key, value)`` pairs (values clipped to ``MAX_PROPERTY_CHARS``).
    """

    policy: str
    rule: str
    result: ResultStatus
    severity: Severity
    message: str
    properties: tuple[tuple[str, str], ...] = ()


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def result(  # noqa: PLR0917 - the fields of one result, in the schema's order
    policy: str,
    rule: str,
    status: ResultStatus,
    severity: Severity,
    message: str,
    properties: Mapping[str, str | None] | None = None,
) -> Result:
    """A ``Result`` with its message and property values clipped; None values left out."""
    props = tuple(
        sorted(
            (key, _clip(value, MAX_PROPERTY_CHARS))
            for key, value in (properties or {}).items()
            if value is not None
        )
    )
    return Result(policy, rule, status, severity, _clip(message, MAX_MESSAGE_CHARS), props)


def kept(results: Iterable[Result], statuses: Sequence[str]) -> tuple[Result, ...]:
    """The results whose status ``reports.results`` keeps (Kyverno's allowedResults)."""
    allowed = set(statuses)
    return tuple(r for r in results if r.result in allowed)


def summary(results: Iterable[Result]) -> dict[str, int]:
    """``summary``: how many results of each status (every key present)."""
    counts: dict[str, int] = dict.fromkeys(RESULT_STATUSES, 0)
    for item in results:
        counts[item.result] += 1
    return counts


def digest(scope: Scope, results: Sequence[Result]) -> str:
    """24 hex of the sha256 of the content (scope and results, no timestamps): equal digests,
    equal reports, so an unchanged object is never written again."""
    content = [
        scope.reference(),
        [[r.policy, r.rule, r.result, r.severity, r.message, list(r.properties)] for r in results],
    ]
    return hashlib.sha256(canonical_json(content)).hexdigest()[:24]


def _result_json(item: Result, seconds: int) -> RawObject:
    body: RawObject = {
        "source": SOURCE,
        "policy": item.policy,
        "rule": item.rule,
        "category": CATEGORY,
        "severity": item.severity,
        "result": item.result,
        "timestamp": {"seconds": seconds, "nanos": 0},
        "message": item.message,
    }
    if item.properties:
        body["properties"] = dict(item.properties)
    return body


def content(api: ReportApi, scope: Scope, results: Sequence[Result], seconds: int) -> RawObject:
    """The report's top-level fields (what a merge patch replaces): ``scope``, ``summary``,
    ``results`` (each stamped ``seconds``, Unix time of this judgement) and, for OpenReports,
    ``source``."""
    body: RawObject = {
        "scope": scope.reference(),
        "summary": summary(results),
        "results": [_result_json(item, seconds) for item in results],
    }
    if api.top_source:
        body["source"] = SOURCE
    return body


def report_object(
    api: ReportApi,
    scope: Scope,
    results: Sequence[Result],
    *,
    digest_key: str,
    seconds: int,
) -> RawObject:
    """The whole report for a create: named after the object's uid, owned by it, labelled as
    snapready's, with its digest under ``digest_key`` (``<prefix>report-digest``)."""
    return {
        "apiVersion": api.api_version,
        "kind": api.kind,
        "metadata": {
            "name": scope.uid,
            "namespace": scope.namespace,
            "labels": {MANAGED_BY[0]: MANAGED_BY[1]},
            "annotations": {digest_key: digest(scope, results)},
            "ownerReferences": [
                {
                    "apiVersion": scope.api_version,
                    "kind": scope.kind,
                    "name": scope.name,
                    "uid": scope.uid,
                }
            ],
        },
        **content(api, scope, results, seconds),
    }


@dataclass(frozen=True)
class ReportView:
    """What the report cache keeps of one of snapready's reports.

    Attributes:
        namespace, name, uid: identity (``name`` is the scope object's uid).
        digest: the content digest written with it ("" when missing: rewritten).
        counts: ``summary`` as ``(pass, fail, warn, error, skip)`` (the results gauge).
    """

    namespace: str
    name: str
    uid: str
    digest: str
    counts: tuple[int, int, int, int, int]


def report_view(obj: RawObject, digest_key: str) -> ReportView | None:
    """The cached part of a report; None without namespace or name."""
    metadata = mapping(obj.get("metadata"))
    namespace, name = metadata.get("namespace"), metadata.get("name")
    if not isinstance(namespace, str) or not isinstance(name, str):
        return None
    found = mapping(metadata.get("annotations")).get(digest_key)
    counted = mapping(obj.get("summary"))
    numbers = [counted.get(status) for status in RESULT_STATUSES]
    p, f, w, e, s = (n if isinstance(n, int) and n >= 0 else 0 for n in numbers)
    return ReportView(
        namespace,
        name,
        str(metadata.get("uid") or ""),
        found if isinstance(found, str) else "",
        (p, f, w, e, s),
    )
