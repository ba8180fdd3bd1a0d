"""Helpers for the cluster tier on the real API server (``cluster/api/test_real_apiserver*``).

* ``SpyTransport`` wraps the production ``KubeTransport`` (so every request still goes to the
  real kube-apiserver) and records what the reflectors asked and what the server answered: list
  resourceVersions, the resourceVersion each watch started from, every event of every watch,
  every error. It can also ``drop`` the open watches of a path (the connection breaks), ``hold``
  the next watch of a path until ``release`` (the client is disconnected for a while) and
  ``release`` it from another resourceVersion (the client comes back with one the server forgot).
* Objects as the API expects them: PodSnapshotPolicy, PodSnapshotStorageConfig, Node.
* etcd's v3 HTTP gateway (the control plane's etcd client URL): current revision, compaction.
* A test rule that makes "selected by a policy" visible in decisions (``SelectedRule``).
"""

from __future__ import annotations

import base64
import builtins
import contextlib
import json
import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.conftest import load_review
from tests.envtest.controlplane import ControlPlane
from webhook.admission.engine import Engine, admit
from webhook.base.config import Settings
from webhook.base.errors import SnapreadyError
from webhook.base.types import Finding, RawObject
from webhook.cluster.api.caches import ClusterSource, timing_from
from webhook.cluster.api.client import api_client
from webhook.cluster.api.transport import KubeTransport, KubeWatchStream
from webhook.kube.responses import Decision
from webhook.kube.review import parse_review
from webhook.pod.context import PodContext

GROUP = "podsnapshot.gke.io"
POLICIES = f"/apis/{GROUP}/v1/podsnapshotpolicies"
POLICIES_V1ALPHA1 = f"/apis/{GROUP}/v1alpha1/podsnapshotpolicies"
STORAGE_CONFIGS = f"/apis/{GROUP}/v1/podsnapshotstorageconfigs"
NAMESPACES = "/api/v1/namespaces"
NODES = "/api/v1/nodes"
COMPUTE_CLASSES = "/apis/cloud.google.com/v1/computeclasses"
DISRUPTION_BUDGETS = "/apis/policy/v1/poddisruptionbudgets"
VERSION = "/version"
SNAPSHOTS = f"/apis/{GROUP}/v1/podsnapshots"
RECORDS = "/apis/snapready.io/v1alpha1/snapshotrecords"
"""snapready's own SnapshotRecords (one per PodSnapshot)."""
SELECTED_PODS = "/api/v1/pods?labelSelector=snapready.io%2Fselected%3Dtrue"
"""The pod cache's collection: only pods labelled snapready.io/selected=true."""
GKE_EVENTS = "/api/v1/events?fieldSelector=reason%3DGKEPodSnapshotting"
"""GKE's restore evidence: only core/v1 Events of reason GKEPodSnapshotting."""
ALL_CACHES = (
    "podsnapshotpolicies",
    "podsnapshotstorageconfigs",
    "namespaces",
    "nodes",
    "computeclasses",
    "version",
    "podsnapshots",
    "snapshotrecords",
    "pods",
    "gkeevents",
)


# --------------------------------------------------------------------------------------------
# Decisions


class SelectedRule:
    """Test rule: one ``deny`` finding naming the selecting policies, on every selected pod."""

    rule_ids: tuple[str, ...] = ("test-selected",)

    def __call__(self, pod: PodContext) -> list[Finding]:
        names = ",".join(p.name for p in pod.policies)
        return [Finding(pod.spec_field("containers"), "test-selected", names, "deny")]


def pod_review(labels: dict[str, str], namespace: str = "snap") -> dict[str, Any]:
    """Review 03 (gVisor, 4 x L4 on g2-standard-48) with other labels and namespace."""
    review = load_review("03")
    review["request"]["namespace"] = namespace
    review["request"]["object"]["metadata"]["labels"] = labels
    review["request"]["object"]["metadata"]["namespace"] = namespace
    return review


def validate(engine: Engine, review: dict[str, Any]) -> Decision:
    """Run ``review`` through ``admit`` on the validating endpoint."""
    request = parse_review(json.dumps(review).encode()).request
    return admit(request, "validate", engine)


def selected_by(decision: Decision) -> str | None:
    """The policy names the test rule reported (denial or warning), None when not selected."""
    findings = decision.audit.get("findings") or []
    names = [f.message for f in findings if f.rule == "test-selected"]
    return names[0] if names else None


# --------------------------------------------------------------------------------------------
# A recording transport around the real one


@dataclass
class WatchCall:
    """One watch request and the events its stream delivered (in order)."""

    path: str
    resource_version: str
    events: list[RawObject] = field(default_factory=list)


class SpyStream:
    """A real watch stream whose events are recorded on the way to the reflector."""

    def __init__(self, call: WatchCall, inner: KubeWatchStream) -> None:
        self.call, self._inner = call, inner

    def __iter__(self) -> Iterator[RawObject]:
        for event in self._inner:
            self.call.events.append(event)
            yield event

    def close(self) -> None:
        """Abort the real stream (as the reflector's ``stop`` and ``SpyTransport.drop`` do)."""
        self._inner.close()


class SpyTransport:
    """``syncing.Transport`` that forwards to a real ``KubeTransport`` and records everything.

    Attributes:
        lists: ``(path, resourceVersion of the answer)`` per successful list, in order.
        watches: every watch request (``WatchCall``), in order.
        errors: ``(path, error text)`` per failed request (NotServed, Gone, TransportError).
        gets: paths of the successful single GETs.
    """

    def __init__(self, inner: KubeTransport) -> None:
        self._inner = inner
        self.lists: builtins.list[tuple[str, str]] = []
        self.watches: builtins.list[WatchCall] = []
        self.errors: builtins.list[tuple[str, str]] = []
        self.gets: builtins.list[str] = []
        self._open: dict[str, builtins.list[SpyStream]] = {}
        self._held: dict[str, threading.Event] = {}
        self._waiting: dict[str, threading.Event] = {}
        self._rewind: dict[str, str] = {}
        self._lock = threading.Lock()

    def list(
        self, path: str, *, page_size: int, each: Callable[[RawObject], None] | None = None
    ) -> tuple[builtins.list[RawObject], str]:
        try:
            items, version = self._inner.list(path, page_size=page_size, each=each)
        except SnapreadyError as exc:
            self.errors.append((path, f"{type(exc).__name__}: {exc}"))
            raise
        self.lists.append((path, version))
        return items, version

    def watch(self, path: str, *, resource_version: str, timeout_seconds: int) -> SpyStream:
        held = self._held.get(path)
        if held is not None:
            self._waiting.setdefault(path, threading.Event()).set()
            held.wait()
        with self._lock:
            version = self._rewind.pop(path, resource_version)
        call = WatchCall(path, version)
        self.watches.append(call)
        try:
            inner = self._inner.watch(
                path, resource_version=version, timeout_seconds=timeout_seconds
            )
        except SnapreadyError as exc:
            self.errors.append((path, f"{type(exc).__name__}: {exc}"))
            raise
        stream = SpyStream(call, inner)
        with self._lock:
            self._open.setdefault(path, []).append(stream)
        return stream

    def get(self, path: str) -> RawObject:
        try:
            document = self._inner.get(path)
        except SnapreadyError as exc:
            self.errors.append((path, f"{type(exc).__name__}: {exc}"))
            raise
        self.gets.append(path)
        return document

    # -- what tests read -----------------------------------------------------------------------

    def lists_of(self, path: str) -> builtins.list[str]:
        """The resourceVersions of the successful lists of ``path``."""
        return [version for listed, version in list(self.lists) if listed == path]

    def watches_of(self, path: str) -> builtins.list[WatchCall]:
        """The watch requests of ``path``."""
        return [call for call in list(self.watches) if call.path == path]

    def requested(self) -> set[str]:
        """Every path asked for (successfully or not)."""
        return (
            {path for path, _ in self.lists}
            | {call.path for call in self.watches}
            | {path for path, _ in self.errors}
            | set(self.gets)
        )

    # -- what tests do -------------------------------------------------------------------------

    def hold(self, path: str) -> None:
        """Park the next watch requests of ``path`` (before they reach the server)."""
        self._waiting[path] = threading.Event()
        self._held[path] = threading.Event()

    def held(self) -> builtins.list[str]:
        """Paths whose watches are parked."""
        return list(self._held)

    def wait_held(self, path: str, timeout: float = 10.0) -> bool:
        """Wait until a watch of ``path`` is parked by ``hold``; True when one is."""
        return self._waiting[path].wait(timeout)

    def release(self, path: str, *, from_version: str | None = None) -> None:
        """Let parked watches of ``path`` go; the first one starts at ``from_version`` if given."""
        if from_version is not None:
            with self._lock:
                self._rewind[path] = from_version
        event = self._held.pop(path, None)
        if event is not None:
            event.set()

    def drop(self, path: str) -> None:
        """Break every open watch connection of ``path`` (the reflector sees the stream end)."""
        with self._lock:
            streams = self._open.pop(path, [])
        for stream in streams:
            stream.close()


def spied_source(settings: Settings) -> tuple[ClusterSource, SpyTransport]:
    """A started ``ClusterSource`` wired like ``start_cluster``'s (caches only, no
    controllers), through a spy."""
    api = api_client(settings)
    spy = SpyTransport(KubeTransport(api, settings.source.request_timeout_seconds))
    source = ClusterSource(
        spy, prefix=settings.prefix, timing=timing_from(settings.source), on_stop=api.close
    )
    source.start()
    return source, spy


# --------------------------------------------------------------------------------------------
# API objects


def policy(
    name: str,
    namespace: str,
    match_labels: dict[str, str],
    *,
    trigger: str = "workload",
    version: str = "v1",
    **spec: Any,
) -> dict[str, Any]:
    """A PodSnapshotPolicy the CRD accepts (``spec`` entries override the defaults)."""
    return {
        "apiVersion": f"{GROUP}/{version}",
        "kind": "PodSnapshotPolicy",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "selector": {"matchLabels": match_labels},
            "storageConfigName": "snapshots-us-central1",
            "triggerConfig": {"type": trigger},
            "retentionConfig": {"lastAccessTimeout": "30d"},
            **spec,
        },
    }


def storage_config(name: str, bucket: str, path: str = "clusters/envtest") -> dict[str, Any]:
    """A PodSnapshotStorageConfig (cluster-scoped)."""
    return {
        "apiVersion": f"{GROUP}/v1",
        "kind": "PodSnapshotStorageConfig",
        "metadata": {"name": name},
        "spec": {"snapshotStorageConfig": {"gcs": {"bucket": bucket, "path": path}}},
    }


def node(name: str, labels: dict[str, str]) -> client.V1Node:
    """A Node object (no kubelet behind it: only its labels matter here)."""
    return client.V1Node.model_validate({"metadata": {"name": name, "labels": labels}})


def create_policy(api_client: client.ApiClient, body: dict[str, Any]) -> dict[str, Any]:
    """Create a PodSnapshotPolicy (the version in its ``apiVersion``); the stored object."""
    version = str(body["apiVersion"]).split("/")[1]
    created = client.CustomObjectsApi(api_client).create_namespaced_custom_object(
        GROUP, version, body["metadata"]["namespace"], "podsnapshotpolicies", body
    )
    return cast("dict[str, Any]", created)


def delete_quietly(call: Any, *args: Any) -> None:
    """``call(*args)``, ignoring 404 (cleanup of something a test may have deleted already)."""
    try:
        call(*args)
    except ApiException as error:
        if error.status != 404:
            raise


# --------------------------------------------------------------------------------------------
# etcd (v3 HTTP gateway on the control plane's client URL)


def etcd_url(plane: ControlPlane) -> str:
    """etcd's client URL, read from the running etcd's command line (``--listen-client-urls``)."""
    etcd = next(record for record in plane.processes if record.name == "etcd")
    argv = Path(f"/proc/{etcd.pid}/cmdline").read_bytes().decode().split("\0")
    flag = "--listen-client-urls="
    return next(arg.removeprefix(flag) for arg in argv if arg.startswith(flag))


def etcd_post(url: str, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """POST a JSON body to etcd's gateway: (status, decoded answer)."""
    request = urllib.request.Request(
        url + path, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        with contextlib.suppress(ValueError):
            return error.code, json.loads(error.read())
        return error.code, {}


def etcd_compact(url: str) -> int:
    """Compact etcd (physically) up to its current revision; that revision."""
    key = base64.b64encode(b"/registry/").decode()
    status, answer = etcd_post(url, "/v3/kv/range", {"key": key, "count_only": True})
    assert status == 200, answer
    revision = int(answer["header"]["revision"])
    status, answer = etcd_post(url, "/v3/kv/compaction", {"revision": revision, "physical": True})
    assert status == 200, answer
    return revision


def etcd_read_at(url: str, revision: int) -> tuple[int, str]:
    """Read at an old ``revision``: (HTTP status, error message or "")."""
    key = base64.b64encode(b"/registry/").decode()
    status, answer = etcd_post(url, "/v3/kv/range", {"key": key, "revision": revision})
    return status, str(answer.get("message", ""))
