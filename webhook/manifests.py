"""Reading Kubernetes manifests from files or stdin, and finding the pod spec(s) inside objects.

Owns the offline input side of the CLI (``hash``, ``diff``, ``check``):

- ``load_objects(names)``: every object of multi-document YAML or JSON files (``-`` is stdin), each
  labelled with where it came from (``deploy.yaml#1``). ``kind: List`` / ``PodList``-style objects
  are expanded into their items (``pods.yaml#0.items[2]``), and an ``AdmissionReview`` file yields
  its ``request.object`` (``review.json#0.request.object``), so captured reviews work as input.
- ``pod_views(obj)``: the pod-shaped dict(s) (``{"metadata": ..., "spec": ...}``) of a Pod or of a
  pod controller's template (``webhook.admission.TEMPLATE_PATHS``), with their field paths.

YAML is read like Kubernetes reads it (``sigs.k8s.io/yaml``): YAML 1.1 scalars, except that
unquoted timestamps stay strings (the API server's YAML-to-JSON step never produces dates).
Errors raise ``webhook.errors.ConfigError`` with the source label and, for YAML, line and column.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
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
    """

    pod: RawObject
    spec_path: str
    metadata_path: str
    indexed_job: bool = False


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


def pod_views(obj: RawObject) -> list[PodView]:
    """The pod-shaped dicts of ``obj``: one for a Pod or a pod controller, none otherwise.

    A Pod is its own view (``spec_path="spec"``). Deployment, StatefulSet, DaemonSet, ReplicaSet,
    Job and CronJob yield their template (paths from ``webhook.admission.TEMPLATE_PATHS``); a
    controller whose template is missing or not a mapping yields nothing. Never raises.
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
    return [
        PodView(
            pod=node,
            spec_path=f"{base}.spec",
            metadata_path=f"{base}.metadata",
            indexed_job=_is_indexed_job(obj),
        )
    ]


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
