"""pytest plugin: one real Kubernetes control plane per test run (see ``controlplane.py``).

Fixtures: ``control_plane`` (session), ``kube_admin`` (an admin ``ApiClient``), ``kube_gke`` (an
``ApiClient`` as GKE's snapshot controller, the only test identity GKE's guard lets write
PodSnapshots), ``namespace`` (a fresh namespace per test) and ``podsnapshot_crds`` (GKE's Pod
snapshot CRDs, installed once; returns once GKE's guard refuses admin's PodSnapshot writes).

At the end of the run the owner reads the API server's audit log: any create, update or patch of
a PodSnapshot by one of snapready's test ServiceAccounts (:func:`snapready_writes`) fails the run,
refused or not. On GKE every such write is refused, so snapready must not depend on one.

The control plane starts only when a test asks for it, once per run, also under pytest-xdist:

* The pytest process that owns the run (the xdist controller, or the only process without xdist)
  names a shared folder, ``$TMPDIR/snapready-envtest-<pid>-<start time>``; the controller hands
  it and its pid to every worker through ``workerinput``.
* The first process that needs the control plane takes a file lock there, builds or reuses the
  binaries (``scripts/envtest.sh``), starts the control plane and writes its descriptor
  (``controlplane.json``); the others wait on the lock and reuse the descriptor.
* The owner stops it by pid at ``pytest_unconfigure`` (after every xdist worker is gone) and
  removes the folder. If the owner dies without that, the control plane's watchdog does it.

A control plane that cannot be built or started fails the tests that need it (with the log tails);
it is never a skip. Set ``KUBEBUILDER_ASSETS`` to use other binaries, and
``SNAPREADY_ENVTEST_KEEP=1`` to keep the folder (logs, etcd data, PKI) after the run.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import os
import re
import secrets
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.envtest.controlplane import (
    GKE_USERS,
    ROOT,
    ControlPlane,
    ControlPlaneError,
    find_assets,
    start_time,
    start_with_retries,
)

CRDS = ROOT / "tests" / "data" / "crds" / "podsnapshot.gke.io.yaml"
SNAPREADY_CRDS = tuple(sorted((ROOT / "chart" / "crds").glob("*.yaml")))
"""snapready's own CRDs (the SnapshotRecord), shipped in the chart's ``crds/``."""
FIELD_MANAGER = "snapready-envtest"
GUARD_MESSAGE = (
    "PodSnapshot objects can only be modified by GKE's pod snapshot controller and agent"
)
"""The message of GKE's guard (``tests/data/gke/pod-snapshot-guard.yaml``) in a refusal."""
SNAPREADY_ACCOUNT_PREFIX = "snapready"
"""snapready's test ServiceAccounts are named so (``system:serviceaccount:<ns>:snapready...``):
the audit check at the end of the run looks for their PodSnapshot writes."""
GUARDED_VERBS = frozenset({"create", "update", "patch"})
_DIR_KEY = "snapready_envtest_dir"
_OWNER_KEY = "snapready_envtest_owner"
T = TypeVar("T")


# --------------------------------------------------------------------------------------------
# Where the shared control plane lives, and who owns it


def _owner_dir() -> Path:
    """The shared folder of a run owned by this process (named, not created)."""
    pid = os.getpid()
    return Path(tempfile.gettempdir()) / f"snapready-envtest-{pid}-{start_time(pid)}"


def _is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def _shared(config: pytest.Config) -> tuple[Path, int]:
    """(shared folder, owner pid) for this process."""
    workerinput: dict[str, Any] | None = getattr(config, "workerinput", None)
    if workerinput is not None and _DIR_KEY in workerinput:
        return Path(workerinput[_DIR_KEY]), int(workerinput[_OWNER_KEY])
    return _owner_dir(), os.getpid()


def _become_subreaper() -> None:
    """Adopt orphaned descendants (Linux ``PR_SET_CHILD_SUBREAPER``).

    The control plane is started by an xdist worker; when that worker exits, its processes are
    re-parented to this controller instead of to PID 1 (which, in some containers, never reaps),
    so that the teardown can reap them and no ``<defunct>`` entries are left behind.
    """
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER = 36


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """xdist controller: tell each worker where the shared control plane lives and who owns it."""
    _become_subreaper()
    node.workerinput[_DIR_KEY] = str(_owner_dir())
    node.workerinput[_OWNER_KEY] = os.getpid()


def snapready_writes(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The audit events of a create, update or patch of a PodSnapshot (or its status) by one of
    snapready's test ServiceAccounts (:data:`SNAPREADY_ACCOUNT_PREFIX`), refused or not."""
    found: list[dict[str, Any]] = []
    for event in events:
        user = str((event.get("user") or {}).get("username", ""))
        target = event.get("objectRef") or {}
        parts = user.split(":")
        snapready = (
            len(parts) == 4
            and parts[:2] == ["system", "serviceaccount"]
            and parts[3].startswith(SNAPREADY_ACCOUNT_PREFIX)
        )
        if (
            snapready
            and user not in GKE_USERS
            and event.get("verb") in GUARDED_VERBS
            and target.get("apiGroup") == "podsnapshot.gke.io"
            and target.get("resource") == "podsnapshots"
        ):
            found.append(event)
    return found


def describe_write(event: dict[str, Any]) -> str:
    """One line of an audit event: user, verb, object, answer."""
    target = event.get("objectRef") or {}
    name = f"{target.get('namespace', '')}/{target.get('name', '')}"
    sub = f"/{target['subresource']}" if target.get("subresource") else ""
    code = (event.get("responseStatus") or {}).get("code", "?")
    return (
        f"{event.get('requestReceivedTimestamp', '')} {event.get('user', {}).get('username')} "
        f"{event.get('verb')} podsnapshots{sub} {name} -> {code}"
    )


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """The owner fails the run when snapready's test ServiceAccounts wrote PodSnapshots (the
    audit log of the run's control plane; before ``pytest_unconfigure`` stops it)."""
    if _is_worker(session.config):
        return
    plane = ControlPlane.load(_owner_dir() / "controlplane.json")
    if plane is None:
        return
    offending = snapready_writes(plane.audit_events())
    if not offending:
        return
    lines = "\n".join(describe_write(event) for event in offending)
    sys.stderr.write(
        "\nsnapready envtest: FAILED: snapready wrote PodSnapshots (GKE's guard refuses every "
        f"such write on a real cluster), {len(offending)} time(s), audit log {plane.audit_log}:\n"
        f"{lines}\n"
    )
    session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_unconfigure(config: pytest.Config) -> None:
    """The owner stops the control plane (if one was started) by pid and removes its folder."""
    if _is_worker(config):
        return
    shared = _owner_dir()
    if not shared.exists():
        return
    plane = ControlPlane.load(shared / "controlplane.json")
    if plane is not None:
        plane.stop(remove=False)
    if os.environ.get("SNAPREADY_ENVTEST_KEEP"):
        sys.stderr.write(f"snapready envtest: kept {shared}\n")
        return
    shutil.rmtree(shared, ignore_errors=True)


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _notify(message: str) -> None:
    stream = sys.__stderr__
    if stream is not None:
        stream.write(f"\nsnapready envtest: {message}\n")
        stream.flush()


def shared_control_plane(config: pytest.Config) -> ControlPlane:
    """The run's control plane: started here under the lock, or reused from the descriptor.

    Fails (``pytest.fail``, never a skip) when it cannot be built or started, also in every other
    process that asks for it afterwards (``failed.txt`` keeps the first error).
    """
    shared, owner = _shared(config)
    shared.mkdir(mode=0o700, parents=True, exist_ok=True)
    descriptor = shared / "controlplane.json"
    failed = shared / "failed.txt"
    with _locked(shared / "lock"):
        if failed.exists():
            pytest.fail(
                f"the envtest control plane failed to start:\n{failed.read_text()}", pytrace=False
            )
        plane = ControlPlane.load(descriptor)
        if plane is not None and plane.status == "ready":
            if not plane.alive():
                pytest.fail(f"the envtest control plane died:\n{plane.logs()}", pytrace=False)
            return plane
        if plane is not None:  # "starting"/"failed" left by a process that died while starting
            plane.stop(remove=True)
        try:
            assets = find_assets(shared / "build.log", notify=_notify)
            return start_with_retries(
                assets, shared / "run", descriptor, owner_pid=owner, orphan_dir=shared
            )
        except ControlPlaneError as error:
            message = f"{error}\n(SNAPREADY_ENVTEST_KEEP=1 keeps {shared} after the run)"
            failed.write_text(message)
    pytest.fail(f"the envtest control plane failed to start:\n{message}", pytrace=False)


# --------------------------------------------------------------------------------------------
# Helpers


def unique_name(hint: str, prefix: str = "t") -> str:
    """A DNS-1123 label from ``hint`` (a test name) with a random suffix, at most 63 characters."""
    slug = re.sub(r"[^a-z0-9]+", "-", hint.lower()).strip("-")[:40].strip("-")
    return f"{prefix}-{slug}-{secrets.token_hex(3)}" if slug else f"{prefix}-{secrets.token_hex(3)}"


def wait_for(what: str, check: Callable[[], T], timeout: float = 30.0, interval: float = 0.1) -> T:
    """Call ``check()`` until it returns something truthy; return that. Fails after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {what}", pytrace=False)
        time.sleep(interval)


def wait_for_service_account(
    api_client: client.ApiClient, namespace: str, name: str = "default", timeout: float = 30.0
) -> None:
    """Wait until a ServiceAccount exists (the controller-manager creates ``default``)."""
    core = client.CoreV1Api(api_client)

    def exists() -> bool:
        try:
            core.read_namespaced_service_account(name, namespace)
        except ApiException as error:
            if error.status == 404:
                return False
            raise
        return True

    wait_for(f"ServiceAccount {namespace}/{name}", exists, timeout)


def service_account_token(
    api_client: client.ApiClient, namespace: str, name: str, *, expiration_seconds: int = 3600
) -> str:
    """Create ServiceAccount ``namespace/name`` if missing; a token for it (TokenRequest API).

    With :meth:`ControlPlane.token_kubeconfig`, for running a client as that ServiceAccount.
    """
    core = client.CoreV1Api(api_client)
    account = client.V1ServiceAccount.model_validate({"metadata": {"name": name}})
    try:
        core.create_namespaced_service_account(namespace, account)
    except ApiException as error:
        if error.status != 409:  # already exists
            raise
    request = client.AuthenticationV1TokenRequest.model_validate(
        {"spec": {"expirationSeconds": expiration_seconds}}
    )
    status = core.create_namespaced_service_account_token(name, namespace, request).status
    assert status is not None, "TokenRequest without status"
    assert status.token, "TokenRequest without token"
    return status.token


def install_crds(
    api_client: client.ApiClient, path: Path = CRDS, timeout: float = 30.0
) -> list[str]:
    """Server-side apply every CRD in ``path`` (idempotent) and wait until all are Established."""
    api = client.ApiextensionsV1Api(api_client)
    names: list[str] = []
    for document in yaml.safe_load_all(path.read_text()):
        if not document:
            continue
        name = document["metadata"]["name"]
        api.patch_custom_resource_definition(
            name,
            document,
            field_manager=FIELD_MANAGER,
            force=True,
            _content_type="application/apply-patch+yaml",
        )
        names.append(name)

    def all_established() -> bool:
        for name in names:
            status = api.read_custom_resource_definition(name).status
            conditions = (status.conditions if status else None) or []
            if not any(c.type == "Established" and c.status == "True" for c in conditions):
                return False
        return True

    wait_for(f"CRDs {', '.join(names)} Established", all_established, timeout)
    return names


# --------------------------------------------------------------------------------------------
# Fixtures


@pytest.fixture(scope="session")
def control_plane(request: pytest.FixtureRequest) -> ControlPlane:
    """The run's real control plane (etcd + kube-apiserver + kube-controller-manager)."""
    return shared_control_plane(request.config)


@pytest.fixture
def kube_admin(control_plane: ControlPlane) -> Iterator[client.ApiClient]:
    """A ``kubernetes.client.ApiClient`` authenticated as admin (``system:masters``)."""
    api_client = control_plane.api_client()
    yield api_client
    api_client.close()  # type: ignore[no-untyped-call]


@pytest.fixture
def kube_gke(control_plane: ControlPlane) -> Iterator[client.ApiClient]:
    """A ``kubernetes.client.ApiClient`` as GKE's snapshot controller: every PodSnapshot a test
    creates or edits (as GKE would) goes through it; GKE's guard refuses everyone else."""
    api_client = control_plane.gke_client()
    yield api_client
    api_client.close()  # type: ignore[no-untyped-call]


@pytest.fixture
def namespace(kube_admin: client.ApiClient, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh namespace (its ``default`` ServiceAccount exists); deleted after, without waiting."""
    core = client.CoreV1Api(kube_admin)
    name = unique_name(request.node.name)
    labels = {"snapready.test/envtest": "1"}
    core.create_namespace(
        client.V1Namespace.model_validate({"metadata": {"name": name, "labels": labels}})
    )
    wait_for_service_account(kube_admin, name)
    yield name
    with contextlib.suppress(ApiException):
        core.delete_namespace(name, propagation_policy="Background")


def guard_refusal(api_client: client.ApiClient, namespace: str = "default") -> str:
    """The message with which GKE's guard refuses a dry-run PodSnapshot create by
    ``api_client``'s identity, or "" when it was not refused by the guard."""
    body = {
        "apiVersion": "podsnapshot.gke.io/v1",
        "kind": "PodSnapshot",
        "metadata": {"generateName": "guard-probe-"},
        "spec": {"policyName": "guard-probe"},
    }
    try:
        client.CustomObjectsApi(api_client).create_namespaced_custom_object(
            "podsnapshot.gke.io", "v1", namespace, "podsnapshots", body, dry_run="All"
        )
    except ApiException as error:
        if error.status in {403, 422} and GUARD_MESSAGE in str(error.body):
            return str(error.body)
        if error.status == 404:  # the CRD's REST handler is not there yet
            return ""
        raise
    return ""


def wait_for_guard(api_client: client.ApiClient, timeout: float = 30.0) -> str:
    """Wait until GKE's guard refuses a dry-run PodSnapshot create by ``api_client`` (admin: the
    policy binding is in effect; it takes effect asynchronously); the refusal."""
    return wait_for(
        "GKE's guard on PodSnapshots in effect", lambda: guard_refusal(api_client), timeout
    )


@pytest.fixture(scope="session")
def podsnapshot_crds(control_plane: ControlPlane) -> list[str]:
    """GKE's Pod snapshot CRDs (``tests/data/crds/``), installed and Established, with GKE's guard
    in effect on PodSnapshots (admin's dry-run create is refused), and snapready's own CRDs
    (``chart/crds/``, as ``helm install`` applies them); the names of GKE's."""
    api_client = control_plane.api_client()
    try:
        names = install_crds(api_client)
        for path in SNAPREADY_CRDS:
            install_crds(api_client, path)
        wait_for_guard(api_client)
        return names
    finally:
        api_client.close()  # type: ignore[no-untyped-call]


__all__ = [
    "CRDS",
    "SNAPREADY_CRDS",
    "ControlPlane",
    "control_plane",
    "guard_refusal",
    "install_crds",
    "kube_admin",
    "kube_gke",
    "namespace",
    "podsnapshot_crds",
    "service_account_token",
    "shared_control_plane",
    "snapready_writes",
    "unique_name",
    "wait_for",
    "wait_for_guard",
    "wait_for_service_account",
]
