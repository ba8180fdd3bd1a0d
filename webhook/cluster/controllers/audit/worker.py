"""The leader's audit of existing objects, and the policy reports it writes
(docs/concepts/reports.md).

Admission judges a pod once, when it is created, and only when a policy selects it then; pods
created before snapready, before the policy that selects them now, or while snapready was down
under ``failurePolicy: Ignore`` were never judged. The audit judges every object a
PodSnapshotPolicy selects, as admission would now (``admission.audit.judge``: the same engine,
rules, modes and prediction), and writes one report per object (``reports``):

- when: a full pass when this replica starts leading and every ``reports.audit_period_seconds``;
  a pass over a namespace whose policies appeared, changed or went; and at once for a stamped
  pod the pod cache sees for the first time (created through admission) or whose recorded
  outcome or phase changed (GET, judge, write; ``observe``).
- what: per namespace with a policy, the pods each policy selects (one paginated list per
  policy with its selector as a label selector: ``snapshots.audit.selector_query``, so unselected
  pods are never read), running ones only; with ``reports.templates`` the pod templates of
  Deployments, StatefulSets, DaemonSets, Jobs (not a CronJob's) and CronJobs (no label
  selector can reach a template: the namespace's workloads are listed). Reports of objects that
  were not judged in a complete pass of their namespace (no longer selected, finished, the
  policy gone) are deleted.
- pace: ``reports.audit_objects_per_second`` (token bucket), list pages of
  ``reports.audit_page_size``, fetched only as fast as their objects are judged; writes through
  the writer's own bucket. So at 20,000 pods a pass is ~7 min of one page every 2 s, and no
  admission waits on it: the admission path does nothing new (no call, no lookup, no write).

Nothing runs while reports are off (no report API served, or ``reports.api: off``) or on a
follower, except discovery (one GET per ``source.resync_seconds``) so ``/readyz`` says why.
The never-judged objects found (``never_judged``) feed ``snapready_audit_never_judged`` and
``snapready_audit_would_deny``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping

from webhook.admission.audit import Judgement
from webhook.admission.decision import namespace_ignored
from webhook.admission.engine import Engine
from webhook.base.bucket import Bucket
from webhook.base.config import Settings
from webhook.base.keys import REPORT_DIGEST, RESTORE_OUTCOME
from webhook.base.types import RawObject, mapping
from webhook.cluster.api.syncing import (
    Gone,
    NotServed,
    Timing,
    Transport,
    TransportError,
    describe,
)
from webhook.cluster.api.template_lists import TEMPLATE_LISTS
from webhook.cluster.controllers.audit.passes import Found, judge_quietly, never_judged, summary
from webhook.cluster.controllers.audit.queue import StampedQueue
from webhook.cluster.controllers.audit.reports import ReportWriter, WriteTransport
from webhook.cluster.controllers.base import Reconciler
from webhook.kube.matching import Policy
from webhook.snapshots.audit import (
    TERMINAL_PHASES,
    NeverJudged,
    running,
    selector_query,
    with_query,
)
from webhook.snapshots.pod_records import PodRecord
from webhook.snapshots.state import ClusterState

log = logging.getLogger("snapready.audit")
POLL = 5.0
"""Seconds between looks at what is due when nothing wakes the worker."""


class AuditWorker(Reconciler):
    """The audit and its reports, leader only (module docstring).

    Args:
        writes: the lease-fenced transport (report writes).
        reads: the plain transport (discovery, lists, GETs, the report watch).
        engine: the admission engine over the cluster caches (``judge``).
        settings: all settings (``reports``, ``prefix``, ``outcomes.namespaces``).
        state, is_leader, lock, on_change: the caches, leadership, the source's lock and
            rebuild (``/readyz`` shows ``status``).
        timing: the caches' timing (discovery re-check, the report watch).
        clock: monotonic seconds.
    """

    first_delay = 0.0  # discovery at once, so ``/readyz`` says which report API is served
    initial_status = "starting"  # reports never gate readiness

    def __init__(
        self,
        writes: WriteTransport,
        reads: Transport,
        engine: Engine,
        settings: Settings,
        *,
        state: Callable[[], ClusterState],
        is_leader: Callable[[], bool],
        lock: threading.Lock,
        on_change: Callable[[], None],
        timing: Timing,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(
            "reports", lock, on_change, period=min(POLL, settings.reports.audit_period_seconds)
        )
        self.reads, self.engine, self.settings = reads, engine, settings
        self.config = settings.reports
        self.state, self.is_leader, self.clock, self.timing = state, is_leader, clock, timing
        self.mine = settings.outcomes.tracks
        self.writer = ReportWriter(
            writes,
            reads,
            self.config,
            digest_key=settings.annotation(REPORT_DIGEST),
            timing=timing,
            wait=self.wait,
            clock=clock,
        )
        rate = self.config.audit_objects_per_second
        self.bucket = Bucket(self.config.audit_page_size, rate, clock)
        self.full_passes = 0
        """Full audit passes completed while leading (tests, ``server.report_metrics``); the base
        class's ``pass_count`` counts every reconcile."""
        self.last_pass: float | None = None
        """Unix time the last full pass ended (``snapready_audit_last_pass_timestamp_seconds``)."""
        self.never: dict[str, NeverJudged] = {}
        """Object uid -> what the last pass found of a never-judged object."""
        self.queue = StampedQueue(settings.annotation(RESTORE_OUTCOME))
        """Stamped pods to judge between passes (``cluster.controllers.audit.queue``)."""
        self._due_namespaces: set[str] = set()
        self._next_full: float | None = None
        self._next_discovery = 0.0
        self._seen_policies: Mapping[str, tuple[Policy, ...]] | None = None
        self._leading = False
        self._term_passes = 0
        """Full passes in this leadership term (the first one reads every pod)."""
        self._during: set[str] = set()
        """Pods judged from the queue since the current namespace pass began (kept)."""

    # --- hooks (called from other threads; O(1)) ---------------------------------------------

    def observe(self, record: PodRecord) -> None:
        """A pod record the pod cache now holds: queue it when it is new to this leader or its
        recorded outcome or phase changed (judged again). O(1)."""
        if not self._term_passes or not self._leading or not record.uid:
            return  # before the first pass: the pass reads every pod
        shape = (record.outcome, record.phase in TERMINAL_PHASES)
        if self.mine(record.namespace) and self.queue.offer(
            record.uid, record.namespace, record.name, shape
        ):
            self.notify()

    def gone(self, record: PodRecord) -> None:
        """A stamped pod left the pod cache: forget it (its report goes with it)."""
        self.queue.forget(record.uid)
        self.never.pop(record.uid, None)
        self.writer.forget(record.namespace, record.uid)

    def stop(self) -> None:
        """Stop the loop and the report cache."""
        super().stop()
        self.writer.stop()

    def join(self, timeout: float) -> bool:
        """Wait for the loop and the report cache's thread."""
        return super().join(timeout) and self.writer.join(timeout)

    # --- the loop ------------------------------------------------------------------------------

    def reconcile(self) -> None:
        """One pass (woken by leadership, policy changes, queued pods; else every ``POLL`` s):
        discovery when due; on the leader with an API served and synced caches, the due
        passes, then the queued pods."""
        now = self.clock()
        if now >= self._next_discovery:
            self._next_discovery = now + self.timing.recheck
            self.writer.discover()
        if self.writer.api is None:
            self._stand_down()
            self.set_status(self.writer.note)
            return
        if not self.is_leader():
            self._stand_down()
            self.set_status(f"{self.writer.note}: written by the leader")
            return
        state = self.state()
        if not self.writer.start_cache() or not (state.synced and state.snapshots_known):
            self.set_status(f"{self.writer.note}: waiting for the caches")
            return
        if not self._leading:
            self._leading, self._next_full = True, now  # a full pass first
            self._seen_policies = dict(state.policies.by_namespace)
        self._policy_changes(state)
        if self._next_full is not None and now >= self._next_full:
            if not self._term_passes:
                self.set_status(f"{self.writer.note}: first audit pass running")
            self._full_pass()
        elif self._due_namespaces:
            due, self._due_namespaces = sorted(self._due_namespaces), set()
            for namespace in due:
                if not self._namespace_pass(namespace):
                    self._due_namespaces.add(namespace)  # not finished: again
                    break
        self._drain()
        self.set_status(self._summary())

    def _stand_down(self) -> None:
        """Not writing: forget the leader's bookkeeping (a later term starts with a pass)."""
        if self._leading:
            self._leading, self._next_full, self._term_passes = False, None, 0
            self.queue.clear()
            self.never.clear()
            self._due_namespaces.clear()

    def _policy_changes(self, state: ClusterState) -> None:
        """Namespaces whose policies appeared, changed or went since the last look."""
        seen, now = self._seen_policies or {}, state.policies.by_namespace
        if seen is now:
            return
        for namespace in set(seen) | set(now):
            if seen.get(namespace) != now.get(namespace) and self.mine(namespace):
                self._due_namespaces.add(namespace)
        self._seen_policies = now

    def _summary(self) -> str:
        return summary(self.writer.note, len(self.writer.reports()), self.never, self.last_pass)

    # --- passes ------------------------------------------------------------------------------

    def _full_pass(self) -> None:
        """Every namespace with a policy or a report of snapready's, then the next due time."""
        started = self.clock()
        state = self.state()
        namespaces = set(state.policies.by_namespace) | {
            report.namespace for report in self.writer.reports()
        }
        for namespace in sorted(n for n in namespaces if self.mine(n)):
            if not self._namespace_pass(namespace):
                return  # stopping or no longer leading: the next term starts over
        self._due_namespaces.clear()
        if not self._term_passes:
            self._catch_up(state)
        self.full_passes += 1
        self._term_passes += 1
        self.last_pass = time.time()
        self._next_full = started + self.config.audit_period_seconds
        log.info(
            "audit pass %d done in %.0f s: %d reports, %d never-judged object(s)",
            self.full_passes,
            self.clock() - started,
            len(self.writer.reports()),
            len(self.never),
        )

    def _catch_up(self, state: ClusterState) -> None:
        """After the first pass: queue the stamped pods it did not judge (created in a
        namespace it had passed already); later ones come through ``observe``."""
        for record in tuple(state.pods.values()):  # the live dict: a copy
            if record.uid and not self.queue.judged(record.uid) and self.mine(record.namespace):
                self.queue.add(record.uid, record.namespace, record.name)

    def _namespace_pass(self, namespace: str) -> bool:
        """Judge every selected object of ``namespace``, write their reports, delete the others
        (after complete lists only); False when stopped or no longer leading."""
        state = self.state()
        policies = state.policies.by_namespace.get(namespace, ())
        if namespace_ignored(state, namespace, self.settings):
            policies = ()  # <prefix>ignore: admission judges nothing here, nor does the audit
        found = Found()
        self._during = set()
        for policy in policies:
            path = with_query(
                f"/api/v1/namespaces/{namespace}/pods", selector_query(policy.selector)
            )
            if not self._list(path, "v1", "Pod", found):
                return False
        if policies and self.config.templates:
            for api_version, kind, resource in TEMPLATE_LISTS:
                path = f"/apis/{api_version}/namespaces/{namespace}/{resource}"
                if not self._list(path, api_version, kind, found):
                    return False
        for uid in [u for u, item in self.never.items() if item.namespace == namespace]:
            del self.never[uid]
        self.never.update(found.never)
        if found.complete:
            keep = found.keep | self._during
            for report in self.writer.reports():
                if report.namespace != namespace or report.name in keep:
                    continue
                if not self.is_leader() or self.stopping:
                    return False
                self.writer.delete(report)
        return True

    def _list(self, path: str, api_version: str, kind: str, found: Found) -> bool:
        """One paginated list, each item judged and reported as its page arrives; False when
        stopped or no longer leading (a failed list only marks the pass incomplete)."""
        alive = [True]

        def each(obj: RawObject) -> None:
            if not alive[0]:
                return
            if self.stopping or not self.is_leader() or not self._pace():
                alive[0] = False
                return
            self._one(obj, api_version, kind, found)

        for _attempt in range(2):
            try:
                self.reads.list(path, page_size=self.config.audit_page_size, each=each)
                break
            except Gone:  # the continue token expired: list again (judged uids are skipped)
                continue
            except (TransportError, NotServed) as exc:
                found.complete = False
                log.warning("audit: %s not listed: %s", path, describe(exc))
                break
        else:
            found.complete = False
        self._drain()  # the stamped pods that arrived meanwhile, between lists
        return alive[0]

    def _pace(self) -> bool:
        """Wait for a judging token (False when stopping)."""
        pause = 1.0 / self.config.audit_objects_per_second
        while not self.bucket.take():
            if self.wait(pause):
                return False
        return True

    def _one(self, obj: RawObject, api_version: str, kind: str, found: Found) -> None:
        """Judge one listed object, write its report and note what the pass found."""
        uid = found.take(obj, kind)
        if uid is None:
            return
        judgement = judge_quietly(obj, api_version, kind, self.engine)
        if judgement is None:
            return
        self._report(judgement, obj)
        found.keep.add(uid)
        if not judgement.admitted:
            found.never[uid] = never_judged(judgement)

    def _report(self, judgement: Judgement, obj: RawObject) -> None:
        """Write the report and remember the pod's shape (outcome, finished) as judged."""
        self.writer.write(judgement.scope, judgement.results, int(time.time()))
        if judgement.scope.kind == "Pod":
            self.queue.mark_pod(judgement.scope.uid, obj)

    # --- stamped pods between passes ------------------------------------------------------

    def _drain(self) -> None:
        """Judge the queued pods (GET each: the cache keeps no spec), paced."""
        while not self.stopping and self.is_leader():
            item = self.queue.pop()
            if item is None or not self._pace():
                return
            self._queued(*item)

    def _queued(self, uid: str, namespace: str, name: str) -> None:
        try:
            pod = self.reads.get(f"/api/v1/namespaces/{namespace}/pods/{name}")
        except NotServed:  # gone: its report goes with it
            self.queue.forget(uid)
            return
        except TransportError as exc:
            log.info("audit: pod %s/%s not read: %s", namespace, name, describe(exc))
            return
        if str(mapping(pod.get("metadata")).get("uid") or "") != uid:
            return  # another pod under the name now: the cache brings it
        if not running(pod):
            report = self.writer.cached(namespace, uid)
            if report is not None:
                self.writer.delete(report)
            self.queue.mark_pod(uid, pod)
            return
        judgement = judge_quietly(pod, "v1", "Pod", self.engine)
        if judgement is None:
            self.queue.mark_pod(uid, pod)
            return
        self._report(judgement, pod)
        self._during.add(uid)
        if judgement.admitted:
            self.never.pop(uid, None)
        else:
            self.never[uid] = never_judged(judgement)


__all__ = ["AuditWorker"]
