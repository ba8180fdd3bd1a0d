"""snapready's SnapshotRecords as a test reads them on the real API server (issue 31)."""

from __future__ import annotations

from typing import Any, cast

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.envtest.plugin import wait_for
from webhook.snapshots.records import RecordView, record_view

GROUP, VERSION, PLURAL = "snapready.io", "v1alpha1", "snapshotrecords"


def get_record(api: client.ApiClient, namespace: str, name: str) -> dict[str, Any] | None:
    """The SnapshotRecord ``namespace/name`` as the API server has it, or None (404)."""
    try:
        return cast(
            "dict[str, Any]",
            client.CustomObjectsApi(api).get_namespaced_custom_object(
                GROUP, VERSION, namespace, PLURAL, name
            ),
        )
    except ApiException as error:
        if error.status == 404:
            return None
        raise


def wait_record(
    api: client.ApiClient, namespace: str, name: str, timeout: float = 15.0
) -> dict[str, Any]:
    """Wait until snapready wrote the SnapshotRecord of PodSnapshot ``namespace/name``."""
    found = wait_for(
        f"SnapshotRecord {namespace}/{name}", lambda: get_record(api, namespace, name), timeout
    )
    assert found is not None
    return found


def view_of(obj: dict[str, Any]) -> RecordView:
    """The parsed record (fails the test when it is not a record snapready can read)."""
    view = record_view(obj)
    assert view is not None, f"unreadable SnapshotRecord: {obj}"
    return view


def records_in(api: client.ApiClient, namespace: str) -> list[dict[str, Any]]:
    """Every SnapshotRecord of ``namespace``."""
    listed = client.CustomObjectsApi(api).list_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL
    )
    return list(cast("dict[str, Any]", listed)["items"])
