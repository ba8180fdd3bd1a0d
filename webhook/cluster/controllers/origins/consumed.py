"""The Secrets and ConfigMaps an origin pod consumes, with their metadata at record time.

A snapshot restores the values its origin pod read (docs/gke-facts.md#section-3: GKE hashes no env
and no Secret content), so the origin record names each consumed object with its resourceVersion
and last change time (``snapshots.config_refs``): from the metadata watch when it covers the
namespace (``controllers.config_watch``, read through ``ClusterState.configs``), else one
metadata-only GET each (``KubeTransport.metadata_only``: never a value).
"""

from __future__ import annotations

import logging
from typing import Protocol

from webhook.base.types import RawObject
from webhook.cluster.api.syncing import NotServed, TransportError, describe
from webhook.snapshots.config_refs import ConfigMeta, config_meta, consumed, refs_of
from webhook.snapshots.state import ClusterState
from webhook.snapshots.views import ConfigRef

log = logging.getLogger("snapready.origins")


class MetadataTransport(Protocol):
    """A metadata-only GET (``PartialObjectMetadata``)."""

    def get(self, path: str) -> RawObject: ...


class ConsumedConfig:
    """Reads what an origin pod consumes (``read``); a refusal is logged once per process.

    Args:
        metadata: the metadata-only transport, or None when ``origin.record_config`` is off.
    """

    def __init__(self, metadata: MetadataTransport | None) -> None:
        self.metadata = metadata
        self._refused = False

    def read(
        self, namespace: str, pod: RawObject, state: ClusterState
    ) -> tuple[ConfigRef, ...] | None:
        """The consumed Secrets and ConfigMaps of ``pod`` with their metadata now; None when
        they cannot be read (no metadata transport, or an API error such as 403: logged once,
        and ``stale-config`` is then not judged for the snapshot)."""
        if self.metadata is None:
            return None
        watched = state.configs.get(namespace)
        metas: dict[tuple[str, str], ConfigMeta | None] = {}
        for kind, name in consumed(pod):
            if watched is not None:
                metas[(kind, name)] = watched.get((kind, name))
                continue
            plural = "secrets" if kind == "Secret" else "configmaps"
            try:
                metas[(kind, name)] = config_meta(
                    self.metadata.get(f"/api/v1/namespaces/{namespace}/{plural}/{name}")
                )
            except NotServed:
                metas[(kind, name)] = None
            except TransportError as exc:
                if not self._refused:
                    log.warning(
                        "the configuration origin pods read is not recorded (%s): "
                        "stale-config is not judged",
                        describe(exc),
                    )
                    self._refused = True
                return None
        return refs_of(pod, metas)
