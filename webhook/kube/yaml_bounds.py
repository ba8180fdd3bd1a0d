"""Bounds on what one YAML document may expand to, checked on the composed node graph before any
Python object is built (the CLI reads manifests a pull request can hand a CI job).

A YAML alias (``*a``) reuses the node of its anchor (``&a``), so a few hundred bytes that nest
aliases (nine aliases of nine aliases of ...) stand for 9**9 strings: the parser and the
constructor share the nodes and stay small, but everything that walks the value (the
fingerprint's canonical form, JSON output) expands it, and ran for minutes and gigabytes
(a 666-byte manifest ran ``check`` past 120 s and 5.1 GB). Kubernetes refuses such documents too
(go-yaml: "document contains excessive aliasing"). ``check_document`` walks each distinct node
once (linear in the document) and refuses, naming the bound:

- ``aliases``: aliases that would add more than ``ALIAS_EXPANSION_LIMIT`` units (a node, plus the
  characters of a scalar) to one input, beyond the size of its nodes as written. No object the
  API server stores can be larger than etcd's 1.5 MiB request limit, so a million units added by
  aliases is no real manifest;
- ``nesting``: values nested deeper than ``MAX_DEPTH`` once aliases are expanded (libyaml already
  stops nesting as written at 1,000 levels; a chain of aliases nests without it);
- ``recursive alias``: an alias inside the node it names (PyYAML builds a self-containing list;
  JSON and Kubernetes have none).

A document without anchors shares no node, so only its nesting can be too large:
``check_nesting`` walks it alone, several times cheaper; ``check_value_nesting`` does the same for
a decoded JSON value. ``webhook.kube.manifests`` applies them to every document it reads.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

import yaml

ALIAS_EXPANSION_LIMIT: Final = 1_000_000
"""Units (nodes plus scalar characters) that aliases may add to one input, all its documents
together: a real manifest's anchors repeat a few blocks; an alias bomb adds millions."""
MAX_DEPTH: Final = 200
"""Nesting levels allowed once aliases are expanded: orjson, which serialises every checked object
inside its AdmissionReview, refuses more than 254; Kubernetes objects nest a few dozen."""


REFUSED: Final = "refused: "
"""How the reason of every refusal starts (error rows, stderr lines)."""


class DocumentRefused(ValueError):
    """A document beyond a bound. ``bound`` is ``aliases``, ``nesting`` or ``recursive alias``;
    ``line`` the 1-based line where the offending node starts."""

    def __init__(self, bound: str, reason: str, line: int) -> None:
        super().__init__(reason)
        self.bound = bound
        self.reason = reason
        self.line = line


@dataclass
class Budget:
    """What aliases may still add in this input (``ALIAS_EXPANSION_LIMIT`` at the start)."""

    limit: int = ALIAS_EXPANSION_LIMIT
    remaining: int = field(init=False)

    def __post_init__(self) -> None:
        self.remaining = self.limit


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def _line(node: yaml.Node) -> int:
    mark = node.start_mark
    return mark.line + 1 if mark is not None else 1


def check_document(root: yaml.Node, budget: Budget) -> None:
    """Refuse ``root`` (one composed document) beyond a bound; charge its alias expansion to
    ``budget``. Linear in the distinct nodes: an iterative walk with per-node memo. A scalar
    counts once as written however many aliases name it (``[*big, *big, ...]`` expands too).

    Raises:
        DocumentRefused: the bound exceeded, with a message that names it and the figures.
    """
    if isinstance(root, yaml.ScalarNode):
        return
    expanded: dict[int, tuple[int, int]] = {}  # id(collection node) -> (units, depth)
    scalars: set[int] = set()  # id(scalar node) already counted as written
    on_path: set[int] = set()
    own = 0
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, leaving = stack.pop()
        key = id(node)
        if leaving:
            on_path.discard(key)
            units, depth = 1, 0
            for child in _children(node):
                if isinstance(child, yaml.ScalarNode):
                    units, depth = units + 1 + len(child.value), max(depth, 1)
                else:
                    child_units, child_depth = expanded[id(child)]
                    units, depth = units + child_units, max(depth, child_depth)
            expanded[key] = (units, depth + 1)
            _check_figures(node, units - own, depth + 1, budget)
            continue
        if key in expanded:
            continue
        if key in on_path:
            raise DocumentRefused(
                "recursive alias",
                "refused: a YAML alias refers to a node that contains it (a value that contains "
                "itself; Kubernetes objects are JSON, which has no such values)",
                _line(node),
            )
        on_path.add(key)
        own += 1
        stack.append((node, True))
        for child in reversed(_children(node)):
            if not isinstance(child, yaml.ScalarNode):
                if id(child) not in expanded:
                    stack.append((child, False))
            elif id(child) not in scalars:
                scalars.add(id(child))
                own += 1 + len(child.value)
    budget.remaining -= max(0, expanded[id(root)][0] - own)


def check_nesting(root: yaml.Node) -> None:
    """Refuse ``root`` nested deeper than ``MAX_DEPTH``: the whole check of a document without
    anchors (no node is shared, so nothing else can grow), about six times cheaper than
    ``check_document``. libyaml stops text nesting at 1,000 levels, beyond what the consumers
    recurse through (Python's 1,000 frames, orjson's 254 levels).

    Raises:
        DocumentRefused: the ``nesting`` bound exceeded.
    """
    stack: list[tuple[yaml.Node, int]] = [(root, 1)]
    pop, push = stack.pop, stack.append
    while stack:
        node, depth = pop()
        if depth > MAX_DEPTH:
            raise _too_deep(node)
        depth += 1
        if node.__class__ is yaml.MappingNode:
            for key, value in node.value:
                if key.__class__ is not yaml.ScalarNode:
                    push((key, depth))
                if value.__class__ is not yaml.ScalarNode:
                    push((value, depth))
        elif node.__class__ is yaml.SequenceNode:
            push_all = [
                (item, depth) for item in node.value if item.__class__ is not yaml.ScalarNode
            ]
            stack.extend(push_all)


def check_value_nesting(value: Any, line: int) -> None:
    """``check_nesting`` for a decoded JSON value (orjson accepts 1,024 levels).

    Raises:
        DocumentRefused: the ``nesting`` bound exceeded (``line``: where the document starts).
    """
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise DocumentRefused("nesting", _TOO_DEEP, line)
        children = item.values() if isinstance(item, dict) else item
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))


_TOO_DEEP: Final = (
    f"refused: values nest more than {MAX_DEPTH} levels deep (YAML aliases expanded; bound: "
    f"nesting, at most {MAX_DEPTH})"
)


def _too_deep(node: yaml.Node) -> DocumentRefused:
    return DocumentRefused("nesting", _TOO_DEEP, _line(node))


def _check_figures(node: yaml.Node, added: int, depth: int, budget: Budget) -> None:
    """Refuse as soon as a node's expansion exceeds a bound. ``added`` is the node's expanded
    units less every distinct unit seen so far in the document, so it never exceeds what the
    aliases really add (each distinct node below was counted before the node is left): a refusal
    is never early, and a bomb is refused at the first level that passes the bound."""
    if depth > MAX_DEPTH:
        raise _too_deep(node)
    if added > budget.remaining:
        raise DocumentRefused(
            "aliases",
            f"refused: YAML aliases expand this input by more than {budget.limit:,} nodes and "
            f"characters (bound: alias expansion, at most {budget.limit:,} per input; a YAML "
            "alias bomb?); write the repeated values out, or use fewer aliases",
            _line(node),
        )
