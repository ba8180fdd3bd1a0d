"""What ``hash`` and ``diff`` share: their flags, one fingerprinted pod view, a problem line.

Both commands fingerprint pods as admission leaves them: ``injection_settings`` decides whether
snapready's helper injection is simulated (``--inject``/``--no-inject``, else ``--config`` or
``SNAPREADY_INJECTION__ENABLED``, else the chart's default: off) and ``shaped`` applies it
(``webhook.mutation.as_admitted``); ``entry_for`` is one pod view's JSON entry with the notes
on why the controller's pods may hash differently (a StatefulSet's claim volumes, an Indexed
Job's index label); ``problem_line`` is one input that could not be read, as ``check`` words it.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from webhook.base.config import Settings
from webhook.base.text import clip
from webhook.base.types import RawObject
from webhook.cli.common.options import settings_from
from webhook.kube.manifests import LoadedObject, ManifestError
from webhook.kube.workloads import INDEXED_JOB_LABEL, PodView
from webhook.mutation import as_admitted
from webhook.pod.distill import distill, fingerprint


def add_ordinal_argument(parser: argparse.ArgumentParser) -> None:
    """``--ordinal N`` of ``hash`` and ``diff``."""
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
webhook's stamp by default (docs/concepts/fingerprint.md). The server's own setting keeps its
default."""


def add_injection_arguments(parser: argparse.ArgumentParser) -> None:
    """``--config``, ``--inject`` and ``--no-inject`` of ``hash`` and ``diff``."""
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


PROBLEM_WIDTH = 400
"""Characters of one problem line on stderr: messages name the source and quote clipped values;
the cap keeps any line short whatever the input held."""


def problem_line(exc: ManifestError) -> str:
    """``file#document:line: reason`` of an input that could not be read (as ``check``'s rows)."""
    where = exc.source + (f":{exc.line}" if exc.line else "")
    return clip(f"{where}: {exc.reason}", PROBLEM_WIDTH)


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
