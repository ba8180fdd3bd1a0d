"""Where pod controllers keep their pod template, and the pods they make from it.

``TEMPLATE_PATHS`` (apps/v1, batch/v1) is the one table of template locations; ``pod_views(obj)``
gives the pod-shaped dict(s) (``{"metadata": ..., "spec": ...}``) of a Pod or of a controller's
template with their field paths. A StatefulSet with ``volumeClaimTemplates`` yields the pod its
controller creates for one ordinal (the claim volumes added, as ``k8s.io/kubernetes/pkg/controller/
statefulset`` does), an Indexed Job the pod of one completion index. Pure module.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from webhook.base.types import RawObject

# Where each pod controller keeps its pod template (apps/v1, batch/v1).
TEMPLATE_PATHS: Mapping[str, tuple[str, ...]] = {
    "Deployment": ("spec", "template"),
    "StatefulSet": ("spec", "template"),
    "DaemonSet": ("spec", "template"),
    "ReplicaSet": ("spec", "template"),
    "Job": ("spec", "template"),
    "CronJob": ("spec", "jobTemplate", "spec", "template"),
}


def pod_template(obj: Any, path: tuple[str, ...]) -> RawObject | None:
    """The pod template at ``path`` in a controller object (``TEMPLATE_PATHS``), or None."""
    template: Any = obj
    for key in path:
        template = template.get(key) if isinstance(template, dict) else None
    return template if isinstance(template, dict) else None


INDEXED_JOB_LABEL = "batch.kubernetes.io/job-completion-index"
"""Label the Job controller puts on each pod of an Indexed Job (not present on the template)."""


@dataclass(frozen=True)
class PodView:
    """A pod-shaped dict inside an object, ready for ``webhook.pod.distill``.

    Attributes:
        pod: ``{"metadata": ..., "spec": ...}``: the Pod itself or the controller's pod template
            (the same dict object, not a copy: callers must not mutate it).
        spec_path: field path of the PodSpec in the object (``spec``, ``spec.template.spec``,
            ``spec.jobTemplate.spec.template.spec``).
        metadata_path: field path of the pod metadata (``metadata``, ``spec.template.metadata``).
        indexed_job: the object is a Job or CronJob with ``completionMode: Indexed``: every pod it
            creates carries ``INDEXED_JOB_LABEL``, which is part of the pod fingerprint.
        claim_templates: the names of a StatefulSet's ``volumeClaimTemplates`` (empty otherwise).
            When set, ``pod`` is not the template but the pod the StatefulSet controller creates
            for ``ordinal``: a new dict (sharing the unchanged parts with the object) whose
            ``spec.volumes`` start with one ``persistentVolumeClaim`` volume per claim template.
        ordinal: the replica ``pod`` stands for (StatefulSets with claim templates), or the
            completion index of an Indexed Job when one was asked for, else None.
        set_name: the StatefulSet's ``metadata.name`` (``?`` when unset), for claim names.
        added_labels: labels the controller adds to each pod (``custom_views``): known values,
            or ``custom_workloads.UNKNOWN_VALUE`` when set per pod. Not part of ``pod``.
        renames: ``(path in the view, path in the object)`` prefixes for parts of ``pod`` the
            controller builds from elsewhere (KServe's model container from
            ``spec.predictor.tensorflow``), so findings name the object's own field.
    """

    pod: RawObject
    spec_path: str
    metadata_path: str
    indexed_job: bool = False
    claim_templates: tuple[str, ...] = ()
    ordinal: int | None = None
    set_name: str = ""
    added_labels: Mapping[str, str] = field(default_factory=dict)
    renames: tuple[tuple[str, str], ...] = ()

    def object_path(self, path: str) -> str:
        """``path`` (a finding's, in the view) as a path in the object (``renames``)."""
        for inner, outer in self.renames:
            if path == inner or path.startswith((inner + ".", inner + "[")):
                return outer + path[len(inner) :]
        return path

    def claim_name(self, template: str, ordinal: int | str) -> str:
        """The claim the controller binds to replica ``ordinal`` for claim ``template``
        (``getPersistentVolumeClaimName``: ``<template>-<set name>-<ordinal>``)."""
        return f"{template}-{self.set_name}-{ordinal}"


def pod_views(obj: RawObject, ordinal: int | None = None) -> list[PodView]:
    """The pod-shaped dicts of ``obj``: one for a Pod or a pod controller, none otherwise.

    A Pod is its own view (``spec_path="spec"``). Deployment, StatefulSet, DaemonSet, ReplicaSet,
    Job and CronJob yield their template (paths from ``TEMPLATE_PATHS``); a
    controller whose template is missing or not a mapping yields nothing. A StatefulSet with
    ``volumeClaimTemplates`` yields its controller's pod for ``ordinal`` (default: the first one,
    ``spec.ordinals.start`` or 0; see ``statefulset_pod``); an Indexed Job yields the pod of
    completion index ``ordinal`` when it is given (``indexed_job_pod``), else its template;
    ``ordinal`` is ignored otherwise.
    Never raises.
    """
    kind = obj.get("kind")
    if kind == "Pod":
        return [PodView(pod=obj, spec_path="spec", metadata_path="metadata")]
    path = TEMPLATE_PATHS.get(kind) if isinstance(kind, str) else None
    if path is None:
        return []
    node: Any = obj
    for key in path:
        node = node.get(key) if isinstance(node, dict) else None
    if not isinstance(node, dict):
        return []
    base = ".".join(path)
    view = PodView(
        pod=node,
        spec_path=f"{base}.spec",
        metadata_path=f"{base}.metadata",
        indexed_job=_is_indexed_job(obj),
    )
    if view.indexed_job and ordinal is not None:
        view = replace(view, ordinal=ordinal, pod=indexed_job_pod(node, ordinal))
    claims = _claim_templates(obj)
    if claims:
        name = metadata_of(obj).get("name")
        view = replace(
            view,
            claim_templates=claims,
            ordinal=_start_ordinal(obj) if ordinal is None else ordinal,
            set_name=name if isinstance(name, str) and name else "?",
        )
        view = replace(view, pod=statefulset_pod(view))
    return [view]


def indexed_job_pod(template: RawObject, index: int) -> RawObject:
    """The pod an Indexed Job creates from ``template`` for completion ``index``, as far as the
    fingerprint sees it: the template with label ``INDEXED_JOB_LABEL: "<index>"`` (kubernetes
    ``pkg/controller/job/indexed_job_utils.go``, ``addCompletionIndexLabel``). A new dict sharing
    the unchanged parts with ``template``."""
    metadata: Any = template.get("metadata")
    metadata = metadata if isinstance(metadata, dict) else {}
    labels: Any = metadata.get("labels")
    labels = labels if isinstance(labels, dict) else {}
    labelled = {**labels, INDEXED_JOB_LABEL: str(index)}
    return {**template, "metadata": {**metadata, "labels": labelled}}


def statefulset_pod(view: PodView) -> RawObject:
    """The pod the StatefulSet controller creates from template ``view.pod`` for
    ``view.ordinal``, as far as the fingerprint sees it.

    Source: kubernetes ``pkg/controller/statefulset/stateful_set_utils.go``:
    ``newStatefulSetPod`` -> ``updateStorage`` puts one volume ``{name: <template>,
    persistentVolumeClaim: {claimName: <template>-<set>-<ordinal>}}`` per claim template first,
    then the template's own volumes except those named like a claim template. The name, hostname,
    subdomain and labels it also sets are not hashed. ``updateStorage`` iterates a Go map, so with
    several claim templates their order varies from pod to pod; here they keep the
    ``volumeClaimTemplates`` order. Returns a new dict sharing the unchanged parts with the
    template (treat both as read-only); the template itself when ``view`` has no claim templates.
    """
    if not view.claim_templates or view.ordinal is None:
        return view.pod
    spec: Any = view.pod.get("spec")
    spec = spec if isinstance(spec, dict) else {}
    own: Any = spec.get("volumes")
    kept = [
        volume
        for volume in (own if isinstance(own, list) else [])
        if not (isinstance(volume, dict) and volume.get("name") in view.claim_templates)
    ]
    claims = [
        {"name": name, "persistentVolumeClaim": {"claimName": view.claim_name(name, view.ordinal)}}
        for name in view.claim_templates
    ]
    return {**view.pod, "spec": {**spec, "volumes": claims + kept}}


def _claim_templates(obj: RawObject) -> tuple[str, ...]:
    """Unique ``metadata.name`` of each ``spec.volumeClaimTemplates`` item of a StatefulSet."""
    spec: Any = obj.get("spec")
    templates = spec.get("volumeClaimTemplates") if isinstance(spec, dict) else None
    if obj.get("kind") != "StatefulSet" or not isinstance(templates, list):
        return ()
    names: dict[str, None] = {}
    for template in templates:
        metadata = template.get("metadata") if isinstance(template, dict) else None
        name = metadata.get("name") if isinstance(metadata, dict) else None
        if isinstance(name, str) and name:
            names[name] = None
    return tuple(names)


def _start_ordinal(obj: RawObject) -> int:
    """``spec.ordinals.start`` (StatefulSetStartOrdinal, getStartOrdinal), else 0."""
    spec: Any = obj.get("spec")
    ordinals = spec.get("ordinals") if isinstance(spec, dict) else None
    start = ordinals.get("start") if isinstance(ordinals, dict) else None
    return start if type(start) is int and start >= 0 else 0


def _is_indexed_job(obj: RawObject) -> bool:
    """Job (or CronJob's job template) with ``completionMode: Indexed`` (batch/v1)."""
    spec: Any = obj.get("spec")
    if obj.get("kind") == "CronJob":
        job_template = spec.get("jobTemplate") if isinstance(spec, dict) else None
        spec = job_template.get("spec") if isinstance(job_template, dict) else None
    elif obj.get("kind") != "Job":
        return False
    return isinstance(spec, dict) and spec.get("completionMode") == "Indexed"


def metadata_of(obj: RawObject) -> RawObject:
    """``obj["metadata"]`` when it is a mapping, else ``{}``."""
    metadata = obj.get("metadata")
    return metadata if isinstance(metadata, dict) else {}
