"""Reading Kubernetes manifests from files or stdin, and finding the pod spec(s) inside objects.

Owns the offline input side of the CLI (``hash``, ``diff``, ``check``):

- ``load_objects(names)``: every object of multi-document YAML or JSON files (``-`` is stdin), each
  labelled with where it came from (``deploy.yaml#1``). ``kind: List`` / ``PodList``-style objects
  are expanded into their items (``pods.yaml#0.items[2]``), and an ``AdmissionReview`` file yields
  its ``request.object`` (``review.json#0.request.object``), so captured reviews work as input.
- ``pod_views(obj)``: the pod-shaped dict(s) (``{"metadata": ..., "spec": ...}``) of a Pod or of a
  pod controller's template (``webhook.admission.TEMPLATE_PATHS``), with their field paths. A
  StatefulSet with ``volumeClaimTemplates`` yields the pod its controller creates for one ordinal
  (the claim volumes added), since every replica carries its own claims.

YAML is read like Kubernetes reads it (``sigs.k8s.io/yaml``): YAML 1.1 scalars, except that
unquoted timestamps stay strings (the API server's YAML-to-JSON step never produces dates).
Errors raise ``webhook.errors.ConfigError`` with the source label and, for YAML, line and column.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import orjson
import yaml

from webhook.admission import TEMPLATE_PATHS
from webhook.errors import ConfigError
from webhook.types import RawObject

INDEXED_JOB_LABEL = "batch.kubernetes.io/job-completion-index"
"""Label the Job controller puts on each pod of an Indexed Job (not present on the template)."""


class _KubeYamlLoader(yaml.CSafeLoader):
    """libyaml safe loader without the implicit timestamp type (kept as strings, like Kubernetes).

    PyYAML wheels bundle libyaml on every platform we ship to; the C loader parses large manifests
    several times faster than the pure-Python one.
    """


_KubeYamlLoader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


@dataclass(frozen=True)
class LoadedObject:
    """One Kubernetes object read from input.

    Attributes:
        source: where it came from: ``file.yaml#0`` (document index in the stream, counting empty
            documents), ``-#2`` for stdin, plus ``.items[i]`` / ``.request.object`` when expanded.
        obj: the object exactly as decoded (a JSON-shaped dict with at least a string ``kind``).
    """

    source: str
    obj: RawObject

    @property
    def kind(self) -> str:
        """The object's ``kind`` (``Pod``, ``Deployment``...)."""
        kind: str = self.obj["kind"]
        return kind

    @property
    def namespace(self) -> str | None:
        """``metadata.namespace``, or None when the manifest does not set one."""
        value = _metadata(self.obj).get("namespace")
        return value if isinstance(value, str) and value else None

    @property
    def name(self) -> str:
        """``metadata.name``; ``<generateName>*`` for generated names; ``?`` when neither is set."""
        metadata = _metadata(self.obj)
        name, generate = metadata.get("name"), metadata.get("generateName")
        if isinstance(name, str) and name:
            return name
        if isinstance(generate, str) and generate:
            return generate + "*"
        return "?"

    @property
    def ref(self) -> str:
        """Human reference ``Kind/namespace/name``, or ``Kind/name`` without a namespace."""
        if self.namespace:
            return f"{self.kind}/{self.namespace}/{self.name}"
        return f"{self.kind}/{self.name}"


@dataclass(frozen=True)
class PodView:
    """A pod-shaped dict inside an object, ready for ``webhook.distill``.

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
    """

    pod: RawObject
    spec_path: str
    metadata_path: str
    indexed_job: bool = False
    claim_templates: tuple[str, ...] = ()
    ordinal: int | None = None
    set_name: str = ""

    def claim_name(self, template: str, ordinal: int | str) -> str:
        """The claim the controller binds to replica ``ordinal`` for claim ``template``
        (``getPersistentVolumeClaimName``: ``<template>-<set name>-<ordinal>``)."""
        return f"{template}-{self.set_name}-{ordinal}"


def load_objects(names: Sequence[str]) -> list[LoadedObject]:
    """Every object in the files ``names`` (``-`` reads stdin once), in input order.

    Raises:
        ConfigError: a file cannot be read, is not valid YAML/JSON, or holds a document that is not
            a Kubernetes object (a mapping with a string ``kind``).
    """
    objects: list[LoadedObject] = []
    for name in names:
        objects.extend(parse_documents(read_source(name), name))
    return objects


def read_source(name: str) -> bytes:
    """Bytes of file ``name``, or of stdin for ``-``.

    Raises:
        ConfigError: the file cannot be read (message names it and the OS reason).
    """
    if name == "-":
        return sys.stdin.buffer.read()
    try:
        return Path(name).read_bytes()
    except OSError as exc:
        raise ConfigError(f"{name}: cannot read: {exc.strerror or exc}") from None


def parse_documents(data: bytes, source: str) -> list[LoadedObject]:
    """The objects of one YAML or JSON stream; ``source`` names it in labels and errors.

    Raises:
        ConfigError: invalid YAML/JSON or a document that is not a Kubernetes object.
    """
    objects: list[LoadedObject] = []
    for index, document in enumerate(_documents(data, source)):
        if document is None:  # an empty document (e.g. a trailing ``---``)
            continue
        objects.extend(_expand(document, f"{source}#{index}"))
    return objects


def _documents(data: bytes, source: str) -> list[Any]:
    """Decoded documents; JSON first (fast, exact), else YAML (a superset for our purposes)."""
    stripped = data.lstrip()
    if stripped[:1] in (b"{", b"["):
        try:
            return [orjson.loads(stripped)]
        except orjson.JSONDecodeError:
            pass  # e.g. a YAML flow mapping, or JSON followed by more YAML documents
    try:
        text = data.decode("utf-8-sig")
        return list(yaml.load_all(text, Loader=_KubeYamlLoader))
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{source}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise ConfigError(f"{source}: invalid YAML{where}: {exc.problem}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{source}: invalid YAML: {exc}") from None


def _expand(document: Any, label: str) -> Iterable[LoadedObject]:
    """One document as objects: Lists and JSON arrays expanded, AdmissionReviews unwrapped."""
    if isinstance(document, list):
        for i, item in enumerate(document):
            yield from _expand(item, f"{label}[{i}]")
        return
    if not isinstance(document, dict) or not isinstance(document.get("kind"), str):
        raise ConfigError(f"{label}: not a Kubernetes object (need a mapping with a 'kind')")
    kind: str = document["kind"]
    items = document.get("items")
    if kind.endswith("List") and isinstance(items, list):
        for i, item in enumerate(items):
            yield from _expand(item, f"{label}.items[{i}]")
        return
    if kind == "AdmissionReview":
        request = document.get("request")
        inner = request.get("object") if isinstance(request, dict) else None
        if inner is None:
            raise ConfigError(f"{label}: AdmissionReview without request.object")
        yield from _expand(inner, f"{label}.request.object")
        return
    yield LoadedObject(source=label, obj=document)


def pod_views(obj: RawObject, ordinal: int | None = None) -> list[PodView]:
    """The pod-shaped dicts of ``obj``: one for a Pod or a pod controller, none otherwise.

    A Pod is its own view (``spec_path="spec"``). Deployment, StatefulSet, DaemonSet, ReplicaSet,
    Job and CronJob yield their template (paths from ``webhook.admission.TEMPLATE_PATHS``); a
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
        name = _metadata(obj).get("name")
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


def _metadata(obj: RawObject) -> RawObject:
    """``obj["metadata"]`` when it is a mapping, else ``{}``."""
    metadata = obj.get("metadata")
    return metadata if isinstance(metadata, dict) else {}
