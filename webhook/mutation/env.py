"""Env injection: ``SNAPREADY_*`` variables in every container and init container.

They tell the helpers (and any app) where gVisor exposes the restoring pod's environment and the
checkpoint trigger (docs/gke-facts.md#section-7) and where the helpers are mounted. Env is not part
of the fingerprint (docs/gke-facts.md#section-3), so adding it never changes which snapshots match.
A name the user already set in ``env`` wins and is left alone (``envFrom`` is overridden by ``env``,
as Kubernetes always does). The injected ``snapready-helpers`` sidecar gets none: it only
copies files and waits.
"""

from __future__ import annotations

from webhook.base.keys import HELPERS_NAME
from webhook.mutation.helpers import MOUNT_PATH
from webhook.mutation.patch import Draft
from webhook.pod.context import PodContext, indexed_dicts, list_of_dicts

INJECTED_ENV: tuple[tuple[str, str], ...] = (
    ("SNAPREADY_SPEC_ENVIRON", "/proc/gvisor/spec_environ"),
    ("SNAPREADY_CHECKPOINT", "/proc/gvisor/checkpoint"),
    ("SNAPREADY_HELPERS", MOUNT_PATH),
)
"""Names and values, in the order they are appended."""


def inject_env(draft: Draft, ctx: PodContext) -> bool:
    """Append the ``INJECTED_ENV`` entries each container lacks; True if any was added."""
    del ctx  # the values are fixed: same bytes in the checkpoint pod and every restore
    changed = False
    for list_name in ("containers", "initContainers"):
        for index, container in indexed_dicts(draft.get("spec", list_name)):
            if list_name == "initContainers" and container.get("name") == HELPERS_NAME:
                continue
            present = {str(entry.get("name")) for entry in list_of_dicts(container.get("env"))}
            missing = [
                {"name": name, "value": value}
                for name, value in INJECTED_ENV
                if name not in present
            ]
            changed |= draft.extend(("spec", list_name, index, "env"), missing)
    return changed
