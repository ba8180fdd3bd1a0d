"""GKE's own evidence about a restore: its ``GKEPodSnapshotting`` Events and restore crashes. Pure.

What a real GKE cluster says (docs/gke-facts.md#section-9, from Google's reference architecture for
vLLM on Pod snapshots and field reports):

- ``restored``: a Normal core/v1 Event ``GKEPodSnapshotting`` on the pod, "Successfully restored
  the pod from PodSnapshot <ns>/<name>": restored from that snapshot.
- ``fallback``: a Warning ``GKEPodSnapshotting`` containing "falling back to a cold start of pod":
  the restore was skipped, for the reason GKE gives; the pod starts cold.
- ``checkpointed``: Normal "Successfully checkpointed the pod to PodSnapshot ..." (secondary
  source: shown in timelines only).
- a restore crash: a ``RESTORE_FAILURE_MARKERS`` text in a container's state or last termination
  (``status.containerStatuses``): gVisor's restore failed, CrashLoopBackOff, no fallback.

The exact message formats are not published; matching is by the substrings above,
case-insensitive, so a reworded prefix or suffix still matches, and an Event that matches none is
kept as ``other`` (shown in ``explain``'s timeline, never an outcome).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from webhook.base.types import RawObject, mapping

GKE_EVENT_REASON = "GKEPodSnapshotting"
"""``reason`` of GKE's snapshot Events (list/watch them with ``fieldSelector=reason=...``)."""
RESTORED_TEXT = "successfully restored the pod from podsnapshot"
FALLBACK_TEXT = "falling back to a cold start"
CHECKPOINTED_TEXT = "successfully checkpointed the pod to podsnapshot"
EventKind = Literal["restored", "fallback", "checkpointed", "other"]

RESTORE_FAILURE_MARKERS: tuple[tuple[str, str], ...] = (
    (
        "completerestore() failed",
        "gVisor: vfs.CompleteRestore() failed (docs/gke-facts.md#section-9)",
    ),
    ("restore failed", "runsc: 'OCI runtime restore failed' (docs/gke-facts.md#section-9)"),
    ("failed to restore", "runsc/containerd wording of the same failure"),
    (
        "restoring container",
        "runsc: how it wraps every error of a sandbox's restore (runsc/sandbox/sandbox.go)",
    ),
    (
        "restore spec validation",
        "runsc: the pod's OCI spec differs where gVisor compares it (runsc/boot/restore.go)",
    ),
    (
        "failed to load kernel",
        "runsc: the checkpoint's kernel state did not load (runsc/boot/restore.go), e.g. an "
        "emptyDir whose first mounter had exited: init-emptydir",
    ),
)
"""Lower-case substrings of the message of a container that could not start (its reason one of
``RUNTIME_REASONS``) that mean gVisor's restore crashed, with where each comes from; matched
outside the quoted parts of the message (``_unquoted``). A crash without one of them is an
application crash, not a restore failure."""
RUNTIME_REASONS: frozenset[str] = frozenset(
    {"StartError", "RunContainerError", "CreateContainerError", "ContainerCannotRun"}
)
"""Container-state reasons the container runtime or the kubelet set when a container could not
be started (containerd's CRI ``StartError``, exit code 128, the runtime's error as the message:
where ``OCI runtime restore failed`` appears; the kubelet's ``RunContainerError`` and
``CreateContainerError``; dockershim's ``ContainerCannotRun``). Only their messages are read
for ``RESTORE_FAILURE_MARKERS``: a container that ran and exited has reason ``Error``,
``Completed`` or ``OOMKilled`` and its own termination message (its ``/dev/termination-log``,
or the tail of its logs under ``FallbackToLogsOnError``), which the workload writes: an app
logging "failed to restore the session cache" before it crashes is no gVisor restore failure,
nor may a tenant's app make snapready report one."""
MAX_MESSAGE_CHARS = 512
_SNAPSHOT_NAME = re.compile(r"podsnapshot\s+([a-z0-9.-]+/[a-z0-9.-]+|[a-z0-9.-]+)", re.IGNORECASE)


@dataclass(frozen=True)
class GkeEvent:
    """One ``GKEPodSnapshotting`` Event about a pod, compact.

    Attributes:
        namespace, pod, uid: the involved pod (``uid`` may be empty).
        type: ``Normal`` or ``Warning``; ``kind``: what the message says (``EventKind``).
        message: GKE's message (cut to ``MAX_MESSAGE_CHARS``).
        time: when it first happened (RFC 3339: ``eventTime``, ``firstTimestamp`` or creation).
        snapshot: the PodSnapshot the message names (``name``, without the namespace), if any.
    """

    namespace: str
    pod: str
    uid: str
    type: str
    kind: EventKind
    message: str
    time: str
    snapshot: str | None = None


def classify(message: str) -> EventKind:
    """What a ``GKEPodSnapshotting`` message says (see the module table)."""
    text = message.lower()
    if FALLBACK_TEXT in text:
        return "fallback"
    if RESTORED_TEXT in text:
        return "restored"
    if CHECKPOINTED_TEXT in text:
        return "checkpointed"
    return "other"


def named_snapshot(message: str, namespace: str) -> str | None:
    """The PodSnapshot name in "... PodSnapshot <ns>/<name>" (only of ``namespace``), or None."""
    match = _SNAPSHOT_NAME.search(message)
    if match is None:
        return None
    where, _, name = match.group(1).rpartition("/")
    if where and where != namespace:
        return None
    return name.rstrip(".") or None


def gke_event(obj: RawObject) -> GkeEvent | None:
    """A core/v1 Event of reason ``GKEPodSnapshotting`` about a Pod in the Event's own namespace,
    else None (kept: nothing).

    GKE records its Events in the pod's namespace. The API server accepts a core/v1 Event
    whose ``involvedObject`` names a pod of another namespace when ``eventTime`` is set (a
    hostile trial, 2026-12-07: 201 in namespace A about a pod of B, with ``edit`` in A only),
    so such an Event says nothing about that pod: it would let a tenant decide another
    namespace's outcomes and release its readiness gates.
    """
    if obj.get("reason") != GKE_EVENT_REASON:
        return None
    involved = mapping(obj.get("involvedObject"))
    namespace, pod = involved.get("namespace"), involved.get("name")
    if involved.get("kind") != "Pod" or not isinstance(namespace, str) or not isinstance(pod, str):
        return None
    metadata = mapping(obj.get("metadata"))
    if metadata.get("namespace") != namespace:
        return None
    message = str(obj.get("message") or "")[:MAX_MESSAGE_CHARS]
    time = (
        obj.get("eventTime")
        or obj.get("firstTimestamp")
        or obj.get("lastTimestamp")
        or metadata.get("creationTimestamp")
    )
    kind = classify(message)
    return GkeEvent(
        namespace=namespace,
        pod=pod,
        uid=str(involved.get("uid") or ""),
        type=str(obj.get("type") or "Normal"),
        kind=kind,
        message=message,
        time=str(time or ""),
        snapshot=named_snapshot(message, namespace) if kind != "other" else None,
    )


PodEvents = Mapping[tuple[str, str], tuple[GkeEvent, ...]]
"""GKE's events by ``(namespace, pod name)``, oldest first."""


def index_events(events: Iterable[GkeEvent]) -> dict[tuple[str, str], tuple[GkeEvent, ...]]:
    """Group by pod, oldest first (``time``, then message, for a stable order)."""
    grouped: dict[tuple[str, str], list[GkeEvent]] = {}
    for event in events:
        grouped.setdefault((event.namespace, event.pod), []).append(event)
    return {key: tuple(sorted(items, key=_order)) for key, items in grouped.items()}


def updated_events(view: PodEvents, old: GkeEvent | None, new: GkeEvent | None) -> PodEvents:
    """``view`` with one event replaced (None: absent); a new mapping, ``view`` left alone."""
    out = dict(view)
    for event in (old, new):
        if event is None:
            continue
        key = (event.namespace, event.pod)
        rest = [e for e in out.get(key, ()) if e not in (old, new)]
        if event is new:
            rest.append(new)
        if rest:
            out[key] = tuple(sorted(rest, key=_order))
        else:
            out.pop(key, None)
    return out


def _order(event: GkeEvent) -> tuple[str, str]:
    return (event.time, event.message)


def events_of(events: PodEvents, namespace: str, pod: str, uid: str) -> tuple[GkeEvent, ...]:
    """GKE's events about this pod: those whose ``involvedObject.uid`` is the pod's. An event
    naming another uid (an earlier pod of the same name, e.g. a StatefulSet replica) or none
    (GKE's events reference the pod with its uid; a hand-written one may not) is not its."""
    found = events.get((namespace, pod), ())
    return tuple(e for e in found if e.uid == uid) if uid else found


def restore_failure(status: Any) -> str | None:
    """``<container>: <message>`` when a container's restore crashed, else None.

    Reads every entry of ``containerStatuses`` and ``initContainerStatuses``: ``state.waiting``
    (RunContainerError, CreateContainerError), ``state.terminated`` and
    ``lastState.terminated`` (StartError, as CrashLoopBackOff leaves it), and matches
    ``RESTORE_FAILURE_MARKERS`` in the ``message`` of those whose ``reason`` is one of
    ``RUNTIME_REASONS`` (what the runtime wrote, never the workload's termination message).
    """
    status = mapping(status)
    for key in ("initContainerStatuses", "containerStatuses"):
        entries = status.get(key)
        for entry in entries if isinstance(entries, list) else []:
            found = _container_failure(mapping(entry))
            if found is not None:
                return found
    return None


_QUOTED = re.compile(r'"(?:[^"\\]|\\.)*(?:"|\Z)')
"""A Go ``%q`` string: how runc, runsc and containerd quote the command, paths and names they
echo from the pod's spec (``exec: "/app": executable file not found``); one the 4,096-character
cut leaves open runs to the end (else a long enough path put its tail outside any quote)."""


_ARGS = re.compile(r"starting sub-container \[(?:[^\n]*?\]: |[^\n]*$)", re.MULTILINE)
"""runsc's echo of a sub-container's command, unquoted (``starting sub-container %v: %w``,
runsc/sandbox/sandbox.go), up to the first ``]: `` of the line (runsc's spec check echoes the
arguments again after its own words: a greedy match would take those words too), or to the
line's end when the 4,096-character cut left it open. Stripped before the quotes: a ``"`` in an
argument would open a quote that swallows its end. An argument holding ``]: `` ends it early:
the author's own words then reach only the author's own pod."""


def _unquoted(message: str) -> str:
    """``message`` without its quoted parts and runsc's echo of the command: those hold what
    the pod's author wrote (a command named ``/failed to restore``, an argument ``restoring
    container``, a mount path), never the runtime's own words."""
    return _QUOTED.sub('""', _ARGS.sub("starting sub-container []: ", message[:4096]))


def _container_failure(entry: Mapping[str, Any]) -> str | None:
    state, last = mapping(entry.get("state")), mapping(entry.get("lastState"))
    for part in (
        mapping(state.get("waiting")),
        mapping(state.get("terminated")),
        mapping(last.get("terminated")),
    ):
        reason = part.get("reason")
        if not (isinstance(reason, str) and reason in RUNTIME_REASONS):
            continue  # the workload's own termination message, or no failure to start
        lowered = _unquoted(str(part.get("message") or "")).lower()
        if any(marker in lowered for marker, _ in RESTORE_FAILURE_MARKERS):
            detail = str(part.get("message"))
            return f"container {entry.get('name') or '?'}: {detail}"[:MAX_MESSAGE_CHARS]
    return None
