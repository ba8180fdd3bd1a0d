"""How many units of an extended resource (``nvidia.com/gpu``, ``google.com/tpu``) a pod needs.

``resource_usage`` applies Kubernetes quantity parsing (``webhook.kube.quantity``) and the
scheduler's effective-request formula (KEP-753, sidecar containers):
``max(sum(app) + sum(native sidecars), max_i(init_i + sidecars declared before i))``.
Requests must equal limits for extended resources (k8s.io/kubernetes pkg/apis/core/validation
``ValidateResourceRequirements``): a request without a limit or differing from it is reported as a
problem. User values in messages are cut by ``webhook.base.text.clip``. Pure module.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

from webhook.base.text import clip
from webhook.base.types import RawObject
from webhook.kube.gke import GPU_RESOURCE, MIG_RESOURCE_PREFIX
from webhook.kube.quantity import parse_quantity
from webhook.pod.context import indexed_dicts, join_path

ContainerRole = Literal["app", "sidecar", "init"]


@dataclass(frozen=True)
class ContainerUse:
    """Units of one resource a container asks for.

    Attributes:
        path: field path of the resource, e.g. ``spec.containers[1].resources.limits["x/y"]``.
        role: ``app``, ``sidecar`` (init container with ``restartPolicy: Always``) or ``init``.
        count: whole units (the limit, or the request when no limit is set).
    """

    path: str
    role: ContainerRole
    count: int


@dataclass(frozen=True)
class ResourceUsage:
    """A pod's need for one extended resource.

    Attributes:
        total: the scheduler's effective pod request (KEP-753 formula), in whole units.
        containers: every container asking for at least one unit, in spec order.
        problems: ``(path, message)`` for malformed quantities, requests without a limit and
            requests differing from limits (the API server rejects those; we report them).
    """

    total: int = 0
    containers: tuple[ContainerUse, ...] = ()
    problems: tuple[tuple[str, str], ...] = field(default=())


def _containers(spec: RawObject) -> Iterator[tuple[str, int, RawObject, ContainerRole]]:
    for index, container in indexed_dicts(spec.get("initContainers")):
        role: ContainerRole = "sidecar" if container.get("restartPolicy") == "Always" else "init"
        yield "initContainers", index, container, role
    for index, container in indexed_dicts(spec.get("containers")):
        yield "containers", index, container, "app"


def _whole(value: Any, field: str, problems: list[tuple[str, str]]) -> int | None:
    """A quantity as whole units; None (and a ``(field, message)`` problem) when malformed, out
    of range, negative or fractional (devices are whole: the API server requires an integer for
    extended resources, and ``"1e-99999999"`` is ``1n`` there, so it is fractional too).
    Plain ASCII digits (``"4"``, the usual device count) are read directly: up to 18 digits
    they are below 2^63-1 and need none of ``parse_quantity``'s decimal work."""
    if type(value) is str and len(value) <= 18 and value.isdigit() and value.isascii():
        return int(value)
    try:
        quantity = parse_quantity(value)
    except ValueError as exc:
        problems.append((field, f"not a valid quantity: {exc}; use a whole number such as 1"))
        return None
    if quantity < 0 or quantity != quantity.to_integral_value():
        text = f"{clip(value)!r} is not a valid quantity of devices; use a whole number such as 1"
        problems.append((field, text))
        return None
    return int(quantity)


def _container_count(container: RawObject, resource: str) -> tuple[int, str, list[tuple[str, str]]]:
    """``(count, "limits" or "requests" it came from, [(field, problem)])`` for one container."""
    resources = container.get("resources")
    if not isinstance(resources, dict):
        return 0, "limits", []
    limits, requests = resources.get("limits"), resources.get("requests")
    limits = limits if isinstance(limits, dict) else {}
    requests = requests if isinstance(requests, dict) else {}
    if resource not in limits and resource not in requests:
        return 0, "limits", []  # the common case: this container does not ask for it
    problems: list[tuple[str, str]] = []
    limit = _whole(limits[resource], "limits", problems) if resource in limits else None
    request = _whole(requests[resource], "requests", problems) if resource in requests else None
    if limit is None and request:
        problems.append(("requests", f"{resource} requested without a limit: set the limit too"))
        return request, "requests", problems
    if limit is not None and request is not None and request != limit:
        problems.append(("requests", f"{resource} request {request} != limit {limit}: make equal"))
    return limit or 0, "limits", problems


def resource_usage(spec: RawObject, spec_path: str, resource: str) -> ResourceUsage:
    """How many units of ``resource`` (e.g. ``nvidia.com/gpu``) the whole pod needs.

    A ``"0"`` limit is no device. A request without a limit counts (the author wants a device)
    and is reported in ``problems``; so are malformed and fractional quantities (counted as 0).
    """
    return resource_usages(spec, spec_path, (resource,))[0]


def requests_gpus(spec: RawObject) -> bool:
    """Whether any container of ``spec`` asks for ``nvidia.com/gpu`` or a MIG partition
    (``nvidia.com/mig-<profile>``, the device plugin's mixed strategy), counted as
    ``resource_usage`` does (a ``"0"`` limit is none). Such a pod runs only on nodes with GPUs."""
    names = (GPU_RESOURCE, *prefixed_resources(spec, MIG_RESOURCE_PREFIX))
    return any(
        _container_count(c, name)[0] > 0 for _, _, c, _ in _containers(spec) for name in names
    )


def resource_usages(
    spec: RawObject, spec_path: str, resources: tuple[str, ...]
) -> tuple[ResourceUsage, ...]:
    """``resource_usage`` of each of ``resources``, in one walk over the containers (the
    placement asks for GPUs and TPUs of every pod)."""
    tallies = [_Tally() for _ in resources]
    for kind, index, container, role in _containers(spec):
        for resource, tally in zip(resources, tallies, strict=True):
            count, field, found = _container_count(container, resource)
            if count or found:  # paths are built only when reported (the hot path has none)
                base = join_path(spec_path, kind, index, "resources")
                tally.problems.extend(
                    (join_path(base, where, resource), text) for where, text in found
                )
                if count:
                    tally.uses.append(ContainerUse(join_path(base, field, resource), role, count))
            tally.add(role, count)
    return tuple(tally.usage() for tally in tallies)


def prefixed_resources(spec: RawObject, prefix: str) -> tuple[str, ...]:
    """Names of the extended resources starting with ``prefix`` that any container's limits or
    requests mention, sorted (``nvidia.com/mig-3g.20gb`` for ``nvidia.com/mig-``: the NVIDIA
    device plugin's mixed MIG strategy names one resource per profile)."""
    found: set[str] = set()
    for _, _, container, _ in _containers(spec):
        resources = container.get("resources")
        if not isinstance(resources, dict):
            continue
        for side in ("limits", "requests"):
            values = resources.get(side)
            if isinstance(values, dict):
                found.update(k for k in values if isinstance(k, str) and k.startswith(prefix))
    return tuple(sorted(found))


def merged_usage(usages: tuple[ResourceUsage, ...]) -> ResourceUsage:
    """Several resources counted as one (MIG profiles are GPUs): totals summed, containers and
    problems concatenated in the given order."""
    return ResourceUsage(
        sum(u.total for u in usages),
        tuple(c for u in usages for c in u.containers),
        tuple(p for u in usages for p in u.problems),
    )


class _Tally:
    """The running KEP-753 sums of one resource over the containers in spec order."""

    __slots__ = ("app", "init_peak", "problems", "sidecars", "uses")

    def __init__(self) -> None:
        self.problems: list[tuple[str, str]] = []
        self.uses: list[ContainerUse] = []
        self.app = self.sidecars = self.init_peak = 0

    def add(self, role: ContainerRole, count: int) -> None:
        if role == "init":
            self.init_peak = max(self.init_peak, count + self.sidecars)
        elif role == "sidecar":
            self.sidecars += count
        else:
            self.app += count

    def usage(self) -> ResourceUsage:
        total = max(self.app + self.sidecars, self.init_peak)
        return ResourceUsage(total, tuple(self.uses), tuple(self.problems))
