"""JSON Patch (RFC 6902) construction: the only module that builds patch operations.

Mutators never diff. They edit a ``Draft``, a copy-on-write working copy of the pod, through a
few methods (``put``, ``extend``, ``insert``), and each edit records the operation that does the
same thing to the original. Because each operation is recorded against the document as it is at
that moment (later indices already shifted by earlier inserts), applying the operations in order
to the original yields exactly ``draft.doc``: the property test checks this with ``jsonpatch``.

Why not a generic diff: ``jsonpatch.make_patch`` walks the whole pod in Python (~350 us for a
small pod); recording costs a few microseconds per edit, and only the containers on an edited
path are copied (a full ``copy.deepcopy`` alone costs ~100 us).

Absent or ``null`` maps and lists on the way are created with one ``add`` of the whole nested
value (the API server's patcher, like RFC 6902, cannot add under a missing parent). Pointer tokens
escape ``~`` as ``~0`` and ``/`` as ``~1`` (RFC 6901). Everything not edited passes through as it
was, unknown fields included.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import Any

from webhook.base.types import JsonPatchOp, RawObject

Token = str | int
Path = tuple[Token, ...]


def escape(token: Token) -> str:
    """One RFC 6901 reference token: ``~`` -> ``~0`` first, then ``/`` -> ``~1``."""
    return str(token).replace("~", "~0").replace("/", "~1")


@functools.lru_cache(maxsize=1024)
def pointer(path: Path) -> str:
    """The JSON Pointer for ``path``, e.g. ``("metadata", "annotations", "a/b")`` ->
    ``/metadata/annotations/a~1b``; ``()`` is the whole document (``""``).

    Cached (bounded): every selected pod gets the same few annotation and label pointers."""
    return "".join("/" + escape(token) for token in path)


def child(node: Any, token: Token) -> Any:
    """``node[token]`` for a dict key or an in-range list index; ``None`` otherwise."""
    if isinstance(token, str):
        return node.get(token) if isinstance(node, dict) else None
    if isinstance(node, list) and 0 <= token < len(node):
        return node[token]
    return None


class Draft:
    """A copy-on-write working copy of one object that records a JSON Patch of its edits.

    Attributes:
        doc: the working copy; read it freely, edit it only through the methods below (a direct
            write would reach the original and escape the patch).
        ops: the operations so far, in order.
    """

    def __init__(self, original: RawObject) -> None:
        """Wrap ``original`` (never modified: edited containers are copied first)."""
        self.doc: RawObject = dict(original)
        self.ops: list[JsonPatchOp] = []
        # id -> object: the containers this draft copied and may edit in place. Holding the
        # objects keeps their ids from being reused by new values.
        self._owned: dict[int, Any] = {id(self.doc): self.doc}

    def get(self, *path: Token) -> Any:
        """The value at ``path`` in the working copy, or ``None`` when any step is missing."""
        node: Any = self.doc
        for token in path:
            node = child(node, token)
            if node is None:
                return None
        return node

    def put(self, path: Path, key: str, value: Any) -> bool:
        """Set ``key`` of the map at ``path`` to ``value`` (``add``, or ``replace`` if present).

        Creates the map (and missing maps above it) when absent or null. Returns False, with no
        operation, when the key already holds an equal value.
        """
        target = self._container(path, dict, {key: value})
        if target is None:
            return True
        if key in target:
            if target[key] == value:
                return False
            self._record("replace", (*path, key), value)
        else:
            self._record("add", (*path, key), value)
        target[key] = value
        return True

    def extend(self, path: Path, values: Iterable[Any]) -> bool:
        """Append ``values`` to the list at ``path`` (created when absent or null)."""
        items = list(values)
        if not items:
            return False
        target = self._container(path, list, items)
        if target is None:
            return True
        for item in items:
            self._record("add", (*path, "-"), item)
            target.append(item)
        return True

    def insert(self, path: Path, index: int, value: Any) -> bool:
        """Insert ``value`` at ``index`` of the list at ``path`` (created when absent or null).

        Raises:
            IndexError: ``index`` is past the end of the list.
        """
        target = self._container(path, list, [value])
        if target is None:
            return True
        if not 0 <= index <= len(target):
            raise IndexError(f"cannot insert at {pointer((*path, index))}: list has {len(target)}")
        self._record("add", (*path, index), value)
        target.insert(index, value)
        return True

    def _record(self, op: str, path: Path, value: Any) -> None:
        self.ops.append({"op": op, "path": pointer(path), "value": value})

    def _container(self, path: Path, kind: type, seed: Any) -> Any:
        """The writable container of ``kind`` at ``path``; or, when it or a map above it is
        absent/null/of another type, record one ``add`` of ``seed`` nested under the missing
        keys and return ``None`` (the edit is then complete)."""
        node: Any = self.doc
        for depth, token in enumerate(path):
            expected = kind if depth == len(path) - 1 else type_of(path[depth + 1])
            value = child(node, token)
            if not isinstance(value, expected):
                self._create(path, depth, seed)
                return None
            node = value
        return self._writable(path)

    def _create(self, path: Path, depth: int, seed: Any) -> None:
        """Record and apply ``add`` of ``seed`` wrapped in maps for ``path[depth + 1:]``.

        Raises:
            IndexError: a list item would have to be created (mutators only edit existing ones).
        """
        if not all(isinstance(token, str) for token in path[depth:]):
            raise IndexError(f"cannot create a list item on the way to {pointer(path)}")
        nested = seed
        for token in reversed(path[depth + 1 :]):
            nested = {token: nested}
        self._record("add", path[: depth + 1], nested)
        self._writable(path[:depth])[path[depth]] = nested

    def _writable(self, path: Path) -> Any:
        """The node at ``path``, after copying every container on the way not yet owned."""
        node: Any = self.doc
        for token in path:
            value = node[token]
            if id(value) not in self._owned:
                value = value.copy()
                self._owned[id(value)] = value
                node[token] = value
            node = value
        return node


def type_of(next_token: Token) -> type:
    """The container type a path step must have so that ``next_token`` can follow it."""
    return list if isinstance(next_token, int) else dict
