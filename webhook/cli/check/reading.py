"""What ``snapready check`` reads: the inputs (leniently), their error rows, and the cluster they
describe.

CI runs ``check`` over whole repositories, so one unreadable input must not hide the others:
``read_inputs`` returns every object that could be read and one error row per input (or
document) that could not, with the file, the line when known and the reason; a Helm template
gets a hint to render it first. ``checked_state`` is the cluster the objects are judged in: the
policy directory's PodSnapshotPolicies and PodSnapshotStorageConfigs plus those, the
ComputeClasses and the Nodes of the checked input itself (a ``kustomize build`` that holds its
own policy checks itself), namespaceless policies in ``--namespace``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from webhook.base.config import Settings
from webhook.base.errors import ConfigError
from webhook.cli.common.inputs import read_lenient
from webhook.cluster.files import ClusterObjects, gather, policy_dir_objects
from webhook.kube.manifests import LoadedObject, ManifestError, parse_lenient
from webhook.kube.yaml_bounds import REFUSED
from webhook.snapshots.state import ClusterState

MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")
HELM_HINT = (
    "this looks like a Helm template: render it first "
    "(`helm template RELEASE CHART | snapready check -`) and check the output"
)


def error_row(source: str, reason: str, line: int | None = None) -> dict[str, Any]:
    """One ``errors[]`` entry: ``{"source", "line", "reason", "hint"}`` (hint None or text)."""
    return {"source": source, "line": line, "reason": reason, "hint": helm_hint(source)}


def helm_hint(source: str) -> str | None:
    """``HELM_HINT`` when ``source`` (a file) holds template actions (``{{``) or lies in a Helm
    chart (a folder with ``Chart.yaml`` above it); None otherwise, and for stdin."""
    file = source.partition("#")[0]
    if file in ("", "-"):
        return None
    path = Path(file)
    if any((parent / "Chart.yaml").is_file() for parent in path.parents):
        return HELM_HINT
    try:
        return HELM_HINT if b"{{" in path.read_bytes() else None
    except OSError:
        return None


def expand_paths(names: Sequence[str]) -> tuple[list[str], list[dict[str, Any]]]:
    """``names`` with each directory replaced by its ``*.yaml``/``*.yml``/``*.json`` files
    (recursive, sorted); ``-`` (stdin) and files pass through. A directory without such files is
    an error row."""
    out: list[str] = []
    errors: list[dict[str, Any]] = []
    for name in names:
        path = Path(name)
        if name == "-" or not path.is_dir():
            out.append(name)
            continue
        found = sorted(
            str(p) for p in path.rglob("*") if p.suffix in MANIFEST_SUFFIXES and p.is_file()
        )
        if not found:
            errors.append(error_row(name, "directory holds no .yaml, .yml or .json files"))
        out.extend(found)
    return out, errors


def read_inputs(names: Sequence[str]) -> tuple[list[LoadedObject], list[dict[str, Any]]]:
    """Every object of the inputs ``names``, and the error rows of those that cannot be read.

    An input named on the command line that holds no object (an empty file) is an error row
    too when other inputs gave something, so it is never silently left out of the report (when
    nothing gave anything, ``check`` says "no objects found in ..." and exits 2).
    """
    files, errors = expand_paths(names)
    objects, failed = read_lenient(files, locate=True)  # findings go on their fields' lines
    errors.extend(_manifest_row(exc) for exc in failed)
    if objects or errors:
        seen = {item.file for item in objects} | {
            str(row["source"]).partition("#")[0] for row in errors
        }
        errors.extend(
            error_row(name, "no objects found (an empty input?)")
            for name in dict.fromkeys(names)
            if name not in seen and (name == "-" or not Path(name).is_dir())
        )
    return objects, errors


def _manifest_row(exc: ManifestError) -> dict[str, Any]:
    return error_row(exc.source, exc.reason, exc.line)


def checked_state(
    settings: Settings, objects: Sequence[LoadedObject], namespace: str
) -> tuple[ClusterState, list[dict[str, Any]]]:
    """The cluster the objects are judged in, and the error rows of input objects refused
    (a malformed policy, or a duplicate with other content than the first one).

    Raises:
        ConfigError: the policy directory cannot be loaded (its problems are not the input's).
    """
    directory = settings.source.policy_dir
    refuse_hostile_policies(directory)
    gathered: ClusterObjects = policy_dir_objects(
        directory, prefix=settings.prefix, namespace=namespace
    )
    refused = gather(gathered, ((item.source, item.obj) for item in objects))
    rows = [_config_row(exc) for exc in refused]
    return gathered.state(source=f"files:{directory} + checked input"), rows


def refuse_hostile_policies(directory: Path) -> None:
    """Read the policy files (``*.yaml``, ``*.yml``, ``*.json`` of ``directory``, as
    ``policy_dir_objects`` does) with the bounds of ``webhook.kube.yaml_bounds`` first: in CI the
    policy directory may come from the same pull request as the manifests, and a YAML alias bomb
    in a policy file must be refused, not expanded by the policy loader.

    Raises:
        ConfigError: a document beyond a bound (``file#document:line: refused: ...``).
    """
    if not directory.is_dir():
        return  # policy_dir_objects says so
    for path in sorted(p for p in directory.iterdir() if p.suffix in MANIFEST_SUFFIXES):
        try:
            data = path.read_bytes()
        except OSError:
            continue  # policy_dir_objects reports it
        for exc in parse_lenient(data, str(path))[1]:
            if exc.reason.startswith(REFUSED):
                raise ConfigError(f"{exc.source}:{exc.line}: {exc.reason}")


def _config_row(exc: ConfigError) -> dict[str, Any]:
    """An error row from a ``ConfigError`` whose message starts with ``source: ``."""
    source, _, reason = str(exc).partition(": ")
    return error_row(source, reason or str(exc))
