"""Building the value of a composed YAML document without PyYAML's general constructor, for the
documents manifests are made of.

PyYAML's ``construct_document`` is pure Python with a memo, a state machine and a resolver call per
node: on a 20 MB manifest file it took most of ``snapready check``'s time. Once a document has
passed ``yaml_bounds.check_nesting`` (no anchors, so no shared nodes; at most ``MAX_DEPTH``
levels, so plain recursion is safe), its value is a tree of JSON-like scalars that ``build``
makes directly from the nodes: the scalar tags libyaml resolved while composing (str, int,
float, bool, null) map to the same values PyYAML makes. Anything else (a merge key ``<<``, a
``!!binary``, ``!!set`` or custom tag, an unhashable key) raises ``NotPlain`` and the caller uses
PyYAML's constructor, so every result and every error stays PyYAML's.
"""

from __future__ import annotations

from typing import Any, Final

import yaml

_STR: Final = "tag:yaml.org,2002:str"
_MAP: Final = "tag:yaml.org,2002:map"
_SEQ: Final = "tag:yaml.org,2002:seq"
_SCALARS: Final = frozenset(
    {"tag:yaml.org,2002:int", "tag:yaml.org,2002:float", "tag:yaml.org,2002:bool",
     "tag:yaml.org,2002:null"}
)  # fmt: skip


class NotPlain(Exception):
    """The document needs PyYAML's constructor (a tag or key outside the plain subset)."""


def build(node: yaml.Node, constructor: yaml.constructor.SafeConstructor) -> Any:
    """The value of ``node`` (anchor-free, nesting bounded), equal to what ``constructor`` makes.

    Raises:
        NotPlain: the document holds something only PyYAML's constructor handles.
    """
    cls = node.__class__
    if cls is yaml.ScalarNode:
        if node.tag == _STR:
            return node.value
        if node.tag in _SCALARS:
            return constructor.yaml_constructors[node.tag](constructor, node)
        raise NotPlain
    if cls is yaml.SequenceNode and node.tag == _SEQ:
        return [build(item, constructor) for item in node.value]
    if cls is not yaml.MappingNode or node.tag != _MAP:
        raise NotPlain
    out: dict[Any, Any] = {}
    for key_node, value_node in node.value:
        if key_node.__class__ is not yaml.ScalarNode:
            raise NotPlain  # a collection key: unhashable, PyYAML says so
        out[build(key_node, constructor)] = build(value_node, constructor)
    return out
