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
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from webhook.base.config import Settings
from webhook.base.errors import ConfigError
from webhook.base.text import clip
from webhook.base.types import RawObject
from webhook.cli.common import fail, print_json, settings_from
from webhook.cli.inputs import read_lenient
from webhook.kube.custom_views import Workloads, workload_views, workloads_from
from webhook.kube.custom_workloads import BUILTIN
from webhook.kube.manifests import LoadedObject, ManifestError
from webhook.kube.workloads import INDEXED_JOB_LABEL, PodView
from webhook.mutation import as_admitted
from webhook.pod.distill import distill, fingerprint


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


def add_ordinal_argument(parser: argparse.ArgumentParser) -> None:
    """``--ordinal N``, shared with ``diff``."""
    parser.add_argument(
        "--ordinal",
        type=_ordinal,
        metavar="N",
        help="fingerprint replica N's pod of a StatefulSet with volumeClaimTemplates (its claim "
        "volumes are <template>-<set>-N), or the pod of completion index N of an Indexed Job; "
        "default: the StatefulSet's first replica (spec.ordinals.start or 0), the Job's template",
    )


def _ordinal(text: str) -> int:
    """argparse type of ``--ordinal``: a non-negative integer."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a replica ordinal (0, 1, 2, ...)")
    return value


CLI_INJECTION_DEFAULT = False
"""Whether ``hash``/``diff`` simulate helper injection when neither ``--inject``/``--no-inject``
nor a settings file or ``SNAPREADY_INJECTION__ENABLED`` says: the chart's ``injectHelpers``
default (false: no helpers image is published), so a CI fingerprint equals the installed
webhook's stamp by default (README "Fingerprint"). The server's own setting keeps its default."""


def add_injection_arguments(parser: argparse.ArgumentParser) -> None:
    """``--config``, ``--inject`` and ``--no-inject``, shared with ``diff``."""
    parser.add_argument(
        "--config",
        type=Path,
        help="YAML settings file (same keys as the env; the chart's ConfigMap config.yaml): its "
        "injection settings decide whether helper injection is simulated",
    )
    group = parser.add_mutually_exclusive_group()
    group.add_argument(
        "--inject",
        dest="inject",
        action="store_const",
        const=True,
        default=None,
        help="simulate snapready's helper injection (a webhook installed with "
        "injectHelpers=true); default: as the chart installs, without injection, unless "
        "--config or SNAPREADY_INJECTION__ENABLED says otherwise",
    )
    group.add_argument(
        "--no-inject",
        dest="inject",
        action="store_const",
        const=False,
        help="fingerprint the manifest as written, whatever the settings say",
    )


def injection_settings(args: argparse.Namespace) -> Settings | None:
    """Settings for ``as_admitted``, or None with ``--no-inject``. Without ``--inject``,
    ``--config`` or ``SNAPREADY_INJECTION__ENABLED``, injection is off
    (``CLI_INJECTION_DEFAULT``, the chart's default).

    Raises:
        ConfigError: invalid settings file or ``SNAPREADY_*`` env (message names the field).
    """
    if args.inject is False:
        return None
    configured = getattr(args, "config", None) is not None or (
        "SNAPREADY_INJECTION__ENABLED" in os.environ
    )
    enabled = True if args.inject else None if configured else CLI_INJECTION_DEFAULT
    extra = {"injection": {"enabled": enabled}} if enabled is not None else {}
    return settings_from(args, **extra)


def shaped(view: PodView, settings: Settings | None) -> RawObject:
    """The pod of ``view`` as admission leaves it (``settings`` given) or as written (None)."""
    return view.pod if settings is None else as_admitted(view.pod, settings)


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


PROBLEM_WIDTH = 400
"""Characters of one problem line on stderr: messages name the source and quote clipped values;
the cap keeps any line short whatever the input held."""


def problem_line(exc: ManifestError) -> str:
    """``file#document:line: reason`` of an input that could not be read (as ``check``'s rows)."""
    where = exc.source + (f":{exc.line}" if exc.line else "")
    return clip(f"{where}: {exc.reason}", PROBLEM_WIDTH)


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


def entry_for(
    loaded: LoadedObject, view: PodView, pod: RawObject, with_distilled: bool = False
) -> dict[str, Any]:
    """The JSON-ready description of one pod view hashed as ``pod`` (``shaped(view, ...)``).

    Raises:
        ValueError: a value JSON cannot represent (message names the source).
    """
    try:
        value = fingerprint(pod)
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
        "injected": pod is not view.pod,
        "ordinal": view.ordinal,
        "notes": notes_for(loaded.ref, view),
    }
    if with_distilled:
        entry["distilled"] = distill(pod)
    return entry


def notes_for(ref: str, view: PodView) -> list[str]:
    """Why the pods of ``view``'s controller may hash differently from the value printed."""
    notes = [indexed_job_note(ref, view.ordinal)] if view.indexed_job else []
    if view.claim_templates:
        notes.append(statefulset_note(ref, view))
    return notes


def statefulset_note(ref: str, view: PodView) -> str:
    """Why each replica of a StatefulSet with ``volumeClaimTemplates`` hashes differently.

    Source: kubernetes ``pkg/controller/statefulset/stateful_set_utils.go`` (``updateStorage``,
    ``getPersistentVolumeClaimName``): replica N gets volume ``<template>`` with
    ``persistentVolumeClaim.claimName: <template>-<set name>-N``; volumes are hashed.
    """
    volumes = ", ".join(
        f"{name} (claimName {view.claim_name(name, 'N')})" for name in view.claim_templates
    )
    note = (
        f"{ref} has volumeClaimTemplates: the StatefulSet controller gives replica N the "
        f"volume(s) {volumes}, and volumes are part of the pod fingerprint, so every replica "
        f"hashes differently; this value is replica {view.ordinal}'s (pod "
        f"{view.set_name}-{view.ordinal}); use --ordinal N for replica N"
    )
    if len(view.claim_templates) > 1:
        note += (
            "; with several claim templates the controller adds these volumes in a random order "
            "(a Go map iteration), and volume order is hashed: this value assumes the "
            "volumeClaimTemplates order, a pod may differ by that order alone"
        )
    return note


def indexed_job_note(ref: str, index: int | None = None) -> str:
    """Why an Indexed Job's pods hash differently from each other (``index``: the completion
    index the printed value is for, None for the template)."""
    which = (
        f"this value is index {index}'s"
        if index is not None
        else "this value is the template's (without the label); use --ordinal N for index N"
    )
    return (
        f"{ref} is an Indexed Job: the Job controller labels each pod with "
        f"{INDEXED_JOB_LABEL}=<index>, and that label is part of the pod fingerprint, so every "
        f"index hashes differently; {which}"
    )
