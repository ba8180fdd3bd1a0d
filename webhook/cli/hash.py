"""``snapready hash FILE...|-``: the spec fingerprint of pod and workload manifests.

Prints one line per Pod or pod template (``Kind/namespace/name  v1:sha256:...``; ``Kind/name``
when the manifest sets no namespace), or a JSON list with ``--json``. Kubernetes defaults are
applied first (``webhook.distill``), so the value equals the ``snapready.io/spec-hash`` the webhook
puts on the admitted pod. Objects without a pod spec (Services, ConfigMaps...) are skipped with a
note on stderr. Exit 0 on success, 2 on unreadable input or when no pod spec was found.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from typing import Any

from webhook.cli.common import fail, print_json
from webhook.distill import distill, fingerprint
from webhook.errors import ConfigError
from webhook.manifests import INDEXED_JOB_LABEL, LoadedObject, PodView, load_objects, pod_views


def register(subparsers: Any) -> None:
    """Add the ``hash`` subcommand."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "hash",
        help="fingerprint of pod or workload manifests (Kubernetes defaults applied)",
        description="Print the snapready spec fingerprint of every Pod and pod template in the "
        "given YAML/JSON manifests. This is snapready's own fingerprint of the distilled spec, "
        "not GKE's internal hash.",
    )
    parser.add_argument("files", nargs="+", metavar="FILE", help="manifest file, or - for stdin")
    parser.add_argument("--json", dest="as_json", action="store_true", help="JSON list output")
    parser.add_argument(
        "--distilled",
        action="store_true",
        help="also print the distilled fields that are hashed (JSON; implies --json)",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Fingerprint every pod view of every object in ``args.files``."""
    try:
        entries = list(fingerprint_entries(load_objects(args.files), args.distilled))
    except (ConfigError, ValueError) as exc:
        return fail(str(exc))
    if not entries:
        return fail("no Pod or pod template (Deployment, StatefulSet, DaemonSet, ...) in the input")
    if args.as_json or args.distilled:
        print_json(entries)
        return 0
    for entry in entries:
        sys.stdout.write(f"{entry['ref']}  {entry['fingerprint']}\n")
        for note in entry["notes"]:
            sys.stderr.write(f"snapready: note: {note}\n")
    return 0


def fingerprint_entries(
    objects: list[LoadedObject], with_distilled: bool = False
) -> Iterator[dict[str, Any]]:
    """One JSON-ready entry per pod view; objects without one get a stderr note.

    Entry keys: ``source``, ``ref``, ``kind``, ``namespace`` (None if unset), ``name``,
    ``specPath``, ``fingerprint``, ``notes`` (list of str) and, if asked, ``distilled``.

    Raises:
        ValueError: a value JSON cannot represent (message names the source).
    """
    for loaded in objects:
        views = pod_views(loaded.obj)
        if not views:
            sys.stderr.write(f"snapready: skipped {loaded.ref} ({loaded.source}): no pod spec\n")
        for view in views:
            yield entry_for(loaded, view, with_distilled)


def entry_for(loaded: LoadedObject, view: PodView, with_distilled: bool = False) -> dict[str, Any]:
    """The JSON-ready description of one pod view (see ``fingerprint_entries``).

    Raises:
        ValueError: a value JSON cannot represent (message names the source).
    """
    try:
        value = fingerprint(view.pod)
    except ValueError as exc:
        raise ValueError(f"{loaded.source}: cannot fingerprint {loaded.ref}: {exc}") from None
    entry: dict[str, Any] = {
        "source": loaded.source,
        "ref": loaded.ref,
        "kind": loaded.kind,
        "namespace": loaded.namespace,
        "name": loaded.name,
        "specPath": view.spec_path,
        "fingerprint": value,
        "notes": [indexed_job_note(loaded.ref)] if view.indexed_job else [],
    }
    if with_distilled:
        entry["distilled"] = distill(view.pod)
    return entry


def indexed_job_note(ref: str) -> str:
    """Why an Indexed Job's template fingerprint differs from its pods' fingerprints."""
    return (
        f"{ref} is an Indexed Job: the Job controller labels each pod with "
        f"{INDEXED_JOB_LABEL}=<index>, and that label is part of the pod fingerprint; this value "
        "is the template's (without the label), so every index hashes differently"
    )
