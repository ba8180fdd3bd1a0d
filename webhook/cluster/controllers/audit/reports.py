"""The leader's report writer: which report API is served, snapready's reports, paced writes.

Discovery (``discover``): the group versions ``reports.api`` allows (``auto``: OpenReports
``openreports.io/v1alpha1``, else wg-policy ``wgpolicyk8s.io/v1alpha2``; ``kube.policy_reports``)
are read from ``/apis/<group>/<version>`` until one serves its namespaced reports; then one
``limit=1`` list of snapready's own reports proves RBAC lets it read them. No API, or a refused
list: reports are off, said once in the log and always in ``note`` (``/readyz``), re-checked
every ``source.resync_seconds``.

Only when an API is found does a reflector list and watch snapready's reports (label
``app.kubernetes.io/managed-by=snapready``; ``kube.policy_reports.report_view``: digest and
summary, a few strings per report). A write compares first: the content digest of what the
report should say against the cached report's (and against the digest this replica wrote a
moment ago, which the watch may not have delivered yet), so an unchanged object costs no
request. Writes are a create (409: written meanwhile, patched instead), a JSON merge patch of
the top-level fields (``results`` replaced whole, as RFC 7386 replaces arrays) or a DELETE with
the cached uid as precondition, all through the lease-fenced transport (``cluster.api.fence``) and
a token bucket (``reports.writes_per_second``, burst ``reports.write_burst``). A 4xx other
than 409 and 429 is logged once per distinct message and not retried for that object until it
changes; everything else is retried on the next judgement.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Protocol

from webhook.base.bucket import Bucket
from webhook.base.reporting import ReportSettings
from webhook.base.types import RawObject, mapping
from webhook.cluster.api.reflector import Reflector
from webhook.cluster.api.syncing import (
    Conflict,
    NotServed,
    Resource,
    Timing,
    Transport,
    TransportError,
    describe,
)
from webhook.kube.policy_reports import (
    ReportApi,
    ReportView,
    Result,
    Scope,
    candidates,
    content,
    digest,
    kept,
    report_object,
    report_view,
)

log = logging.getLogger("snapready.reports")
REPORT_ACTIONS = ("created", "updated", "deleted", "failed")
"""``snapready_reports_total{action}``: writes by what they did (``failed``: refused or not
sent, e.g. a lost Lease)."""
MAX_LOGGED = 64
"""Distinct refusal messages logged at warning level (then at debug): a misconfigured
cluster cannot flood the log."""


class WriteTransport(Protocol):
    """The leader's writes (lease-fenced in production)."""

    def create(self, path: str, body: RawObject) -> RawObject: ...

    def merge_patch(
        self, path: str, patch: RawObject, *, field_manager: str = "snapready"
    ) -> RawObject: ...

    def delete(self, path: str, *, uid: str = "") -> RawObject: ...


class ReportWriter:
    """Discovery, the cache of snapready's reports and the paced writes (module docstring).

    Args:
        writes: the lease-fenced transport (create, merge patch, delete).
        reads: the plain transport (discovery, the report list and watch).
        settings: ``reports.*``; ``digest_key``: ``<prefix>report-digest``.
        timing: the caches' timing (backoff, watch length, page size).
        wait: sleeps up to N seconds, True when the caller is stopping (``Worker.wait``).
        clock: monotonic seconds (the token bucket).
    """

    def __init__(
        self,
        writes: WriteTransport,
        reads: Transport,
        settings: ReportSettings,
        *,
        digest_key: str,
        timing: Timing,
        wait: Callable[[float], bool],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.writes, self.reads, self.settings = writes, reads, settings
        self.digest_key, self.timing, self.wait = digest_key, timing, wait
        self.bucket = Bucket(settings.write_burst, settings.writes_per_second, clock)
        self.api: ReportApi | None = None
        self.note = "not checked yet"
        """Why reports are on or off (``/readyz`` shows it)."""
        self.actions: Counter[str] = Counter()
        """Writes by ``REPORT_ACTIONS`` (``snapready_reports_total``)."""
        self.cache: Reflector | None = None
        self._wrote: dict[str, str] = {}
        """``namespace/name`` -> digest written, until the watch delivers it."""
        self._refused: dict[str, str] = {}
        """``namespace/name`` -> the digest a permanent refusal was for (not retried)."""
        self._logged: set[str] = set()
        self._said = ""

    # --- discovery ------------------------------------------------------------------------

    def discover(self) -> ReportApi | None:
        """The report API to write, or None (``note`` says why; logged once per reason)."""
        if self.settings.api == "off":
            self._off("off (reports.api: off)")
            return None
        tried = candidates(self.settings.api)
        for api in tried:
            try:
                document = self.reads.get(api.discovery)
            except NotServed:
                continue
            except TransportError as exc:
                if self.api is not None:  # a passing error: keep writing what was found
                    log.info("report API discovery failed: %s", describe(exc))
                    return self.api
                self._off(f"off: discovery of {api.api_version} failed: {describe(exc)}")
                return None
            resources = document.get("resources")
            names = (
                {mapping(r).get("name") for r in resources if isinstance(r, dict)}
                if (isinstance(resources, list))
                else set()
            )
            if api.plural not in names:
                continue
            try:  # one page of one item: RBAC lets snapready read its reports
                self.reads.get(f"{api.watched()}&limit=1")
            except (TransportError, NotServed) as exc:
                self._off(
                    f"off: listing {api.api_version} {api.plural} failed ({describe(exc)}): "
                    "grant snapready get/list/watch/create/patch/delete on them (chart value "
                    "reports.api)"
                )
                return None
            return self._on(api)
        served = " nor ".join(api.api_version for api in tried)
        what = f"neither {served} is" if len(tried) > 1 else f"{served} is not"
        self._off(
            f"off: {what} served (install a report CRD, e.g. the chart's "
            "reports.installCRDs; re-checked every source.resync_seconds)"
        )
        return None

    def _off(self, note: str) -> None:
        """Reports are off for ``note``'s reason (logged once per reason)."""
        if self.api is not None:
            self.stop()
        self.api = None
        self.note = note
        if self._said != note:
            self._said = note
            log.warning("policy reports %s", note)

    def _on(self, api: ReportApi) -> ReportApi:
        if self.api is not None and self.api != api:
            self.stop()  # another API than before (a CRD installed or removed): a new cache
        self.api, self.note = api, f"{api.api_version} {api.kind}"
        if self._said != self.note:
            self._said = self.note
            log.info("policy reports: writing %s %s", api.api_version, api.kind)
        return api

    # --- the cache --------------------------------------------------------------------------

    def start_cache(self) -> bool:
        """Start the reflector of snapready's reports (once per API); True once it has listed."""
        api = self.api
        if api is None:
            return False
        if self.cache is None:
            resource = Resource(
                "reports",
                (api.watched(),),
                convert=lambda obj: report_view(obj, self.digest_key),
                build=lambda items: items,
                update=lambda view, _old, _new: view,  # readers look items up by key
            )
            self.cache = Reflector(resource, self.reads, self.timing, threading.Lock(), _nothing)
            self.cache.start()
        return bool(self.cache.synced and self.cache.served)

    def reports(self) -> list[ReportView]:
        """snapready's reports as cached (empty before the cache listed)."""
        cache = self.cache
        return list(cache.items.values()) if cache is not None else []

    def cached(self, namespace: str, name: str) -> ReportView | None:
        """One cached report."""
        cache = self.cache
        found = cache.items.get(f"{namespace}/{name}") if cache is not None else None
        return found if isinstance(found, ReportView) else None

    def stop(self) -> None:
        """Stop the reflector (it is started again with ``start_cache``)."""
        cache, self.cache = self.cache, None
        if cache is not None:
            cache.stop()

    def join(self, timeout: float) -> bool:
        """Wait for the reflector thread; True when it ended (or never ran)."""
        cache = self.cache
        return cache.join(timeout) if cache is not None else True

    # --- writes -----------------------------------------------------------------------------

    def write(self, scope: Scope, results: Sequence[Result], seconds: int) -> str:
        """Make the report of ``scope`` say ``results`` (those ``reports.results`` keeps; none:
        no report). Returns ``unchanged``, ``created``, ``updated``, ``deleted``, ``failed``
        or ``skipped`` (refused before for this content, or no API)."""
        api = self.api
        if api is None:
            return "skipped"
        chosen = kept(results, self.settings.results)
        key = f"{scope.namespace}/{scope.uid}"
        current = self.cached(scope.namespace, scope.uid)
        if not chosen:
            if current is None or self._wrote.get(key) == "":
                return "unchanged"
            return self.delete(current)
        want = digest(scope, chosen)
        self._settle(key, current)
        if (current is not None and current.digest == want) or self._wrote.get(key) == want:
            return "unchanged"
        if self._refused.get(key) == want:
            return "skipped"
        if not self._token():
            return "failed"
        try:
            return self._put(api, scope, chosen, want, seconds, fresh=current is None)
        except (TransportError, NotServed) as exc:
            return self._failed(key, want, f"report of {scope.kind} {key}", exc)

    def _put(
        self,
        api: ReportApi,
        scope: Scope,
        chosen: Sequence[Result],
        want: str,
        seconds: int,
        *,
        fresh: bool,
    ) -> str:
        """Create the report (``fresh``: the cache has none), else merge-patch its content; a
        409 on the create patches, a 404 on the patch creates."""
        key = f"{scope.namespace}/{scope.uid}"
        body = report_object(api, scope, chosen, digest_key=self.digest_key, seconds=seconds)
        if fresh or self._wrote.get(key) == "":
            try:
                self.writes.create(api.collection(scope.namespace), body)
                return self._done(key, want, "created")
            except Conflict:  # written meanwhile (a predecessor, a lagging cache)
                pass
        patch = {
            "metadata": {"annotations": {self.digest_key: want}},
            **content(api, scope, chosen, seconds),
        }
        try:
            self.writes.merge_patch(api.path(scope.namespace, scope.uid), patch)
        except NotServed:  # deleted meanwhile (the cache still had it)
            self.writes.create(api.collection(scope.namespace), body)
            return self._done(key, want, "created")
        return self._done(key, want, "updated")

    def delete(self, report: ReportView) -> str:
        """Delete one of snapready's reports (uid precondition); ``deleted`` or ``failed``."""
        api = self.api
        key = f"{report.namespace}/{report.name}"
        if api is None or self._wrote.get(key) == "":
            return "skipped"
        if not self._token():
            return "failed"
        try:
            self.writes.delete(api.path(report.namespace, report.name), uid=report.uid)
        except (NotServed, Conflict):  # gone already (the garbage collector), or replaced
            return "unchanged"
        except TransportError as exc:
            return self._failed(key, "", f"deletion of report {key}", exc)
        return self._done(key, "", "deleted")

    def _token(self) -> bool:
        """Wait for a write token (False when stopping)."""
        pause = 1.0 / self.settings.writes_per_second
        while not self.bucket.take():
            if self.wait(pause):
                return False
        return True

    def _settle(self, key: str, current: ReportView | None) -> None:
        """Forget a digest this replica wrote once the cache shows it."""
        wrote = self._wrote.get(key)
        if wrote is None:
            return
        if (current is not None and current.digest == wrote) or (current is None and not wrote):
            del self._wrote[key]

    def _done(self, key: str, want: str, action: str) -> str:
        self.actions[action] += 1
        self._wrote[key] = want
        self._refused.pop(key, None)
        cache = self.cache
        cached = len(cache.items) if cache is not None else 0
        if len(self._wrote) > 4 * max(cached, 1024):  # never unbounded
            self._wrote.clear()
        return action

    def _failed(self, key: str, want: str, what: str, exc: Exception) -> str:
        self.actions["failed"] += 1
        text = describe(exc)
        permanent = text.startswith("HTTP 4") and not text.startswith(("HTTP 409", "HTTP 429"))
        if permanent and want:
            self._refused[key] = want
        message = text.split(":", 1)[0] if permanent else text
        if message not in self._logged and len(self._logged) < MAX_LOGGED:
            self._logged.add(message)
            log.warning("%s not written: %s", what, text)
        else:
            log.debug("%s not written: %s", what, text)
        return "failed"

    def forget(self, namespace: str, name: str) -> None:
        """Drop what is kept about one report (its object is gone)."""
        key = f"{namespace}/{name}"
        self._wrote.pop(key, None)
        self._refused.pop(key, None)


def _nothing() -> None:
    """The report cache's ``on_change``: readers look it up, nothing is rebuilt."""


def summed(reports: Sequence[ReportView]) -> dict[str, int]:
    """Results by status over ``reports`` (the ``snapready_report_results`` gauge)."""
    totals = dict.fromkeys(("pass", "fail", "warn", "error", "skip"), 0)
    for report in reports:
        for status, count in zip(totals, report.counts, strict=True):
            totals[status] += count
    return totals
