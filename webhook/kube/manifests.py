"""Kubernetes manifests: YAML or JSON streams into objects, and the pod spec(s) inside objects.

The parsing side of the CLI's offline inputs (``hash``, ``diff``, ``check``; the files and stdin
themselves are read by ``cli.common.inputs``), pure:

- ``parse_documents(data, source)``: every object of a multi-document YAML or JSON stream, each
  labelled with where it came from (``deploy.yaml#1``). ``kind: List`` / ``PodList``-style objects
  are expanded into their items (``pods.yaml#0.items[2]``), and an ``AdmissionReview`` file yields
  its ``request.object`` (``review.json#0.request.object``), so captured reviews work as input.
- ``pod_views(obj)``: the pod-shaped dict(s) (``{"metadata": ..., "spec": ...}``) of a Pod or of a
  pod controller's template (``TEMPLATE_PATHS``), with their field paths. A
  StatefulSet with ``volumeClaimTemplates`` yields the pod its controller creates for one ordinal
  (the claim volumes added), since every replica carries its own claims.

YAML is read like Kubernetes reads it (``sigs.k8s.io/yaml``): YAML 1.1 scalars, except that
unquoted timestamps stay strings (the API server's YAML-to-JSON step never produces dates).
Each object keeps its file, document index and the line where it starts (the YAML parser's
marks), so reports point at it. Every YAML document is composed and checked against the bounds of
``webhook.kube.yaml_bounds`` (alias expansion, nesting, recursive aliases) before any value is
built: an alias bomb is refused as that document's error, in milliseconds.
Errors raise ``ManifestError`` (a ``webhook.base.errors.ConfigError``) with the source label and,
for YAML, line and column. ``parse_lenient(data, source)`` is the CI form (``check``): every
document that can be read is returned, and each one that cannot is one ``ManifestError`` (file,
line, reason).
"""

from __future__ import annotations

import gc
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import orjson
import yaml

from webhook.base.errors import ConfigError
from webhook.base.text import clip
from webhook.base.types import RawObject
from webhook.kube.field_lines import MAX_DOCUMENT_CHARS, Anchor, EditorLines, leading_lines
from webhook.kube.workloads import metadata_of
from webhook.kube.yaml_bounds import (
    Budget,
    DocumentRefused,
    check_document,
    check_nesting,
    check_value_nesting,
)
from webhook.kube.yaml_build import NotPlain, build


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
        file: the input it was read from (``-`` for stdin).
        document: index of its document in that input (counting empty documents).
        line: 1-based line where the object starts (its YAML node's start mark; for JSON the
            line of the opening bracket), None when unknown.
        anchor: where its text is, to find the line of a field in it
            (``field_lines.FieldLocator``); None unless parsed with ``locate``.
    """

    source: str
    obj: RawObject
    file: str = ""
    document: int = 0
    line: int | None = None
    anchor: Anchor | None = field(default=None, repr=False, compare=False)

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


def parse_documents(data: bytes, source: str) -> list[LoadedObject]:
    """The objects of one YAML or JSON stream; ``source`` names it in labels and errors.

    Raises:
        ConfigError: invalid YAML/JSON, a document beyond the bounds of
            ``webhook.kube.yaml_bounds`` (an alias bomb), or a document that is not a Kubernetes
            object: the first such problem.
    """
    objects, errors = parse_lenient(data, source)
    if errors:
        raise errors[0]
    return objects


@dataclass(frozen=True)
class _Where:
    """Where a decoded value starts: its file, document index, node (YAML, while composing) and
    line (1-based)."""

    file: str
    document: int
    line: int | None
    node: yaml.Node | None = None
    anchor: Anchor | None = None
    lines: EditorLines | None = None

    def key(self, name: str) -> _Where:
        """The value of key ``name`` when the node is a mapping that has it (the last one, as
        decoding keeps the last of duplicate keys), else this place (its line; the anchor
        follows the key either way)."""
        inside = self._under(name)
        if isinstance(self.node, yaml.MappingNode):
            for key, value in reversed(self.node.value):
                if isinstance(key, yaml.ScalarNode) and key.value == name:
                    return inside.at(value)
        return replace(inside, node=None)

    def item(self, index: int) -> _Where:
        """Item ``index`` when the node is a sequence that long, else this place (as ``key``)."""
        inside = self._under(index)
        if isinstance(self.node, yaml.SequenceNode) and index < len(self.node.value):
            return inside.at(self.node.value[index])
        return replace(inside, node=None)

    def _under(self, step: str | int) -> _Where:
        return self if self.anchor is None else replace(self, anchor=self.anchor.under(step))

    def at(self, node: yaml.Node) -> _Where:
        """``node``'s place (its start mark's line, as ``EditorLines`` counts it)."""
        mark = node.start_mark
        if mark is None or self.lines is None:
            return replace(self, node=node)
        return replace(self, node=node, line=self.lines.line(mark))


def _anchor(text: str, start: int, end: int, line: int) -> Anchor | None:
    """The ``Anchor`` of a document whose root's line starts at ``text[start]`` (1-based
    ``line``) and whose root ends before ``text[end]``; None over
    ``field_lines.MAX_DOCUMENT_CHARS``."""
    return Anchor(text, start, end, line) if end - start <= MAX_DOCUMENT_CHARS else None


def _decoded(
    data: bytes, source: str, locate: bool = False
) -> Iterator[tuple[_Where, Any] | ManifestError]:
    """Each document of ``data`` with its place, or the ``ManifestError`` of a document refused
    by ``yaml_bounds``; a syntax error ends the stream as its last item. JSON first (fast,
    exact), else YAML (a superset for our purposes), composed one document at a time so that
    the bounds are checked before any value is built."""
    stripped = data.lstrip()
    if stripped[:1] in (b"{", b"["):
        try:
            document = orjson.loads(stripped)
        except orjson.JSONDecodeError:
            pass  # e.g. a YAML flow mapping, or JSON followed by more YAML documents
        else:
            line = leading_lines(data[: len(data) - len(stripped)]) + 1
            try:
                check_value_nesting(document, line)
            except DocumentRefused as exc:
                yield ManifestError(f"{source}#0", exc.reason, exc.line)
            else:
                anchor = None
                if locate and len(stripped) <= 4 * MAX_DOCUMENT_CHARS:  # else never composed
                    text = data.decode("utf-8", "replace")
                    skipped = len(text) - len(text.lstrip())
                    start = text.rfind("\n", 0, skipped) + 1  # within the leading blanks
                    anchor = _anchor(text, start, len(text), line)
                yield _Where(source, 0, line, anchor=anchor), document
            return
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        yield ManifestError(source, f"not UTF-8 text ({exc.reason} at byte {exc.start})")
        return
    yield from _yaml_documents(text, source, locate)


def _yaml_documents(
    text: str, source: str, locate: bool = False
) -> Iterator[tuple[_Where, Any] | ManifestError]:
    """``_decoded`` for YAML text, one document at a time: composed, checked, then built.

    Documents with an anchor (``&``: no alias without one) are walked by ``check_document`` and
    built by PyYAML; the others are only checked by ``check_nesting`` and built by
    ``yaml_build.build`` (PyYAML again when it cannot). The cyclic garbage collector is paused
    meanwhile: composing makes millions of small objects that it would traverse again and again
    (a 20 MB input took several times longer with it).
    """
    loader = _KubeYamlLoader(text)
    budget = Budget()
    lines = EditorLines(text)
    collecting = gc.isenabled()
    gc.disable()
    try:
        index = 0
        while loader.check_node():
            node = loader.get_node()
            if node is None:  # check_node said a document follows; get_node always composes it
                break
            line = lines.line(node.start_mark)
            # The root's line starts ``column`` characters before it (libyaml's line: after a
            # LF, CR, U+0085, U+2028 or U+2029); found without scanning back through the text.
            start = node.start_mark.index - node.start_mark.column
            anchor = _anchor(text, start, node.end_mark.index, line) if locate else None
            where = _Where(source, index, line, node, anchor, lines)
            try:
                value = _checked_value(loader, node, text, budget)
            except DocumentRefused as exc:
                yield ManifestError(f"{source}#{index}", exc.reason, exc.line)
            except ValueError as exc:
                # A scalar the constructor cannot turn into a value, e.g. an integer of more than
                # 4,300 digits (CPython's int() limit; the API server reads int64 at most): this
                # document's error, the next documents are still read.
                reason = f"a value cannot be read: {clip(str(exc).split(';')[0], 200)}"
                yield ManifestError(f"{source}#{index}", reason, line)
            else:
                yield where, value
            index += 1
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        at = lines.line(mark) if mark else None
        where_text = f" at line {at}, column {mark.column + 1}" if mark else ""
        yield ManifestError(source, f"invalid YAML{where_text}: {exc.problem}", at)
    except yaml.YAMLError as exc:
        yield ManifestError(source, f"invalid YAML: {clip(str(exc), 300)}")
    finally:
        loader.dispose()
        if collecting:
            gc.enable()


def _checked_value(loader: _KubeYamlLoader, node: yaml.Node, text: str, budget: Budget) -> Any:
    """The value of one composed document once within the bounds.

    Raises:
        DocumentRefused: beyond a bound of ``yaml_bounds``.
        yaml.YAMLError: what PyYAML's constructor refuses (an unhashable key...).
    """
    if "&" in text[node.start_mark.index : node.end_mark.index]:
        check_document(node, budget)
        return loader.construct_document(node)
    check_nesting(node)
    try:
        return build(node, loader)
    except NotPlain:
        return loader.construct_document(node)


def parse_lenient(
    data: bytes, source: str, *, locate: bool = False
) -> tuple[list[LoadedObject], list[ManifestError]]:
    """Like ``parse_documents`` but never raises: the objects of every readable document (those
    before a YAML syntax error included) and one ``ManifestError`` per unreadable or refused
    document or syntax error, in input order. With ``locate`` each object keeps its
    ``anchor`` (and through it the input's text, for as long as the object lives)."""
    objects: list[LoadedObject] = []
    errors: list[ManifestError] = []
    for item in _decoded(data, source, locate):
        if isinstance(item, ManifestError):
            errors.append(item)
            continue
        where, document = item
        if document is None:  # an empty document (e.g. a trailing ``---``)
            continue
        try:
            objects.extend(_expand(document, f"{source}#{where.document}", where))
        except ManifestError as exc:
            errors.append(exc)
    return objects, errors


def _expand(document: Any, label: str, where: _Where) -> Iterable[LoadedObject]:
    """One document as objects: Lists and JSON arrays expanded, AdmissionReviews unwrapped;
    each object keeps the line where it starts (``where`` follows the YAML nodes)."""
    if isinstance(document, list):
        for i, item in enumerate(document):
            yield from _expand(item, f"{label}[{i}]", where.item(i))
        return
    if not isinstance(document, dict) or not isinstance(document.get("kind"), str):
        raise ManifestError(
            label, "not a Kubernetes object (need a mapping with a 'kind')", where.line
        )
    kind: str = document["kind"]
    items = document.get("items")
    if kind.endswith("List") and isinstance(items, list):
        inside = where.key("items")
        for i, item in enumerate(items):
            yield from _expand(item, f"{label}.items[{i}]", inside.item(i))
        return
    if kind == "AdmissionReview":
        request = document.get("request")
        inner = request.get("object") if isinstance(request, dict) else None
        if inner is None:
            raise ManifestError(label, "AdmissionReview without request.object", where.line)
        yield from _expand(inner, f"{label}.request.object", where.key("request").key("object"))
        return
    yield LoadedObject(
        source=label,
        obj=document,
        file=where.file,
        document=where.document,
        line=where.line,
        anchor=where.anchor,
    )
