"""The pod views of any workload: built-in controllers and custom resources alike, with the
labels their controllers add.

``workload_views(obj, ordinal, workloads)`` is what ``hash``, ``diff``, ``check`` and the
validating webhook judge: ``workloads.pod_views`` for Pods and the apps/batch controllers, the
``custom_workloads`` table (built-in plus the setting's) for custom resources. Every view
carries ``added_labels``: the labels the controller puts on the pods, resolved from the object
(``job-name`` is the Job's name) or ``UNKNOWN_VALUE`` when set per pod. Pure module.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import replace
from typing import Any

from webhook.base.config import Settings
from webhook.base.types import RawObject
from webhook.kube.custom_workloads import (
    BUILTIN,
    CONTROLLER_LABELS,
    ITEM_GROUP,
    ITEM_NAME,
    NAME,
    NAME_HASH,
    PER_POD,
    UNKNOWN_VALUE,
    Site,
    Workload,
    extra_workloads,
    fnv1a32,
)
from webhook.kube.matching import Policy
from webhook.kube.workloads import (
    INDEXED_JOB_LABEL,
    TEMPLATE_PATHS,
    PodView,
    metadata_of,
    pod_views,
)

Workloads = Mapping[tuple[str, str], Workload]


def workloads_from(settings: Settings) -> Workloads:
    """The custom workloads judged: the built-in table, then the ``workloads.extra`` setting's
    entries (which may replace a built-in one)."""
    extra = settings.workloads.extra
    if not extra:
        return BUILTIN
    return {**BUILTIN, **extra_workloads(entry.model_dump() for entry in extra)}


def workload_of(obj: RawObject, workloads: Workloads = BUILTIN) -> Workload | None:
    """The custom-workload entry for ``obj``'s API group and kind, or None."""
    kind, api_version = obj.get("kind"), obj.get("apiVersion")
    if not isinstance(kind, str) or not isinstance(api_version, str):
        return None
    group = api_version.rpartition("/")[0]
    return workloads.get((group, kind))


def workload_views(
    obj: RawObject, ordinal: int | None = None, workloads: Workloads = BUILTIN
) -> list[PodView]:
    """Every pod view of ``obj`` (Pod, built-in controller or custom resource), with
    ``added_labels`` filled; ``[]`` for anything else. Never raises."""
    kind = obj.get("kind")
    if kind == "Pod" or kind in TEMPLATE_PATHS:
        return [_with_builtin_labels(obj, view) for view in pod_views(obj, ordinal)]
    workload = workload_of(obj, workloads)
    if workload is None:
        return []
    return [view for site in workload.sites for view in _site_views(obj, site)]


def _with_builtin_labels(obj: RawObject, view: PodView) -> PodView:
    kind = obj.get("kind")
    labels = CONTROLLER_LABELS.get(kind) if isinstance(kind, str) else None
    if not labels and not view.indexed_job:
        return view
    added = _resolve(labels or {}, _name(obj), {})
    if view.indexed_job:
        added[INDEXED_JOB_LABEL] = UNKNOWN_VALUE if view.ordinal is None else str(view.ordinal)
    if kind == "StatefulSet" and view.ordinal is not None:
        added["statefulset.kubernetes.io/pod-name"] = f"{view.set_name}-{view.ordinal}"
        added["apps.kubernetes.io/pod-index"] = str(view.ordinal)
    return replace(view, added_labels=added)


def _name(obj: RawObject) -> str | None:
    name = metadata_of(obj).get("name")
    return name if isinstance(name, str) and name else None


def _resolve(labels: Mapping[str, str], name: str | None, item: Any) -> dict[str, str]:
    """Label values from the table's tokens; unknown ones become ``UNKNOWN_VALUE``."""
    out: dict[str, str] = {}
    for key, value in labels.items():
        if value == NAME:
            resolved = name
        elif value == NAME_HASH:
            resolved = fnv1a32(name) if name else None
        elif value in (ITEM_NAME, ITEM_GROUP):
            field = "name" if value == ITEM_NAME else "groupName"
            found = item.get(field) if isinstance(item, dict) else None
            resolved = found if isinstance(found, str) and found else None
        elif value == PER_POD:
            resolved = None
        else:
            resolved = value
        out[key] = UNKNOWN_VALUE if resolved is None else resolved
    return out


def _walk(
    node: Any, path: tuple[str, ...], where: str, item: Any
) -> Iterator[tuple[str, Any, Any]]:
    """``(field path, value, innermost list item)`` for each match of ``path`` under ``node``."""
    if not path:
        yield where, node, item
        return
    step, rest = path[0], path[1:]
    if step == "*":
        for index, child in enumerate(node if isinstance(node, list) else []):
            yield from _walk(child, rest, f"{where}[{index}]", child)
        return
    child = node.get(step) if isinstance(node, dict) else None
    if child is not None:
        yield from _walk(child, rest, f"{where}.{step}" if where else step, item)


def _site_views(obj: RawObject, site: Site) -> Iterator[PodView]:
    name = _name(obj)
    for where, value, item in _walk(obj, site.path, "", None):
        if not isinstance(value, dict):
            continue
        added = _resolve(site.labels, name, item)
        if not site.pod_spec:
            yield PodView(
                pod=value,
                spec_path=f"{where}.spec",
                metadata_path=f"{where}.metadata",
                added_labels=added,
            )
            continue
        spec, renames = _with_model(value, site, where)
        yield PodView(
            pod={"metadata": _spec_site_metadata(obj, site), "spec": spec},
            spec_path=where,
            metadata_path="metadata",
            added_labels=added,
            renames=renames,
        )


def _spec_site_metadata(obj: RawObject, site: Site) -> RawObject:
    """The pods' labels/annotations of a PodSpec site: the object's, then the site's maps."""
    own = metadata_of(obj)
    metadata: RawObject = {}
    for key, path in (("labels", site.labels_at), ("annotations", site.annotations_at)):
        merged = {**_mapping(own.get(key)), **_mapping(_at(obj, path))}
        if merged:
            metadata[key] = merged
    return metadata


def _with_model(
    spec: RawObject, site: Site, where: str
) -> tuple[RawObject, tuple[tuple[str, str], ...]]:
    """A KServe predictor's PodSpec with its model-framework container added after the user's
    containers (KServe names it ``kserve-container``; kept after them so the user's container
    paths stay right), and the rename of its path back to the framework key
    (``spec.predictor.containers[1]`` -> ``spec.predictor.tensorflow``)."""
    for key in site.model_keys:
        model = spec.get(key)
        if isinstance(model, dict):
            containers = spec.get("containers")
            own = list(containers) if isinstance(containers, list) else []
            merged = {**spec, "containers": [*own, {"name": "kserve-container", **model}]}
            return merged, ((f"{where}.containers[{len(own)}]", f"{where}.{key}"),)
    return spec, ()


def _at(obj: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        obj = obj.get(key) if isinstance(obj, dict) else None
    return obj


def _mapping(value: Any) -> dict[str, Any]:
    return dict(value) if isinstance(value, dict) else {}


def matching_labels(view: PodView) -> dict[str, str]:
    """The labels policies see on the view's pods: the template's strings, then the
    controller's (which the controller sets, so they win)."""
    metadata = view.pod.get("metadata")
    labels = metadata.get("labels") if isinstance(metadata, dict) else None
    own = (
        {k: v for k, v in labels.items() if isinstance(v, str)} if isinstance(labels, dict) else {}
    )
    return {**own, **view.added_labels}


def controller_labels(obj: RawObject) -> dict[str, str]:
    """The labels a built-in controller (Job, CronJob, StatefulSet, Deployment, DaemonSet) adds
    to the pods of ``obj``'s template, per ``CONTROLLER_LABELS`` (an Indexed Job's completion
    index included, unknown); ``{}`` for other kinds."""
    kind = obj.get("kind")
    labels = CONTROLLER_LABELS.get(kind) if isinstance(kind, str) else None
    added = _resolve(labels, _name(obj), {}) if labels else {}
    spec: Any = obj.get("spec")
    if kind == "CronJob":
        job: Any = spec.get("jobTemplate") if isinstance(spec, dict) else None
        spec = job.get("spec") if isinstance(job, dict) else None
    indexed = isinstance(spec, dict) and spec.get("completionMode") == "Indexed"
    if kind in ("Job", "CronJob") and indexed:
        added[INDEXED_JOB_LABEL] = UNKNOWN_VALUE
    return added


def depends_on_pod(policies: tuple[Policy, ...] | None, labels: Mapping[str, str]) -> list[Policy]:
    """The policies of ``policies`` (one namespace's) that do not select ``labels`` only because
    a requirement names values of a label the controller sets per pod (``UNKNOWN_VALUE``):
    whether they select the pods depends on the pod."""
    out: list[Policy] = []
    for policy in policies or ():
        open_keys = False
        for requirement in policy.selector.requirements:
            if labels.get(requirement.key) == UNKNOWN_VALUE and requirement.operator == "In":
                open_keys = True
            elif not requirement.matches(labels):
                break
        else:
            if open_keys:
                out.append(policy)
    return out


def depends_warning(policies: list[Policy], labels: Mapping[str, str]) -> str:
    """The warning for ``depends_on_pod`` policies: which ones and by which labels."""
    keys = sorted(
        {
            r.key
            for p in policies
            for r in p.selector.requirements
            if r.operator == "In" and labels.get(r.key) == UNKNOWN_VALUE
        }
    )
    names = ", ".join(p.name for p in policies)
    return (
        f"PodSnapshotPolicy {names} selects pods by the value of {', '.join(keys)}, which the "
        "controller sets per pod: whether it selects this template's pods depends on the pod, "
        "so the template was not judged against it"
    )
