"""The file policy source: a directory of multi-document YAML (the embedded default).

Reads ``*.yaml``/``*.yml``/``*.json`` files (sorted, non-recursive), keeps PodSnapshotPolicy and
PodSnapshotStorageConfig documents, ignores other kinds (example pods live beside the policies).
Any malformed document fails the whole load with the file, document index and field: never a
partial load.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from webhook.base.errors import ConfigError
from webhook.kube.matching import Policy, PolicyIndex
from webhook.kube.state import (
    ClusterState,
    StorageConfig,
    is_snapshot_kind,
    parse_policy,
    parse_storage_config,
)

POLICY_SUFFIXES = (".yaml", ".yml", ".json")


def read_documents(path: Path) -> list[tuple[str, Any]]:
    """Every YAML/JSON document of ``path`` with a ``file#index`` label.

    Raises:
        ConfigError: unreadable file or invalid YAML (names the file and line).
    """
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read: {exc}") from None
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


def load_policy_dir(directory: Path, *, prefix: str) -> ClusterState:
    """Load every policy and storage config of ``directory`` into a synced ``ClusterState``.

    Raises:
        ConfigError: missing directory, malformed file/document, or duplicate object names.
    """
    if not directory.is_dir():
        raise ConfigError(f"{directory}: policy directory does not exist")
    policies: dict[tuple[str, str], Policy] = {}
    storage: dict[str, StorageConfig] = {}
    for path in sorted(p for p in directory.iterdir() if p.suffix in POLICY_SUFFIXES):
        for where, document in read_documents(path):
            if is_snapshot_kind(document, "PodSnapshotPolicy"):
                policy = parse_policy(document, prefix=prefix, where=where)
                key = (policy.namespace, policy.name)
                if key in policies:
                    raise ConfigError(f"{where}: duplicate PodSnapshotPolicy {key[0]}/{key[1]}")
                policies[key] = policy
            elif is_snapshot_kind(document, "PodSnapshotStorageConfig"):
                config = parse_storage_config(document, where=where)
                if config.name in storage:
                    raise ConfigError(f"{where}: duplicate PodSnapshotStorageConfig {config.name}")
                storage[config.name] = config
            elif not isinstance(document, dict):
                raise ConfigError(
                    f"{where}: not a Kubernetes object (got {type(document).__name__})"
                )
    return ClusterState(
        policies=PolicyIndex.build(policies.values()),
        storage_configs=storage,
        synced=True,
        details={"source": f"files:{directory}", "policies": str(len(policies))},
    )
