"""``snapready diff A B``: which fingerprinted fields differ between two pods or pod templates.

Answers "why did my new pod not restore from the snapshot?": give it the manifest (or
``kubectl get pod -o yaml`` output, or a captured AdmissionReview) of the snapshotted pod and of
the new one. Each input must hold exactly one Pod or pod controller. Prints both fingerprints and
every differing distilled field path with both values, in distilled-spec order (``--json`` for
machines). Like ``hash``, both sides are compared as admission leaves them (snapready's helper
injection simulated with the settings from ``--config``/env, idempotent on a live pod that
already has the helpers), so a manifest and its live pod differ only where the user's fields do;
``--no-inject`` compares the manifests as written. A StatefulSet with ``volumeClaimTemplates``
stands for the pod of its first replica (``--ordinal N``: replica N), claim volumes included, as
in ``hash``. Exit 0 when the fingerprints are equal, 1 when they differ, 2 on bad input or
invalid settings; a document that cannot be read (a refused YAML alias bomb included) is one
stderr line and the rest is compared, as in ``check``: then 2 (equal) or 3 (different).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import orjson

from webhook.base.errors import ConfigError
from webhook.base.text import clip, clip_all
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
from webhook.kube.workloads import PodView
from webhook.pod.diff import changed_paths

_ABSENT_TEXT = "(absent)"


def register(subparsers: Any) -> None:
    """Add the ``diff`` subcommand."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "diff",
        help="distilled fields that differ between two pod/workload manifests",
        description="Compare the snapready spec fingerprints of two pods or pod templates and list "
        "the distilled fields that differ.",
        epilog="exit status:\n  0  the fingerprints are equal\n  1  they differ\n"
        "  2  bad input or settings, or a document that could not be read (one stderr line "
        "each; the rest is still compared)\n  3  both 1 and 2",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("a", metavar="A", help="first manifest (e.g. the snapshotted pod), or -")
    parser.add_argument("b", metavar="B", help="second manifest (e.g. the new pod), or -")
    parser.add_argument("--json", dest="as_json", action="store_true", help="JSON output")
    add_injection_arguments(parser)
    add_ordinal_argument(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Compare the single pod view of ``args.a`` with that of ``args.b``. Documents that cannot
    be read are each one stderr line (as in ``check`` and ``hash``); the comparison still runs
    when each input holds its one pod view, and the exit status then adds 2 (3: different)."""
    if args.a == "-" and args.b == "-":
        return fail("only one of A and B can be - (stdin)")
    problems: list[str] = []
    try:
        settings = injection_settings(args)
        workloads = workloads_from(settings or settings_from(args))
        loaded_a, view_a = single_view(args.a, args.ordinal, workloads, problems)
        loaded_b, view_b = single_view(args.b, args.ordinal, workloads, problems)
        pod_a, pod_b = shaped(view_a, settings), shaped(view_b, settings)
        entry_a, entry_b = entry_for(loaded_a, view_a, pod_a), entry_for(loaded_b, view_b, pod_b)
    except (ConfigError, ValueError) as exc:
        for problem in problems:
            fail(problem)
        return fail(clip(str(exc), PROBLEM_WIDTH))
    for problem in problems:
        fail(problem)
    changes = changed_paths(pod_a, pod_b)
    equal = entry_a["fingerprint"] == entry_b["fingerprint"]
    if args.as_json:
        rows = [{"path": path, "a": a, "b": b} for path, a, b in changes]
        print_json({"equal": equal, "a": entry_a, "b": entry_b, "changes": rows})
    else:
        _print_text(entry_a, entry_b, changes)
    return (0 if equal else 1) | (2 if problems else 0)


def single_view(
    name: str,
    ordinal: int | None = None,
    workloads: Workloads = BUILTIN,
    problems: list[str] | None = None,
) -> tuple[LoadedObject, PodView]:
    """The one object with a pod spec in file ``name`` (other objects are ignored); a
    StatefulSet with claim templates stands for its replica ``ordinal`` (default: the first).
    Documents that cannot be read are added to ``problems`` (one line each) when given, else
    the first one raises.

    Raises:
        ConfigError: unreadable input, or not exactly one Pod/pod template in it (the message
            names at most three of them, however many the file holds).
    """
    objects, failed = read_lenient([name])
    if failed and problems is None:
        raise failed[0]
    if problems is not None:
        problems.extend(problem_line(exc) for exc in failed)
    found = [
        (loaded, view)
        for loaded in objects
        for view in workload_views(loaded.obj, ordinal, workloads)
    ]
    if len(found) != 1:
        refs = clip_all((loaded.ref for loaded, _ in found), limit=3, width=80) or "none"
        raise ConfigError(
            f"{name}: diff needs exactly one Pod or pod template per input, found {len(found)} "
            f"({refs})"
        )
    return found[0]


def _print_text(
    entry_a: dict[str, Any], entry_b: dict[str, Any], changes: list[tuple[str, Any, Any]]
) -> None:
    """Human output: both fingerprints, then each differing path with its two values."""
    out = sys.stdout
    out.write(f"A  {entry_a['ref']}  {entry_a['fingerprint']}\n")
    out.write(f"B  {entry_b['ref']}  {entry_b['fingerprint']}\n")
    for note in entry_a["notes"] + entry_b["notes"]:
        sys.stderr.write(f"snapready: note: {note}\n")
    if not changes:
        out.write("fingerprints are equal\n")
        return
    out.write(f"{len(changes)} fingerprinted field(s) differ:\n")
    for path, a, b in changes:
        out.write(f"  {path}\n    A: {_show(a)}\n    B: {_show(b)}\n")


def _show(value: Any) -> str:
    """Compact JSON of a distilled value; ``(absent)`` for a missing one."""
    return _ABSENT_TEXT if value is None else orjson.dumps(value).decode()
