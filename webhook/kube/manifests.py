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
Errors raise ``ManifestError`` (a ``webhook.base.errors.ConfigError``) with the source label and,
for YAML, line and column. ``read_lenient(names)`` is the CI form (``check``): every input that can
be read is returned, and each one that cannot is one ``ManifestError`` (file, line, reason).
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


class ManifestError(ConfigError):
    """An input that cannot be read as Kubernetes objects.

    Attributes:
        source: the file (``-`` for stdin) or document label (``deploy.yaml#2``).
        reason: what is wrong, without the source (``invalid YAML: did not find expected key``).
        line: 1-based line of the problem when known (YAML syntax errors), else None.
    """

    def __init__(self, source: str, reason: str, line: int | None = None) -> None:
        super().__init__(f"{source}: {reason}")
        self.source = source
        self.reason = reason
        self.line = line


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
        raise ManifestError(name, f"cannot read: {exc.strerror or exc}") from None


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
    documents, error = _documents_until_error(data, source)
    if error is not None:
        raise error
    return documents


def _documents_until_error(data: bytes, source: str) -> tuple[list[Any], ManifestError | None]:
    """The documents decoded before the first syntax error, and that error (None if none)."""
    stripped = data.lstrip()
    if stripped[:1] in (b"{", b"["):
        try:
            return [orjson.loads(stripped)], None
        except orjson.JSONDecodeError:
            pass  # e.g. a YAML flow mapping, or JSON followed by more YAML documents
    documents: list[Any] = []
    try:
        text = data.decode("utf-8-sig")
        for document in yaml.load_all(text, Loader=_KubeYamlLoader):
            documents.append(document)
    except UnicodeDecodeError as exc:
        reason = f"not UTF-8 text ({exc.reason} at byte {exc.start})"
        return documents, ManifestError(source, reason)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        line = mark.line + 1 if mark else None
        return documents, ManifestError(source, f"invalid YAML{where}: {exc.problem}", line)
    except yaml.YAMLError as exc:
        return documents, ManifestError(source, f"invalid YAML: {exc}")
    return documents, None


def parse_lenient(data: bytes, source: str) -> tuple[list[LoadedObject], list[ManifestError]]:
    """Like ``parse_documents`` but never raises: the objects of every readable document (those
    before a YAML syntax error included) and one ``ManifestError`` per unreadable document or
    syntax error."""
    documents, error = _documents_until_error(data, source)
    objects: list[LoadedObject] = []
    errors: list[ManifestError] = []
    for index, document in enumerate(documents):
        if document is None:
            continue
        try:
            objects.extend(_expand(document, f"{source}#{index}"))
        except ManifestError as exc:
            errors.append(exc)
    if error is not None:
        errors.append(error)
    return objects, errors


def read_lenient(names: Sequence[str]) -> tuple[list[LoadedObject], list[ManifestError]]:
    """Every object of every readable input in ``names`` (``-`` is stdin), and one
    ``ManifestError`` per input (or document) that cannot be read; never raises for bad input."""
    objects: list[LoadedObject] = []
    errors: list[ManifestError] = []
    for name in names:
        try:
            data = read_source(name)
        except ManifestError as exc:
            errors.append(exc)
            continue
        found, failed = parse_lenient(data, name)
        objects.extend(found)
        errors.extend(failed)
    return objects, errors


def _expand(document: Any, label: str) -> Iterable[LoadedObject]:
    """One document as objects: Lists and JSON arrays expanded, AdmissionReviews unwrapped."""
    if isinstance(document, list):
        for i, item in enumerate(document):
            yield from _expand(item, f"{label}[{i}]")
        return
    if not isinstance(document, dict) or not isinstance(document.get("kind"), str):
        raise ManifestError(label, "not a Kubernetes object (need a mapping with a 'kind')")
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
            raise ManifestError(label, "AdmissionReview without request.object")
        yield from _expand(inner, f"{label}.request.object")
        return
    yield LoadedObject(source=label, obj=document)
