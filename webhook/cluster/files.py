"""The file policy source: a directory of multi-document YAML (the embedded default), and the
cluster as a checked input describes it (``snapready check``).

Reads ``*.yaml``/``*.yml``/``*.json`` files (sorted, non-recursive), keeps PodSnapshotPolicy and
PodSnapshotStorageConfig documents, ignores other kinds (example pods live beside the policies).
Any malformed document fails the whole load with the file, document index and field: never a
partial load. A PodSnapshotPolicy without ``metadata.namespace`` lands in ``namespace`` (what
``kubectl apply -n NS`` does; ``default`` unless told). The same object twice with the same
content is one object; twice with different content is an error.

``ClusterObjects`` is the same collection for ``check``: it also takes ComputeClasses and Nodes;
an object of the checked input replaces the policy directory's one of the same name (the input is
what is being applied, as ``kubectl apply`` replaces it), and two different ones in the input
are an error row (``gather``), so the rest of the input is still judged.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from webhook.base.errors import ConfigError
from webhook.kube.manifests import parse_lenient
from webhook.kube.matching import Policy, PolicyIndex
from webhook.kube.yaml_bounds import REFUSED
from webhook.snapshots.facts import compute_class_facts, node_pools, node_view
from webhook.snapshots.state import (
    ClusterState,
    ComputeClassFacts,
    NodeView,
    StorageConfig,
    is_snapshot_kind,
    parse_policy,
    parse_storage_config,
)

POLICY_SUFFIXES = (".yaml", ".yml", ".json")


def read_documents(path: Path) -> list[tuple[str, Any]]:
    """Every YAML/JSON document of ``path`` with a ``file#index`` label.

    Raises:
        ConfigError: unreadable file, invalid YAML (names the file and line), or a document
            beyond the bounds of ``kube.yaml_bounds`` (a YAML alias bomb or deep nesting: the
            policy directory of ``serve`` and ``check`` is refused before it is expanded).
    """
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read: {exc}") from None
    for error in parse_lenient(text.encode(), str(path))[1]:
        if error.reason.startswith(REFUSED):
            raise ConfigError(f"{error.source}:{error.line}: {error.reason}")
    try:
        documents = list(yaml.safe_load_all(text))
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: invalid YAML: {exc}") from None
    labelled: list[tuple[str, Any]] = []
    for index, document in enumerate(documents):
        if document is None:
            continue
        if isinstance(document, dict) and document.get("kind") == "List":
            for item_index, item in enumerate(document.get("items") or []):
                labelled.append((f"{path}#{index}.items[{item_index}]", item))
        else:
            labelled.append((f"{path}#{index}", document))
    return labelled


@dataclass
class ClusterObjects:
    """Cluster objects gathered from files, keyed like the API server keys them.

    Attributes:
        prefix: annotation prefix (``snapready.io/``) for the policies' enforcement annotation.
        namespace: where a PodSnapshotPolicy without ``metadata.namespace`` lands.
        seen: ``(kind, namespace, name)`` -> (first source, raw document), for duplicates.
    """

    prefix: str
    namespace: str = "default"
    policies: dict[tuple[str, str], Policy] = field(default_factory=dict)
    storage: dict[str, StorageConfig] = field(default_factory=dict)
    classes: dict[str, ComputeClassFacts] = field(default_factory=dict)
    nodes: dict[str, NodeView] = field(default_factory=dict)
    node_count: int = 0
    seen: dict[tuple[str, str, str], tuple[str, Any, bool]] = field(default_factory=dict)
    applying: bool = False
    """True while the checked input is added (``gather``): its objects replace the directory's."""

    def add(self, where: str, document: Any) -> bool:
        """Take ``document`` if it is a kind this collection keeps; return whether it was.

        Raises:
            ConfigError: a malformed policy/storage config, or a different object under a key
                already taken (the message names both sources).
        """
        if is_snapshot_kind(document, "PodSnapshotPolicy"):
            policy = parse_policy(
                document, prefix=self.prefix, where=where, namespace=self.namespace
            )
            if self._first(("PodSnapshotPolicy", policy.namespace, policy.name), where, document):
                self.policies[(policy.namespace, policy.name)] = policy
        elif is_snapshot_kind(document, "PodSnapshotStorageConfig"):
            config = parse_storage_config(document, where=where)
            if self._first(("PodSnapshotStorageConfig", "", config.name), where, document):
                self.storage[config.name] = config
        elif _is(document, "ComputeClass", "cloud.google.com/"):
            facts = compute_class_facts(document)
            if facts is not None and self._first(("ComputeClass", "", facts.name), where, document):
                self.classes[facts.name] = facts
        elif _is(document, "Node", "v1"):
            name = (document.get("metadata") or {}).get("name")
            view = node_view(document)
            if isinstance(name, str) and self._first(("Node", "", name), where, document):
                self.node_count += 1
                if view is not None:
                    self.nodes[name] = view
        else:
            return False
        return True

    def _first(self, key: tuple[str, str, str], where: str, document: Any) -> bool:
        """True for a new key or an input object replacing the directory's; False for an
        identical duplicate; raises for a different one from the same side."""
        previous = self.seen.get(key)
        if previous is not None and previous[1] == document:
            return False
        if previous is None or (self.applying and not previous[2]):
            self.seen[key] = (where, document, self.applying)
            return True
        ref = "/".join(part for part in key if part)
        raise ConfigError(f"{where}: duplicate {ref} with other content than {previous[0]}")

    def state(self, *, source: str) -> ClusterState:
        """A synced ``ClusterState`` of what was gathered. ComputeClasses and nodes are known
        (a class or pool not among them is "not found") only when some were given; otherwise
        they stay unknown, as in file mode."""
        return ClusterState(
            policies=PolicyIndex.build(self.policies.values()),
            storage_configs=dict(self.storage),
            compute_classes=dict(self.classes) if self.classes else None,
            node_pools=node_pools(self.nodes.values()),
            nodes=dict(self.nodes),
            synced=True,
            details={"source": source, "policies": len(self.policies)},
        )


def _is(document: Any, kind: str, api_version: str) -> bool:
    """``document`` is a ``kind`` whose apiVersion is ``api_version`` or starts with it
    (a trailing ``/`` matches any version of that group)."""
    if not isinstance(document, dict) or document.get("kind") != kind:
        return False
    version = document.get("apiVersion")
    if not isinstance(version, str):
        return False
    return version.startswith(api_version) if api_version.endswith("/") else version == api_version


def policy_dir_objects(
    directory: Path, *, prefix: str, namespace: str = "default"
) -> ClusterObjects:
    """The policies and storage configs of ``directory`` (other kinds ignored).

    Raises:
        ConfigError: missing directory, malformed file/document, or a conflicting duplicate.
    """
    if not directory.is_dir():
        raise ConfigError(f"{directory}: policy directory does not exist")
    objects = ClusterObjects(prefix=prefix, namespace=namespace)
    for path in sorted(p for p in directory.iterdir() if p.suffix in POLICY_SUFFIXES):
        for where, document in read_documents(path):
            if is_snapshot_kind(document, "PodSnapshotPolicy") or is_snapshot_kind(
                document, "PodSnapshotStorageConfig"
            ):
                objects.add(where, document)
            elif not isinstance(document, dict):
                raise ConfigError(
                    f"{where}: not a Kubernetes object (got {type(document).__name__})"
                )
    return objects


def load_policy_dir(directory: Path, *, prefix: str, namespace: str = "default") -> ClusterState:
    """Load every policy and storage config of ``directory`` into a synced ``ClusterState``.

    Raises:
        ConfigError: missing directory, malformed file/document, or a duplicate object name
            with different content.
    """
    objects = policy_dir_objects(directory, prefix=prefix, namespace=namespace)
    return objects.state(source=f"files:{directory}")


def gather(objects: ClusterObjects, documents: Iterable[tuple[str, Any]]) -> list[ConfigError]:
    """Add each ``(where, document)`` of the checked input to ``objects`` (replacing the
    directory's objects of the same name); the errors, one per refused document."""
    errors: list[ConfigError] = []
    objects.applying = True
    for where, document in documents:
        try:
            objects.add(where, document)
        except ConfigError as exc:
            errors.append(exc)
    return errors
