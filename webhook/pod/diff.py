"""Which fingerprinted fields differ between two pods: the answer to "why did my pod not restore?".

Compares the distilled specs (``webhook.pod.distill.distill``) of two pods and names each
difference by its field path (``spec.containers[0].image``). Used by ``snapready diff``. Pure.
"""

from __future__ import annotations

from typing import Any

from webhook.base.types import RawObject
from webhook.pod.context import join_path
from webhook.pod.distill import NAMED_LISTS, distill


def changed_paths(a: RawObject, b: RawObject) -> list[tuple[str, Any, Any]]:
    """The distilled fields that differ between pods ``a`` and ``b``, in distilled-spec order.

    Returns ``[(path, value_in_a, value_in_b), ...]`` with paths like ``spec.containers[0].image``
    (``webhook.pod.context.join_path`` style); an absent value is ``None``. Volumes, init containers
    and containers whose names differ in membership or order give one
    ``<list>[*].name`` entry with both name lists, then the items present on both sides are compared
    by name (the index in the path is A's). Other lists of mappings of equal length are compared
    item by item; a mapping absent on one side is compared key by key; anything else is
    reported whole. Empty when the fingerprints are equal.
    """
    out: list[tuple[str, Any, Any]] = []
    _walk("", distill(a), distill(b), out)
    return out


def _walk(path: str, a: Any, b: Any, out: list[tuple[str, Any, Any]]) -> None:
    """Append the differences between distilled values ``a`` and ``b`` under ``path``."""
    if _same(a, b):
        return
    if path in NAMED_LISTS:  # an absent list of containers/volumes is an empty one
        a, b = ([] if a is None else a), ([] if b is None else b)
    elif isinstance(a, dict) or isinstance(b, dict):  # descend into a mapping absent on one side
        reported = len(out)
        dict_a, dict_b = ({} if a is None else a), ({} if b is None else b)
        if isinstance(dict_a, dict) and isinstance(dict_b, dict):
            for key in [*dict_a, *(k for k in dict_b if k not in dict_a)]:
                _walk(join_path(path, key), dict_a.get(key), dict_b.get(key), out)
        if len(out) == reported:  # e.g. ``emptyDir: {}`` vs absent, or a mapping vs a scalar
            out.append((path, a, b))
        return
    if not (isinstance(a, list) and isinstance(b, list) and _all_dicts(a) and _all_dicts(b)):
        out.append((path, a, b))
        return
    names_a, names_b = (_names(a), _names(b)) if path in NAMED_LISTS else (None, None)
    if names_a is not None and names_b is not None and names_a != names_b:
        out.append((f"{path}[*].name", names_a, names_b))
        for index, name in enumerate(names_a):
            if name in names_b:
                _walk(join_path(path, index), a[index], b[names_b.index(name)], out)
    elif len(a) == len(b):
        for index, (item_a, item_b) in enumerate(zip(a, b, strict=True)):
            _walk(join_path(path, index), item_a, item_b, out)
    else:
        out.append((path, a, b))


def _same(a: Any, b: Any) -> bool:
    """JSON equality: like ``==`` but ``true`` is not ``1`` (both hash differently)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(v, b[k]) for k, v in a.items())
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def _all_dicts(items: list[Any]) -> bool:
    """Every item is a mapping."""
    return all(isinstance(item, dict) for item in items)


def _names(items: list[RawObject]) -> list[str] | None:
    """The ``name`` of every item, or None unless all have a unique string name."""
    names = [item.get("name") for item in items]
    if all(isinstance(n, str) for n in names) and len(set(names)) == len(names):
        return [str(n) for n in names]
    return None
