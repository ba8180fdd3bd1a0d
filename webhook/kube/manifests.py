"""Reading Kubernetes manifests from files or stdin, and finding the pod spec(s) inside objects.

Owns the offline input side of the CLI (``hash``, ``diff``, ``check``):

- ``load_objects(names)``: every object of multi-document YAML or JSON files (``-`` is stdin), each
  labelled with where it came from (``deploy.yaml#1``). ``kind: List`` / ``PodList``-style objects
  are expanded into their items (``pods.yaml#0.items[2]``), and an ``AdmissionReview`` file yields
  its ``request.object`` (``review.json#0.request.object``), so captured reviews work as input.
- ``pod_views(obj)``: the pod-shaped dict(s) (``{"metadata": ..., "spec": ...}``) of a Pod or of a
  pod controller's template (``TEMPLATE_PATHS``), with their field paths. A
  StatefulSet with ``volumeClaimTemplates`` yields the pod its controller creates for one ordinal
  (the claim volumes added), since every replica carries its own claims.

YAML is read like Kubernetes reads it (``sigs.k8s.io/yaml``): YAML 1.1 scalars, except that
unquoted timestamps stay strings (the API server's YAML-to-JSON step never produces dates).
Errors raise ``webhook.base.errors.ConfigError`` with the source label and, for YAML, line and
column.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import yaml

from webhook.base.errors import ConfigError
from webhook.base.types import RawObject
from webhook.kube.workloads import metadata_of


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
        value = metadata_of(self.obj).get("namespace")
        return value if isinstance(value, str) and value else None

    @property
    def name(self) -> str:
        """``metadata.name``; ``<generateName>*`` for generated names; ``?`` when neither is set."""
        metadata = metadata_of(self.obj)
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
