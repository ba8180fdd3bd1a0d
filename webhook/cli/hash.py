"""``snapready hash FILE...|-``: the spec fingerprint of pod and workload manifests.

Prints one line per Pod or pod template (``Kind/namespace/name  v1:sha256:...``; ``Kind/name``
when the manifest sets no namespace), or a JSON list with ``--json``. The value equals the
``snapready.io/spec-hash`` the webhook writes on the admitted pod: Kubernetes defaults are applied
(``webhook.pod.distill``) and, since that annotation is only written on selected pods, snapready's
own helper injection is simulated first (``webhook.mutation.as_admitted``: init container, volume
and read-only mounts, with the helpers image from the settings; ``<prefix>inject: "false"`` and
``injection.enabled`` are respected) when the webhook would inject: ``--inject``, or the settings
of ``--config`` (the chart's ConfigMap) / ``SNAPREADY_INJECTION__ENABLED``; by default not, as the
chart installs (``injectHelpers: false``), so the value equals the installed webhook's stamp.
``--no-inject`` hashes the manifest as written whatever the settings say.
Objects without a pod spec (Services, ConfigMaps...) are skipped with a note on stderr. Exit 0 on
success, 2 on invalid settings, when no pod spec was found, or when a document could not be read
(refused YAML alias bombs included: ``webhook.kube.yaml_bounds``): as in ``check``, each such
document is one line on stderr (``file#document:line: reason``) and every other one is hashed.

Pods that differ from their template by controller-added hashed fields get a note: an Indexed
Job's pods carry their completion index label; a StatefulSet with ``volumeClaimTemplates`` gives
each replica N its own ``persistentVolumeClaim`` volumes (``<template>-<set>-N``), so ``hash``
prints the fingerprint of the first replica as the controller builds it (``spec.ordinals.start``,
default 0) and ``--ordinal N`` that of replica N.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from typing import Any

from webhook.base.config import Settings
from webhook.base.errors import ConfigError
from webhook.base.text import clip
from webhook.cli.common.fingerprints import (
    PROBLEM_WIDTH,
    add_injection_arguments,
    add_ordinal_argument,
    entry_for,
    injection_settings,
    problem_line,
    shaped,
)
from webhook.cli.common.inputs import read_lenient
from webhook.cli.common.options import settings_from
from webhook.cli.common.output import fail, print_json
from webhook.kube.custom_views import Workloads, workload_views, workloads_from
from webhook.kube.custom_workloads import BUILTIN
from webhook.kube.manifests import LoadedObject


def register(subparsers: Any) -> None:
    """Add the ``hash`` subcommand."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "hash",
        help="fingerprint of pod or workload manifests (Kubernetes defaults applied)",
        description="Print the snapready spec fingerprint of every Pod and pod template in the "
        "given YAML/JSON manifests. This is snapready's own fingerprint of the distilled spec, "
        "not GKE's internal hash. A StatefulSet with volumeClaimTemplates prints the fingerprint "
        "of its first replica's pod (each replica N gets its own claim volumes, claimName "
        "<template>-<set>-N, so each hashes differently; see --ordinal); an Indexed Job prints "
        "its template's value (each index hashes differently). Both come with a note on stderr.",
        epilog="Exit status: 0 every input hashed; 2 bad settings, no pod spec found, or a "
        "document that could not be read (one stderr line each, every other one is hashed).",
    )
    parser.add_argument("files", nargs="+", metavar="FILE", help="manifest file, or - for stdin")
    parser.add_argument("--json", dest="as_json", action="store_true", help="JSON list output")
    parser.add_argument(
        "--distilled",
        action="store_true",
        help="also print the distilled fields that are hashed (JSON; implies --json)",
    )
    add_injection_arguments(parser)
    add_ordinal_argument(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Fingerprint every pod view of every object in ``args.files``. Like ``check``, a document
    that cannot be read (or an object that cannot be fingerprinted) is one ``snapready:
    file#document:line: reason`` line on stderr and the others are still hashed; exit 2 then."""
    try:
        settings = injection_settings(args)
        workloads = workloads_from(settings or settings_from(args))
    except (ConfigError, ValueError) as exc:
        return fail(str(exc))
    objects, failed = read_lenient(args.files)
    problems = [problem_line(exc) for exc in failed]
    entries: list[dict[str, Any]] = []
    for loaded in objects:
        try:
            entries.extend(
                fingerprint_entries([loaded], settings, args.distilled, args.ordinal, workloads)
            )
        except ValueError as exc:
            problems.append(clip(str(exc), PROBLEM_WIDTH))
    for problem in problems:
        fail(problem)
    if not entries:
        if problems:
            return 2
        return fail("no Pod or pod template (Deployment, StatefulSet, DaemonSet, ...) in the input")
    if settings is not None and any(entry["injected"] for entry in entries):
        # Injection is simulated (--inject or the settings): say with which image.
        image = settings.injection.helpers_image
        sys.stderr.write(
            f"snapready: note: fingerprints include the helpers the webhook injects ({image}), "
            "as a webhook installed with injectHelpers=true stamps them\n"
        )
    if args.as_json or args.distilled:
        print_json(entries)
    else:
        for entry in entries:
            sys.stdout.write(f"{entry['ref']}  {entry['fingerprint']}\n")
            for note in entry["notes"]:
                sys.stderr.write(f"snapready: note: {note}\n")
    return 2 if problems else 0


def fingerprint_entries(
    objects: list[LoadedObject],
    settings: Settings | None,
    with_distilled: bool = False,
    ordinal: int | None = None,
    workloads: Workloads = BUILTIN,
) -> Iterator[dict[str, Any]]:
    """One JSON-ready entry per pod view; objects without one get a stderr note.

    Each view (``workload_views(obj, ordinal, workloads)``: every template of a custom
    resource, a StatefulSet with claim templates is its replica
    ``ordinal``, default the first) is hashed as ``shaped(view, settings)`` (None: as written).
    Entry keys: ``source``, ``ref``, ``kind``, ``namespace`` (None if unset), ``name``,
    ``specPath``, ``fingerprint``, ``injected`` (bool: simulated injection changed the pod),
    ``ordinal`` (the StatefulSet replica hashed, else None), ``notes`` (list of str) and, if
    asked, ``distilled``.

    Raises:
        ValueError: a value JSON cannot represent (message names the source).
    """
    for loaded in objects:
        views = workload_views(loaded.obj, ordinal, workloads)
        if not views:
            sys.stderr.write(f"snapready: skipped {loaded.ref} ({loaded.source}): no pod spec\n")
        for view in views:
            yield entry_for(loaded, view, shaped(view, settings), with_distilled)
