"""Reading the inputs named on the command line: files, or stdin for ``-``.

The file and stdin reading of ``check``, ``hash``, ``diff`` and ``review``; the parsing itself
(YAML/JSON documents into objects, with bounds and line marks) is ``kube.manifests``, pure.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from webhook.kube.manifests import LoadedObject, ManifestError, parse_documents, parse_lenient


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


def read_lenient(
    names: Sequence[str], *, locate: bool = False
) -> tuple[list[LoadedObject], list[ManifestError]]:
    """Every object of every readable input in ``names`` (``-`` is stdin), and one
    ``ManifestError`` per input (or document) that cannot be read; never raises for bad input.
    ``locate``: each object keeps its ``anchor`` (``manifests.parse_lenient``)."""
    objects: list[LoadedObject] = []
    errors: list[ManifestError] = []
    for name in names:
        try:
            data = read_source(name)
        except ManifestError as exc:
            errors.append(exc)
            continue
        found, failed = parse_lenient(data, name, locate=locate)
        objects.extend(found)
        errors.extend(failed)
    return objects, errors
