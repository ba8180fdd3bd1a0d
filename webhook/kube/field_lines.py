"""The line of a field inside a manifest: where ``snapready check`` puts each finding.

A finding names a field path (``spec.template.spec.containers[0].image``,
``metadata.annotations["dev.gvisor.x"]``: ``pod.context.join_path``'s syntax). Code scanning
(SARIF ``region.startLine``) and editors show a finding on one line; the object's first line
says little in a 300-line Deployment. Parsing keeps no YAML node tree (a 20 MB input's nodes
would take gigabytes), only each object's ``Anchor``: the span of its document in the input's
text and the keys that lead from the document's root to the object (``items``, an index,
``request``/``object``). ``FieldLocator`` composes a document again (libyaml, nodes only, no
values built) when one of its objects has findings, walks each path to the deepest node that
exists, and answers the line of that key (or list item). A field the manifest lacks (a missing
``runtimeClassName``) is put on the line of its nearest parent that is there, where it would be
added.

Bounded: a document over ``MAX_DOCUMENT_CHARS`` is not composed again (its objects keep their
first line), and a run composes at most ``budget_chars`` characters in all (``check`` of
24,000 Deployments in 20 MB stays linear and within its time target); the last composed
document is kept for the next object of the same document (the items of a ``List``). Pure (no
I/O): the text is the input ``check`` already read.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Final

import yaml

MAX_DOCUMENT_CHARS: Final = 256 << 10
"""Characters of one document at most that are composed again (256 KiB: a Deployment is a few
KiB; a dense JSON array of numbers costs libyaml ~2 s per MiB)."""
BUDGET_CHARS: Final = 1 << 20
"""Characters composed again per run at most (1 MiB: ~1,200 Deployments with findings; libyaml
composes YAML at ~0.12 s per MiB, dense JSON at ~2 s)."""

_NOT_COMPOSABLE = re.compile(
    "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff\ufeff\ufffe\uffff]"
    r"|\\\\|\\u[dD][89a-fA-F][0-9a-fA-F]{2}"
)
r"""What libyaml refuses, or counts as a line break, where JSON and editors do not: characters
outside YAML's printable set (JSON strings may hold them), U+0085, U+2028 and U+2029 (line
breaks to libyaml only), and escaped UTF-16 surrogates (``\ud83d``: Python's ``json.dumps``
writes an emoji so). An escaped backslash is matched too, so that ``\\ud83d`` stays as it is.
``_composable`` replaces each with as many harmless characters: lines and indexes stay."""


def _composable(text: str) -> str:
    r"""``text`` with every ``_NOT_COMPOSABLE`` match replaced by text of the same length that
    libyaml reads (a space, or the escape ``\u0041``)."""

    def harmless(match: re.Match[str]) -> str:
        found = match.group()
        if found.startswith("\\u"):
            return "\\u0041"
        return found if found == "\\\\" else " "

    return _NOT_COMPOSABLE.sub(harmless, text)


_EXTRA_BREAKS: Final = ("\x85", "\u2028", "\u2029")
"""Characters libyaml counts as line breaks that editors and code scanning do not."""
_LEADING_BREAK = re.compile(rb"\r\n|\r|\n")


def leading_lines(blank: bytes) -> int:
    """Line breaks in ``blank`` (the whitespace before a JSON document) as libyaml and editors
    count them: CRLF, CR or LF, each one line."""
    return len(_LEADING_BREAK.findall(blank))


class EditorLines:
    """1-based lines of libyaml's marks in ``text`` as editors count them (LF, CRLF or CR).

    libyaml also breaks lines at U+0085, U+2028 and U+2029, so a tenant's value holding one
    would move every later line of a report. The marks are asked for in increasing order (the
    documents, then the objects inside each), so the count of those characters before a mark
    walks forward through the text once (``str.count``, C speed, no list of positions: 20 MB
    of U+0085 would otherwise be 10 million ints); a mark behind the last one counts from the
    start again.
    """

    def __init__(self, text: str) -> None:
        self.text = text
        self.odd = any(ch in text for ch in _EXTRA_BREAKS)
        self._at = 0
        self._seen = 0

    def line(self, mark: yaml.Mark) -> int:
        """The editor's 1-based line of ``mark``."""
        if not self.odd:
            return mark.line + 1
        index = mark.index
        if index < self._at:
            self._at, self._seen = 0, 0
        self._seen += sum(self.text.count(ch, self._at, index) for ch in _EXTRA_BREAKS)
        self._at = index
        return mark.line + 1 - self._seen


_TOKEN = re.compile(r'\["((?:[^"]|"(?!\]))*)"\]|\[(\d+)\]|\.?([^.\[\]]+)')
"""One step of a field path: a quoted key, a list index, or a plain key (``join_path``)."""


@dataclass(frozen=True)
class Anchor:
    """Where one object is in its input's text.

    Attributes:
        text: the whole input (shared by every object of it, not copied).
        start: index in ``text`` of the start of the line where the document's root begins.
        end: index in ``text`` just after the document's root ends.
        first_line: 1-based line number of ``text[start]``.
        prefix: keys and indexes from the document's root to the object (``("items", 3)``).
    """

    text: str = field(repr=False)
    start: int
    end: int
    first_line: int
    prefix: tuple[str | int, ...] = ()

    def under(self, step: str | int) -> Anchor:
        """The anchor of the value at ``step`` (a key or an index) inside this one."""
        return Anchor(self.text, self.start, self.end, self.first_line, (*self.prefix, step))


def path_steps(path: str) -> list[str | int]:
    """The keys and indexes of a field path, ``'a.b[2]["c/d"]'`` -> ``["a", "b", 2, "c/d"]``;
    the steps read before anything that is not path syntax (never raises)."""
    steps: list[str | int] = []
    position = 0
    while position < len(path):
        match = _TOKEN.match(path, position)
        if match is None:
            break
        quoted, index, plain = match.groups()
        steps.append(int(index) if index is not None else quoted if quoted is not None else plain)
        position = match.end()
    return steps


Step = tuple[yaml.Node, int]
"""A child node and the 0-based line that names it (a key's own line, a list item's start)."""


class _Walker:
    """Steps through one composed document. Each mapping's keys are indexed once, on first use
    (the last of duplicate keys wins, as decoding keeps it), so a path costs one dict lookup
    per step whatever the mapping holds: 25,000 junk keys beside ``spec`` and 5,000 findings
    must not cost 25,000 x 5,000 comparisons."""

    def __init__(self) -> None:
        self._keys: dict[int, tuple[yaml.MappingNode, dict[str, Step]]] = {}

    def step(self, node: yaml.Node, step: str | int) -> Step | None:
        """The child of ``node`` at ``step``, or None when ``node`` has no such child."""
        if isinstance(step, int):
            if isinstance(node, yaml.SequenceNode) and 0 <= step < len(node.value):
                item: yaml.Node = node.value[step]
                return item, item.start_mark.line
            return None
        if not isinstance(node, yaml.MappingNode):
            return None
        known = self._keys.get(id(node))
        if known is None or known[0] is not node:
            index = {
                key.value: (value, key.start_mark.line)
                for key, value in node.value
                if isinstance(key, yaml.ScalarNode)
            }
            known = (node, index)
            self._keys[id(node)] = known
        return known[1].get(step)


@dataclass
class FieldLocator:
    """Lines of fields in the objects of one ``check`` run (see the module docstring).

    Attributes:
        budget_chars: characters that may still be composed in this run.
    """

    budget_chars: int = BUDGET_CHARS
    _last: tuple[str, int, int, yaml.Node | None, _Walker] | None = field(default=None, repr=False)

    def lines(self, anchor: Anchor | None, paths: Iterable[str]) -> dict[str, int]:
        """1-based line of each of ``paths`` (field paths of the object at ``anchor``): the
        deepest key or item of the path that the manifest has; empty when the document is not
        composed again (no anchor, over the bounds, or not YAML that libyaml reads alike)."""
        wanted = list(dict.fromkeys(paths))
        composed = self._root(anchor) if wanted and anchor is not None else None
        if composed is None or anchor is None:
            return {}
        root, walker = composed
        if root is None:
            return {}
        node: yaml.Node = root
        line = root.start_mark.line
        for step in anchor.prefix:
            found = walker.step(node, step)
            if found is None:
                return {}  # the object is not where parsing found it: say nothing
            node, line = found[0], found[0].start_mark.line
        out: dict[str, int] = {}
        for path in wanted:
            at, at_line = node, line
            for step in path_steps(path):
                found = walker.step(at, step)
                if found is None:
                    break
                at, at_line = found
            out[path] = anchor.first_line + at_line
        return out

    def _root(self, anchor: Anchor) -> tuple[yaml.Node | None, _Walker] | None:
        """The composed root node of ``anchor``'s document and its walker (the last document
        is remembered, for the next item of a List); None beyond the bounds."""
        last = self._last
        if last is not None and last[0] is anchor.text and last[1:3] == (anchor.start, anchor.end):
            return last[3], last[4]
        size = anchor.end - anchor.start
        if size > MAX_DOCUMENT_CHARS or size > self.budget_chars:
            return None
        self.budget_chars -= size
        try:
            document = _composable(anchor.text[anchor.start : anchor.end])
            root = yaml.compose(document, Loader=yaml.CSafeLoader)
        except (yaml.YAMLError, RecursionError):
            root = None
        walker = _Walker()
        self._last = (anchor.text, anchor.start, anchor.end, root, walker)
        return root, walker
