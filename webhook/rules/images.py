"""Image rule: ``image-digest`` (warn).

A snapshot holds the memory and root filesystem of the image bits that ran at checkpoint time,
and the image reference is part of the distilled spec GKE matches on (docs/gke-facts.md#section-3).
A tag (``vllm/vllm-openai:v0.6.3``, or none: ``latest``) may later resolve to other bits: new pods
then pull new code but restore old memory, or the operator re-tags and restores stop matching.
A digest reference (``repo@sha256:<64 hex>``) pins the bits. Holds for ``rootfs-only`` too.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from webhook.base.types import Finding
from webhook.pod.context import PodContext

# OCI image-spec descriptor digests: algorithm ":" encoded (sha256 is the registered default).
_DIGEST = re.compile(r"@[a-z0-9]+(?:[+._-][a-z0-9]+)*:[a-zA-Z0-9=_-]{32,}$")


def is_digest_pinned(image: str) -> bool:
    """True for ``name[:tag]@sha256:<hex>`` (OCI digest syntax); False for tag-only images."""
    return _DIGEST.search(image) is not None


class ImageDigest:
    """``image-digest``: every container and init container image should be pinned by digest."""

    rule_ids: tuple[str, ...] = ("image-digest",)

    def __call__(self, pod: PodContext) -> Iterable[Finding]:
        """One warning per image without a digest, at ``spec.<kind>[i].image``."""
        found: list[Finding] = []
        for kind in ("initContainers", "containers"):
            for index, container in pod.indexed(kind):
                image = container.get("image")
                if isinstance(image, str) and image and not is_digest_pinned(image):
                    text = (
                        "image is not pinned by digest: a retag changes the bits under the "
                        "snapshot; use name@sha256:<digest>"
                    )
                    path = pod.spec_field(kind, index, "image")
                    found.append(Finding(path, "image-digest", text, "warn"))
        return found
