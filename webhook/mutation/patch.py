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


def unescape(token: str) -> str:
    """The key an RFC 6901 reference token names: ``~1`` -> ``/`` first, then ``~0`` -> ``~``."""
    return token.replace("~1", "/").replace("~0", "~")


def coalesced(ops: list[JsonPatchOp]) -> list[JsonPatchOp]:
    """``ops`` with every ``add``/``replace`` of a key in a map that an earlier ``add`` of the
    same patch created folded into that ``add``'s value: fewer operations, same result.

    A pod without annotations gets ``add /metadata/annotations {policy}`` and then one ``add``
    per further annotation; folded, that is one operation (5 became 2 on the bench pod; issue
    16, "smaller patches"). Folding moves an edit of ``P/key`` up to the ``add`` of ``P``; any
    operation between them on ``P``, under it or on an ancestor stops folding into ``P``, and
    all others touch other parts of the document, so the order change is not observable. Only
    maps reached by keys alone are folded into (``_keys_only``).
    The input is not modified (values are copied before they grow).
    """
    out: list[JsonPatchOp] = []
    created: dict[str, int] = {}  # pointer of a map added whole -> its operation's index in out
    private: set[int] = set()  # indices in out whose value is already our own copy
    for op in ops:
        path = op["path"]
        parent, _, token = path.rpartition("/")
        index = created.get(parent)
        if index is not None and op["op"] in ("add", "replace"):
            target = out[index]
            if index not in private:
                target = out[index] = {**target, "value": dict(target["value"])}
                private.add(index)
            target["value"][unescape(token)] = op["value"]
            continue
        for pointer_ in [p for p in created if _related(p, path)]:
            del created[pointer_]
        out.append(op)
        if op["op"] == "add" and isinstance(op["value"], dict) and _keys_only(path):
            created[path] = len(out) - 1
    return out


def _keys_only(path: str) -> bool:
    """Whether no token of ``path`` can be a list position (``-`` or digits): an insert into a
    list shifts positions, so a pointer through one may name another item later."""
    return not any(step == "-" or step.isdigit() for step in path.split("/")[1:])


def _related(a: str, b: str) -> bool:
    """Whether pointers ``a`` and ``b`` are equal or one is under the other."""
    return a == b or b.startswith(a + "/") or a.startswith(b + "/")


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
        written: every ``(path, key)`` given a value through ``put``, changed or already equal
            (what this draft's author decided, for ``mutation.ownership``).
    """

    def __init__(self, original: RawObject) -> None:
        """Wrap ``original`` (never modified: edited containers are copied first)."""
        self.doc: RawObject = dict(original)
        self.ops: list[JsonPatchOp] = []
        self.written: set[tuple[Path, str]] = set()
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
        self.written.add((path, key))
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

    def drop(self, path: Path, key: str) -> bool:
        """Remove ``key`` from the map at ``path`` (``remove``); False, with no operation, when
        the map or the key is absent."""
        node = self.get(*path)
        if not isinstance(node, dict) or key not in node:
            return False
        self.ops.append({"op": "remove", "path": pointer((*path, key))})
        del self._writable(path)[key]
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
