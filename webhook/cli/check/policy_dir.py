"""The policy directory's own PodSnapshotPolicies, judged beside ``snapready check``'s inputs.

The pods are judged against them, so a policy whose ``snapready.io/enforcement`` is no mode (the
``policy-enforcement`` rule), or that the API server would refuse, must not pass unsaid because
it came with ``--policies``. Their findings are notes on stderr, outside the report and the exit
code: the directory is often another team's (a platform's policies under every team's check),
and passing a policy file as an input gates on it (docs/reference/check.md).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final, NamedTuple

from webhook.base.text import clip
from webhook.cli.common.inputs import read_lenient
from webhook.cluster.files import POLICY_SUFFIXES
from webhook.kube.manifests import LoadedObject
from webhook.snapshots.state import is_snapshot_kind

MAX_POLICY_NOTES: Final = 20
"""Findings said on stderr at most (then how many more)."""


class PolicyDir(NamedTuple):
    """What ``policy_dir_inputs`` found: the policies to judge, and each directory policy an
    input replaces with other content, paired with that input."""

    judged: list[LoadedObject]
    replaced: list[tuple[LoadedObject, LoadedObject]]


def _content(item: LoadedObject) -> tuple[Any, Any]:
    """What a replacement changes: the spec and the metadata but its namespace."""
    metadata = item.obj.get("metadata")
    kept = (
        {k: v for k, v in metadata.items() if k != "namespace"}
        if isinstance(metadata, dict)
        else None
    )
    return item.obj.get("spec"), kept


def policy_dir_inputs(
    directory: Path, objects: Sequence[LoadedObject], namespace: str
) -> PolicyDir:
    """The PodSnapshotPolicies of the policy ``directory`` to be judged beside the inputs
    (``note_policy_dir``), located for their findings' lines. None from a file that is
    itself an input (it is judged there) or that an input replaces (same namespace and name:
    ``gather`` puts the input's in force; those with other content are ``replaced``). Storage
    configs are left out: offline, without the webhook's GCS access, each would only say its
    bucket cannot be inspected. A file that cannot be read gives nothing here:
    ``checked_state`` refuses the directory for it.
    """
    if not directory.is_dir():
        return PolicyDir([], [])
    inputs = {Path(item.file).resolve() for item in objects if item.file not in ("", "-")}
    by_name = {(item.kind, item.namespace or namespace, item.name): item for item in objects}
    files = [
        str(path)
        for path in sorted(p for p in directory.iterdir() if p.suffix in POLICY_SUFFIXES)
        if path.is_file() and path.resolve() not in inputs
    ]
    found, _ = read_lenient(files, locate=True)
    judged, replaced = [], []
    for item in found:
        if not is_snapshot_kind(item.obj, "PodSnapshotPolicy"):
            continue
        replacement = by_name.get((item.kind, item.namespace or namespace, item.name))
        if replacement is None:
            judged.append(item)
        elif _content(replacement) != _content(item):
            replaced.append((item, replacement))
    return PolicyDir(judged, replaced)


def _where(item: LoadedObject) -> str:
    return f"{item.file}#{item.document}" + (f":{item.line}" if item.line else "")


def note_policy_dir(
    directory: Path,
    objects: Sequence[LoadedObject],
    namespace: str,
    judge: Callable[[LoadedObject, int], dict[str, Any]],
) -> None:
    """Judge ``policy_dir_inputs`` with ``judge`` (``check.check_object`` on the run's engine:
    a result dict with ``decision``, ``message`` and ``findings``) and write one stderr note per
    directory policy an input replaces with other content, then one per finding
    (``snapready: note: policy directory: <ref> (<file>#<document>:<line>): <severity> <rule>:
    <message>``, the message clipped to 300 characters), at most ``MAX_POLICY_NOTES``."""
    found = policy_dir_inputs(directory, objects, namespace)
    notes = [
        f"{old.ref} ({_where(old)}) is replaced by the input's ({_where(new)}) in this run, "
        "as kubectl apply would replace it"
        for old, new in found.replaced
    ]
    for index, item in enumerate(found.judged):
        result = judge(item, index)
        where = _where(item)
        if result["decision"] == "error":
            notes.append(f"{item.ref} ({where}): {result['message']}")
        notes.extend(
            f"{item.ref} ({where}): {f['severity']} {f['rule']}: {clip(f['message'], 300)}"
            for f in result["findings"]
        )
    for note in notes[:MAX_POLICY_NOTES]:
        sys.stderr.write(f"snapready: note: policy directory: {note}\n")
    if len(notes) > MAX_POLICY_NOTES:
        sys.stderr.write(
            f"snapready: note: policy directory: {len(notes) - MAX_POLICY_NOTES} more "
            f"finding(s); check {directory} as an input to see them all\n"
        )
