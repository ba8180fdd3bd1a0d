"""``snapready status --sizes``: what each PodSnapshot occupies in its bucket, totals per policy.

Sources: the PodSnapshot names its policy (``spec.policyName``), the policy its storage config
(``spec.storageConfigName``), the cluster-scoped PodSnapshotStorageConfig its bucket and
optional path (``spec.snapshotStorageConfig.gcs.bucket`` / ``.path``; listed as ``v1``, else
``v1alpha1``). Where the snapshot's files are is GKE's own word when it gives it:
``status.storageStatus.gcs.observedGCSPath`` (``gs://<bucket>/<path>``, the PodSnapshot CRD's
schema; docs/gke-facts.md#section-10), whose objects (gVisor's ``checkpoint.img``, ``pages.img``,
``pages_meta.img``, ...) are summed. Only a snapshot without that path (not uploaded yet, or an
older GKE) falls back to ``snapshot_prefix``: the ``storage.snapshot_prefix`` template (default
``{path}/{namespace}/{name}/``) filled in and normalised, an assumption marked ``assumed`` in
the output (docs/reference/status-explain.md#what-snapshots-cost-status-sizes); a Ready snapshot
with no object under its prefix is named in a note. Sizes come from
``cluster.gcs_usage.UsageReader`` (sum of the objects' ``size``).

A size that cannot be read (storage configs not readable, e.g. 403; no storage config; bucket
missing; GCS unreachable or refusing) is None, shown as ``unknown``, never 0, with one note per
cause; the rest of ``status`` is unaffected. Totals per policy: bytes of the known sizes, and
per snapshot state (the state ``status`` gives each snapshot, whatever it is: ``ready``,
``stale``, ``failed``, ...), with the count of unknown sizes beside each.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from webhook.base.config import Settings
from webhook.cluster.api.snapshot_reader import Live
from webhook.snapshots.state import StorageConfig
from webhook.snapshots.views import SnapshotView

if TYPE_CHECKING:
    from webhook.cluster.gcs_usage import PrefixUsage

GIB = 1024**3
SIZED_STATES = ("ready", "stale")
"""States of snapshots whose checkpoint finished: zero objects there means a wrong prefix."""


class Usage(Protocol):
    """``UsageReader.usage``: ``{prefix: PrefixUsage}`` of ``bucket``; never raises."""

    def usage(self, bucket: str, prefixes: Iterable[str]) -> dict[str, PrefixUsage]: ...


def snapshot_prefix(template: str, *, path: str | None, namespace: str, name: str, uid: str) -> str:
    """The object prefix of one snapshot: ``template`` filled in, empty segments dropped (an
    unset ``path``), ending in ``/`` so that ``snap-1/`` never matches ``snap-10/...``.

    >>> snapshot_prefix("{path}/{namespace}/{name}/", path="/a/b/", namespace="n", name="s",
    ...                 uid="u")
    'a/b/n/s/'
    """
    filled = template.format(path=path or "", namespace=namespace, name=name, uid=uid)
    return "/".join(part for part in filled.split("/") if part) + "/"


def observed_location(path: str | None) -> tuple[str, str] | None:
    """``(bucket, prefix)`` of GKE's ``observedGCSPath`` (``gs://bucket/a/b``), the prefix
    ending in ``/`` (``a/b/``; empty for the bucket's root); None when absent or not of that
    form (the CRD's pattern ``^gs://[a-z0-9._-]+/.*``).

    >>> observed_location("gs://snaps/clusters/c1/ns/snap-1")
    ('snaps', 'clusters/c1/ns/snap-1/')
    """
    if not path or not path.startswith("gs://"):
        return None
    bucket, _, rest = path[5:].partition("/")
    if not bucket or not all(c.islower() or c.isdigit() or c in "._-" for c in bucket):
        return None
    parts = [part for part in rest.split("/") if part]
    return bucket, "/".join(parts) + "/" if parts else ""


@dataclass
class SizeReading:
    """Sizes of the snapshots of one ``status`` run.

    Attributes:
        template: the ``storage.snapshot_prefix`` used.
        entries: per snapshot, by (namespace, name): ``name``, ``state``, ``bucket``,
            ``prefix`` (None when the storage config is unknown), ``source`` (``observed``:
            GKE's ``observedGCSPath``; ``assumed``: the template), ``bytes`` (int, or None:
            unknown), ``objects``, ``error`` (why unknown, else None).
        notes: one per cause of unknown sizes, and the zero-object warning.
    """

    template: str
    entries: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def read_sizes(
    live: Live,
    configs: Mapping[str, StorageConfig] | None,
    usage: Usage,
    settings: Settings,
    state_of: Callable[[SnapshotView], str],
) -> SizeReading:
    """List every snapshot's prefix (grouped by bucket) and record its size and state."""
    template = settings.storage.snapshot_prefix
    reading = SizeReading(template)
    storage = {(p.namespace, p.name): p.storage_config_name for p in live.policies}
    wanted: dict[str, list[tuple[SnapshotView, str]]] = defaultdict(list)
    for view in live.snapshots:
        entry: dict[str, Any] = {"name": view.name, "state": state_of(view), "bucket": None}
        entry |= {"prefix": None, "source": None, "bytes": None, "objects": 0, "error": None}
        reading.entries[view.namespace, view.name] = entry
        observed = observed_location(live.gcs_paths.get((view.namespace, view.name)))
        if observed is not None:
            entry |= {"bucket": observed[0], "prefix": observed[1], "source": "observed"}
            wanted[observed[0]].append((view, observed[1]))
            continue
        name = storage.get((view.namespace, view.policy))
        config = configs.get(name) if configs is not None and name else None
        if config is None or not config.bucket:
            entry["error"] = _missing_config(configs, view, name)
            continue
        prefix = snapshot_prefix(
            template,
            path=config.path,
            namespace=view.namespace,
            name=view.name,
            uid=live.snapshot_uids.get((view.namespace, view.name), ""),
        )
        entry |= {"bucket": config.bucket, "prefix": prefix, "source": "assumed"}
        wanted[config.bucket].append((view, prefix))
    for bucket, pairs in sorted(wanted.items()):
        found = usage.usage(bucket, [prefix for _, prefix in pairs])
        for view, prefix in pairs:
            got = found[prefix]
            entry = reading.entries[view.namespace, view.name]
            entry |= {"bytes": got.bytes, "objects": got.objects, "error": got.error}
    reading.notes = _notes(reading.entries.values(), template)
    return reading


def _missing_config(
    configs: Mapping[str, StorageConfig] | None, view: SnapshotView, name: str | None
) -> str:
    if configs is None:
        return "storage configs not readable"
    if name is None:
        return f"policy {view.policy} not found"
    if name not in configs:
        return f"storage config {name} not found"
    return f"storage config {name} names no bucket"


def _notes(entries: Iterable[dict[str, Any]], template: str) -> list[str]:
    causes: dict[str, int] = defaultdict(int)
    empty: list[dict[str, Any]] = []
    for entry in entries:
        if entry["error"] is not None:
            where = f" in gs://{entry['bucket']}" if entry["bucket"] else ""
            causes[f"{where}: {entry['error']}"] += 1
        elif entry["objects"] == 0 and entry["state"] in SIZED_STATES:
            empty.append(entry)
    assumed = [e for e in empty if e["source"] == "assumed"]
    observed = [e for e in empty if e["source"] == "observed"]
    notes = [
        f"cannot read the size of {count} snapshot(s){cause}: shown as unknown"
        for cause, count in sorted(causes.items())
    ]
    if assumed:
        first = f"gs://{assumed[0]['bucket']}/{assumed[0]['prefix']}"
        notes.append(
            f"{len(assumed)} Ready snapshot(s) have no object under their prefix (e.g. {first}), "
            f"assumed from storage.snapshot_prefix ({template}) as GKE reports no "
            "observedGCSPath for them; check with `gcloud storage ls` and set it"
        )
    if observed:
        first = f"gs://{observed[0]['bucket']}/{observed[0]['prefix']}"
        notes.append(
            f"{len(observed)} Ready snapshot(s) have no object at the path GKE reports (e.g. "
            f"{first}): their files were removed from the bucket (a lifecycle rule?)"
        )
    return notes


def size_block(entries: list[dict[str, Any]]) -> dict[str, Any]:
    """Totals of ``entries`` (one policy's, or all): ``bytes`` (sum of the known sizes; None
    when every size is unknown), ``unknown`` (how many), ``byState``: {state: ``snapshots``,
    ``bytes`` (None when all of that state are unknown), ``unknown``}; and the entries."""
    by_state: dict[str, dict[str, Any]] = {}
    for entry in entries:
        block = by_state.setdefault(entry["state"], {"snapshots": 0, "bytes": None, "unknown": 0})
        block["snapshots"] += 1
        if entry["bytes"] is None:
            block["unknown"] += 1
        else:
            block["bytes"] = (block["bytes"] or 0) + entry["bytes"]
    known = [e["bytes"] for e in entries if e["bytes"] is not None]
    return {
        "bytes": sum(known) if known or not entries else None,
        "unknown": len(entries) - len(known),
        "byState": dict(sorted(by_state.items())),
        "snapshots": entries,
    }


def gib_text(size: int | None) -> str:
    """``1.5 GiB`` (one decimal), ``<0.1 GiB`` for a few bytes, ``0 B``, ``unknown`` (None)."""
    if size is None:
        return "unknown"
    if size == 0:
        return "0 B"
    if size < GIB // 20:  # would round to 0.0
        return "<0.1 GiB"
    return f"{size / GIB:.1f} GiB"


def sizes_lines(block: dict[str, Any]) -> list[str]:
    """Text lines of one policy's ``sizes`` block (``status.text``)."""
    unknown = f" ({block['unknown']} unknown)" if block["unknown"] else ""
    states = ", ".join(
        f"{gib_text(b['bytes'])} {state}" + (f" ({b['unknown']} unknown)" if b["unknown"] else "")
        for state, b in block["byState"].items()
    )
    lines = [
        f"  bucket     {gib_text(block['bytes'])}{unknown}" + (f": {states}" if states else "")
    ]
    for entry in block["snapshots"]:
        where = f"gs://{entry['bucket']}/{entry['prefix']}" if entry["bucket"] else "-"
        if entry["source"] == "assumed":
            where += " (assumed layout)"
        why = f" ({entry['error']})" if entry["error"] else ""
        lines.append(
            f"    {entry['name']} ({entry['state']}) {gib_text(entry['bytes'])}{why}  {where}"
        )
    return lines


def sizes_total_lines(total: dict[str, Any]) -> list[str]:
    """Text lines of the report's ``sizes`` block: every snapshot shown, by state."""
    unknown = f" ({total['unknown']} unknown)" if total["unknown"] else ""
    lines = [f"snapshots in buckets: {gib_text(total['bytes'])}{unknown}"]
    for state, block in total["byState"].items():
        missing = f", {block['unknown']} unknown" if block["unknown"] else ""
        lines.append(f"  {state}: {gib_text(block['bytes'])} ({block['snapshots']}{missing})")
    lines.append(
        "  objects at GKE's observedGCSPath; where GKE reports none, under "
        f"{total['prefixTemplate']} (storage.snapshot_prefix, assumed)"
    )
    return lines
