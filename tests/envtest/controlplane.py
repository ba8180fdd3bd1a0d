"""A real Kubernetes control plane for tests: etcd, kube-apiserver and kube-controller-manager.

Like controller-runtime's envtest, but with the controller-manager too (Deployments get ReplicaSets
and Pods, namespaces get their ``default`` ServiceAccount and ``kube-root-ca.crt``), and with
``--authorization-mode=Node,RBAC`` so that RBAC is really enforced. There are no nodes: Pods stay
Pending.

The binaries come from ``scripts/envtest.sh`` (``make envtest``), which builds them once from the Go
module proxy into a versioned cache folder, or from ``$KUBEBUILDER_ASSETS``.

Everything a started control plane needs to be found and stopped again (by any process) is kept in a
JSON *descriptor*: its URL and credential files, and the pid + start time of every process.
Processes are started in their own session (process group) and stopped by pid, never by name. A
small watchdog process (``python -m tests.envtest.controlplane watchdog ...``) stops them when the
owning pytest process disappears without tearing down (SIGKILL, crash).
"""

from __future__ import annotations

import contextlib
import datetime
import ipaddress
import json
import os
import shutil
import signal
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from tests.support.ports import free_port

if TYPE_CHECKING:  # imported where used: the watchdog process does not need it
    import kubernetes.client

ROOT = Path(__file__).resolve().parents[2]
ENVTEST_SCRIPT = ROOT / "scripts" / "envtest.sh"
BINARIES = ("etcd", "kube-apiserver", "kube-controller-manager")
SERVICE_CIDR = "10.0.0.0/24"
SERVICE_IP = "10.0.0.1"  # first address of SERVICE_CIDR: the ``kubernetes`` Service
ISSUER = "https://kubernetes.default.svc.cluster.local"
GUARD = ROOT / "tests" / "data" / "gke" / "pod-snapshot-guard.yaml"
"""GKE's ValidatingAdmissionPolicy (+ binding) on PodSnapshots, installed by :func:`start`."""
GKE_CONTROLLER = "system:pod-snapshot-controller"
"""GKE's snapshot controller's username: with its node agent, the only writer of PodSnapshots."""
GKE_AGENT = "system:serviceaccount:gke-managed-pod-snapshots:pod-snapshot-agent"
"""GKE's node agent (DaemonSet ``pod-snapshot-agent``): the guard's other allowed writer."""
GKE_USERS = frozenset({GKE_CONTROLLER, GKE_AGENT})
GKE_ROLE = "snapready-envtest:pod-snapshot-controller"
"""ClusterRole (and binding) of :data:`GKE_CONTROLLER`: everything in ``podsnapshot.gke.io``."""
AUDITED_WRITES = ("create", "update", "patch", "delete", "deletecollection")
AUDIT_POLICY: dict[str, Any] = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived", "ResponseStarted"],
    "rules": [
        {
            "level": "Metadata",
            "verbs": list(AUDITED_WRITES),
            "resources": [
                {"group": "podsnapshot.gke.io", "resources": ["podsnapshots", "podsnapshots/*"]},
                {"group": "snapready.io", "resources": ["snapshotrecords", "snapshotrecords/*"]},
            ],
        },
        {"level": "None"},
    ],
}
"""What the API server's audit log keeps: writes to PodSnapshots and snapready's own records
(Metadata level: who, which verb, which object, the answer's code; never a body)."""
PATH_FIELDS = (
    "ca_file",
    "admin_kubeconfig",
    "client_cert",
    "client_key",
    "gke_kubeconfig",
    "gke_cert",
    "gke_key",
    "audit_log",
    "assets",
    "directory",
    "descriptor",
)
START_TIMEOUT = 120.0  # seconds; ~10-20 s warm on 2 cores
STOP_TIMEOUT = 10.0


class ControlPlaneError(RuntimeError):
    """The control plane could not be built or started (the message carries the log tails)."""


# --------------------------------------------------------------------------------------------
# Binaries


def find_assets(log_file: Path, notify: Callable[[str], None] | None = None) -> Path:
    """The folder holding etcd, kube-apiserver and kube-controller-manager.

    ``$KUBEBUILDER_ASSETS`` if set, else what ``scripts/envtest.sh`` prints on its last line (it
    reuses its cache or builds the binaries, which takes many minutes the first time). The script's
    progress goes to ``log_file``; ``notify`` is told once if the script is still running after a
    few seconds (a cold build).

    Raises:
        ControlPlaneError: the binaries are missing, or the script failed.
    """
    env_assets = os.environ.get("KUBEBUILDER_ASSETS")
    if env_assets:
        assets = Path(env_assets)
        missing = [name for name in BINARIES if not (assets / name).is_file()]
        if missing:
            raise ControlPlaneError(f"KUBEBUILDER_ASSETS={assets} lacks {', '.join(missing)}")
        return assets
    log_file.parent.mkdir(parents=True, exist_ok=True)
    with log_file.open("wb") as log:
        try:
            process = subprocess.Popen(
                ["bash", str(ENVTEST_SCRIPT)], stdout=subprocess.PIPE, stderr=log, cwd=ROOT
            )
        except OSError as error:
            raise ControlPlaneError(f"cannot run {ENVTEST_SCRIPT}: {error}") from error
        deadline = time.monotonic() + 3
        while process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        if process.poll() is None and notify is not None:
            notify(f"building the envtest binaries (once; many minutes cold), log: {log_file}")
        stdout, _ = process.communicate()
    lines = stdout.decode(errors="replace").strip().splitlines()
    last = lines[-1] if lines else ""
    if process.returncode != 0 or not last.startswith("KUBEBUILDER_ASSETS="):
        raise ControlPlaneError(
            f"{ENVTEST_SCRIPT.relative_to(ROOT)} failed (exit {process.returncode}), "
            f"last output {last!r}; log {log_file}:\n{tail(log_file, 40)}"
        )
    return Path(last.removeprefix("KUBEBUILDER_ASSETS="))


# --------------------------------------------------------------------------------------------
# PKI


def _name(common_name: str, organization: str | None = None) -> x509.Name:
    attributes = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    if organization:
        attributes.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
    return x509.Name(attributes)


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey) -> None:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    path.chmod(0o600)


@dataclass(frozen=True)
class Pki:
    """File paths of the generated PKI."""

    ca_cert: Path
    ca_key: Path
    serving_cert: Path
    serving_key: Path
    sa_key: Path
    sa_pub: Path
    admin_cert: Path
    admin_key: Path
    gke_cert: Path
    gke_key: Path
    kcm_cert: Path
    kcm_key: Path


def generate_pki(directory: Path) -> Pki:
    """A CA, the apiserver serving cert, a service-account key pair and three client certs:
    admin (``system:masters``), GKE's snapshot controller (:data:`GKE_CONTROLLER`, no group: its
    rights come from RBAC) and the controller-manager."""
    directory.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC)
    not_before, not_after = now - datetime.timedelta(hours=1), now + datetime.timedelta(days=7)

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name("snapready-envtest-ca")
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), False)
        .sign(ca_key, hashes.SHA256())
    )

    def leaf(
        stem: str,
        subject: x509.Name,
        usage: x509.ObjectIdentifier,
        sans: list[x509.GeneralName] | None = None,
    ) -> tuple[Path, Path]:
        key = ec.generate_private_key(ec.SECP256R1())
        builder = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(ca_name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(not_before)
            .not_valid_after(not_after)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), False
            )
        )
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        cert = builder.sign(ca_key, hashes.SHA256())
        cert_path, key_path = directory / f"{stem}.crt", directory / f"{stem}.key"
        cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        _write_key(key_path, key)
        return cert_path, key_path

    (directory / "ca.crt").write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    _write_key(directory / "ca.key", ca_key)
    dns = [
        "localhost",
        "kubernetes",
        "kubernetes.default",
        "kubernetes.default.svc",
        "kubernetes.default.svc.cluster.local",
    ]
    serving_sans: list[x509.GeneralName] = [x509.DNSName(name) for name in dns]
    serving_sans += [
        x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
        x509.IPAddress(ipaddress.ip_address(SERVICE_IP)),
    ]
    serving = leaf(
        "apiserver", _name("kube-apiserver"), ExtendedKeyUsageOID.SERVER_AUTH, serving_sans
    )
    admin = leaf("admin", _name("admin", "system:masters"), ExtendedKeyUsageOID.CLIENT_AUTH)
    gke = leaf(
        "gke-pod-snapshot-controller", _name(GKE_CONTROLLER), ExtendedKeyUsageOID.CLIENT_AUTH
    )
    kcm = leaf(
        "controller-manager",
        _name("system:kube-controller-manager"),
        ExtendedKeyUsageOID.CLIENT_AUTH,
    )

    sa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    _write_key(directory / "sa.key", sa_key)
    (directory / "sa.pub").write_bytes(
        sa_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return Pki(
        ca_cert=directory / "ca.crt",
        ca_key=directory / "ca.key",
        serving_cert=serving[0],
        serving_key=serving[1],
        sa_key=directory / "sa.key",
        sa_pub=directory / "sa.pub",
        admin_cert=admin[0],
        admin_key=admin[1],
        gke_cert=gke[0],
        gke_key=gke[1],
        kcm_cert=kcm[0],
        kcm_key=kcm[1],
    )


def write_kubeconfig(
    path: Path,
    server: str,
    ca_file: Path,
    user: dict[str, str],
    *,
    namespace: str = "default",
    user_name: str = "user",
) -> Path:
    """A one-context kubeconfig for ``server``; ``user`` is the kubeconfig ``users[].user`` map."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "envtest",
                "cluster": {"server": server, "certificate-authority": str(ca_file)},
            }
        ],
        "users": [{"name": user_name, "user": user}],
        "contexts": [
            {
                "name": "envtest",
                "context": {"cluster": "envtest", "user": user_name, "namespace": namespace},
            }
        ],
        "current-context": "envtest",
    }
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    path.chmod(0o600)
    return path


# --------------------------------------------------------------------------------------------
# Processes


def tail(path: Path, lines: int = 30) -> str:
    """The last ``lines`` lines of a log file (or a note that it does not exist)."""
    try:
        text = path.read_text(errors="replace")
    except OSError as error:
        return f"<{path}: {error.strerror}>"
    return "\n".join(text.splitlines()[-lines:])


def _proc_stat(pid: int) -> tuple[str, int] | None:
    """(state, start time in clock ticks) of a live pid from /proc, or None if there is none."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    return fields[0], int(fields[19])


def start_time(pid: int) -> int:
    """When ``pid`` started (0 without /proc): with the pid, it identifies a process."""
    stat = _proc_stat(pid)
    return stat[1] if stat else 0


@dataclass
class ProcessRecord:
    """A started process, identified by pid and start time (so a reused pid is never signalled)."""

    name: str
    pid: int
    start_time: int
    log: str

    def alive(self) -> bool:
        """Running (not exited, not a zombie) and still the same process."""
        stat = _proc_stat(self.pid)
        if stat is None:
            if not Path("/proc").is_dir():  # no /proc: fall back to a signal-0 probe
                try:
                    os.kill(self.pid, 0)
                except OSError:
                    return False
                return True
            return False
        state, started = stat
        return state not in {"Z", "X"} and (self.start_time in {0, started})

    def signal(self, signum: int) -> None:
        """Signal the process group the process leads (its own session), else just the pid."""
        if not self.alive():
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            if os.getpgid(self.pid) == self.pid:
                os.killpg(self.pid, signum)
            else:
                os.kill(self.pid, signum)


def stop_processes(records: Iterable[ProcessRecord], timeout: float = STOP_TIMEOUT) -> None:
    """SIGTERM every process (group), wait up to ``timeout``, SIGKILL the rest, reap children."""
    pending = list(records)
    for record in pending:
        record.signal(signal.SIGTERM)
    pending = _wait_finished(pending, timeout)
    for record in pending:
        record.signal(signal.SIGKILL)
    _wait_finished(pending, 5.0)


def _finished(record: ProcessRecord) -> bool:
    """Exited, and reaped when it is our child (a Go process's leader can show as a zombie while
    its other threads still exit: only ``waitpid`` tells when it is really gone)."""
    try:
        pid, _ = os.waitpid(record.pid, os.WNOHANG)
    except ChildProcessError:  # not our child (any more): its parent or init reaps it
        return not record.alive()
    return pid == record.pid


def _wait_finished(records: list[ProcessRecord], timeout: float) -> list[ProcessRecord]:
    """Wait up to ``timeout`` for the processes to finish; those that did not."""
    deadline = time.monotonic() + timeout
    pending = [record for record in records if not _finished(record)]
    while pending and time.monotonic() < deadline:
        time.sleep(0.05)
        pending = [record for record in pending if not _finished(record)]
    return pending


# --------------------------------------------------------------------------------------------
# The control plane


@dataclass
class ControlPlane:
    """A running control plane as tests see it (also its JSON descriptor on disk).

    ``url`` is ``https://127.0.0.1:PORT``; ``admin_kubeconfig`` and ``client_cert``/``client_key``
    authenticate as ``admin`` in ``system:masters``; ``gke_kubeconfig`` and ``gke_cert``/``gke_key``
    as GKE's snapshot controller (:data:`GKE_CONTROLLER`), the only identity besides GKE's agent
    that GKE's guard (:data:`GUARD`) lets write PodSnapshots. ``audit_log`` is the API server's
    audit log of writes to PodSnapshots (:data:`AUDIT_POLICY`, :meth:`audit_events`).
    """

    url: str
    ca_file: Path
    admin_kubeconfig: Path
    client_cert: Path
    client_key: Path
    gke_kubeconfig: Path
    gke_cert: Path
    gke_key: Path
    audit_log: Path
    assets: Path
    directory: Path
    descriptor: Path
    status: str = "starting"  # starting | ready | failed
    error: str = ""
    owner_pid: int = 0
    processes: list[ProcessRecord] = field(default_factory=list)
    startup_seconds: float = 0.0

    # -- helpers for tests ---------------------------------------------------------------------

    def api_client(self) -> kubernetes.client.ApiClient:
        """A ``kubernetes.client.ApiClient`` authenticated as admin (``system:masters``)."""
        return self._cert_client(self.client_cert, self.client_key)

    def gke_client(self) -> kubernetes.client.ApiClient:
        """A ``kubernetes.client.ApiClient`` authenticated as GKE's snapshot controller
        (:data:`GKE_CONTROLLER`): what GKE writes (PodSnapshots, their status) is written so."""
        return self._cert_client(self.gke_cert, self.gke_key)

    def _cert_client(self, cert: Path, key: Path) -> kubernetes.client.ApiClient:
        """An ``ApiClient`` presenting the client certificate ``cert``/``key``."""
        import kubernetes.client  # noqa: PLC0415

        configuration = kubernetes.client.Configuration()
        configuration.host = self.url
        configuration.ssl_ca_cert = str(self.ca_file)
        configuration.cert_file = str(cert)
        configuration.key_file = str(key)
        configuration.verify_ssl = True
        return kubernetes.client.ApiClient(configuration)

    def audit_events(self) -> list[dict[str, Any]]:
        """The API server's audit events so far (``audit.k8s.io/v1`` Event objects, in order):
        every write to PodSnapshots and SnapshotRecords (:data:`AUDIT_POLICY`). A line being
        written (the last, without its newline) is left out."""
        try:
            text = self.audit_log.read_text(errors="replace")
        except FileNotFoundError:
            return []
        events: list[dict[str, Any]] = []
        for line in text.splitlines(keepends=True):
            if not line.endswith("\n") or not line.strip():
                continue
            with contextlib.suppress(ValueError):
                events.append(json.loads(line))
        return events

    def token_kubeconfig(
        self, path: Path, token: str, *, namespace: str = "default", user: str = "token"
    ) -> Path:
        """Write a kubeconfig at ``path`` that authenticates with a bearer ``token``.

        For running snapready as a ServiceAccount (with a token from the TokenRequest API) bound to
        a ClusterRole, rather than as admin.
        """
        return write_kubeconfig(
            path, self.url, self.ca_file, {"token": token}, namespace=namespace, user_name=user
        )

    @staticmethod
    def client_from_kubeconfig(path: Path) -> kubernetes.client.ApiClient:
        """A ``kubernetes.client.ApiClient`` from a kubeconfig file (its current context)."""
        import kubernetes.client  # noqa: PLC0415
        import kubernetes.config  # noqa: PLC0415

        api_client: kubernetes.client.ApiClient = kubernetes.config.new_client_from_config(  # type: ignore[no-untyped-call]
            config_file=str(path)
        )
        return api_client

    def ssl_context(self) -> ssl.SSLContext:
        """A TLS client context trusting the control plane CA, presenting the admin cert."""
        context = ssl.create_default_context(cafile=str(self.ca_file))
        context.load_cert_chain(str(self.client_cert), str(self.client_key))
        return context

    def gke_ssl_context(self) -> ssl.SSLContext:
        """A TLS client context trusting the control plane CA, presenting GKE's controller's
        cert (:data:`GKE_CONTROLLER`): for raw clients writing PodSnapshots as GKE would."""
        context = ssl.create_default_context(cafile=str(self.ca_file))
        context.load_cert_chain(str(self.gke_cert), str(self.gke_key))
        return context

    def get(self, path: str, timeout: float = 5.0) -> tuple[int, str]:
        """GET ``path`` as admin: (status, body). HTTP errors are returned, not raised."""
        request = urllib.request.Request(self.url + path)
        try:
            with urllib.request.urlopen(request, context=self.ssl_context(), timeout=timeout) as r:
                return r.status, r.read().decode(errors="replace")
        except urllib.error.HTTPError as error:
            return error.code, error.read().decode(errors="replace")

    def logs(self, lines: int = 25) -> str:
        """The tail of every process log, for failure messages."""
        return "\n".join(
            f"----- {record.name} (pid {record.pid}): {record.log}\n{tail(Path(record.log), lines)}"
            for record in self.processes
        )

    def alive(self) -> bool:
        """Every control plane process is still running."""
        return bool(self.processes) and all(
            record.alive() for record in self.processes if record.name != "watchdog"
        )

    # -- descriptor ----------------------------------------------------------------------------

    def to_json(self) -> str:
        data = asdict(self)
        for key in PATH_FIELDS:
            data[key] = str(data[key])
        return json.dumps(data, indent=2)

    def save(self) -> None:
        """Write the descriptor atomically (readers never see half of it)."""
        temporary = self.descriptor.with_suffix(".tmp")
        temporary.write_text(self.to_json())
        temporary.replace(self.descriptor)

    @classmethod
    def load(cls, descriptor: Path) -> ControlPlane | None:
        """The control plane a descriptor file describes, or None when there is none."""
        try:
            data: dict[str, Any] = json.loads(descriptor.read_text())
        except (OSError, ValueError):
            return None
        processes = [ProcessRecord(**record) for record in data.pop("processes", [])]
        for key in PATH_FIELDS:
            data[key] = Path(data[key])
        return cls(**data, processes=processes)

    def record(self, name: str, pid: int, log: Path) -> None:
        """Add a started process to the descriptor (saved): ``stop`` and the watchdog stop it."""
        self.processes.append(ProcessRecord(name, pid, start_time(pid), str(log)))
        self.save()

    # -- lifecycle -----------------------------------------------------------------------------

    def stop(self, *, remove: bool = True) -> None:
        """Stop every recorded process by pid; remove the directory.

        The watchdog first, then one at a time in reverse start order: an apiserver that loses
        etcd under it takes ~10 s to give up, one stopped before etcd exits in ~1 s.
        """
        watchdogs = [record for record in self.processes if record.name == "watchdog"]
        others = [record for record in self.processes if record.name != "watchdog"]
        stop_processes(watchdogs, timeout=2)
        for record in reversed(others):
            stop_processes([record])
        if remove:
            shutil.rmtree(self.directory, ignore_errors=True)


def launch(
    argv: list[str], log: Path, *, env: dict[str, str], cwd: Path
) -> subprocess.Popen[bytes]:
    """Start ``argv`` in its own session (process group: stopped as a group, not by Ctrl-C) with
    stdin closed and its output appended to ``log``; the benchmarks start their servers so too."""
    with log.open("ab") as output:
        return subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            env=env,
            start_new_session=True,
        )


def _spawn(
    plane: ControlPlane, name: str, argv: list[str], cwd: Path | None = None
) -> subprocess.Popen[bytes]:
    log = plane.directory / "logs" / f"{name}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    env = {key: value for key, value in os.environ.items() if not key.startswith("KUBE")}
    try:
        process = launch(argv, log, env=env, cwd=cwd or plane.directory)
    except OSError as error:
        raise ControlPlaneError(f"cannot run {argv[0]}: {error}") from error
    plane.record(name, process.pid, log)  # before waiting: a crash here still leaves it known
    return process


def _wait_until(
    plane: ControlPlane,
    what: str,
    ready: Callable[[], bool],
    children: dict[str, subprocess.Popen[bytes]],
    deadline: float,
) -> None:
    while True:
        for name, child in children.items():
            if child.poll() is not None:
                raise ControlPlaneError(
                    f"{name} exited with {child.returncode} while waiting for {what}:\n"
                    f"{plane.logs()}"
                )
        try:
            if ready():
                return
        except (OSError, ValueError):
            pass
        if time.monotonic() > deadline:
            raise ControlPlaneError(f"timed out waiting for {what}:\n{plane.logs()}")
        time.sleep(0.1)


def _http_ok(url: str, context: ssl.SSLContext | None = None) -> bool:
    try:
        with urllib.request.urlopen(url, context=context, timeout=2) as response:
            status: int = response.status
            return status == 200
    except urllib.error.HTTPError:
        return False


def _request(
    plane: ControlPlane, method: str, path: str, body: dict[str, Any] | None = None
) -> tuple[int, dict[str, Any]]:
    """``method`` ``path`` as admin with a JSON ``body``: (status, parsed answer); HTTP errors are
    returned, not raised."""
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(
        plane.url + path, data=data, method=method, headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, context=plane.ssl_context(), timeout=10) as answer:
            return answer.status, json.loads(answer.read() or b"{}")
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"{}")


_ADMISSION = "/apis/admissionregistration.k8s.io/v1"
_COLLECTIONS = {
    "ValidatingAdmissionPolicy": f"{_ADMISSION}/validatingadmissionpolicies",
    "ValidatingAdmissionPolicyBinding": f"{_ADMISSION}/validatingadmissionpolicybindings",
    "ClusterRole": "/apis/rbac.authorization.k8s.io/v1/clusterroles",
    "ClusterRoleBinding": "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
}


def gke_objects() -> list[dict[str, Any]]:
    """What :func:`start` installs for GKE: the guard (:data:`GUARD`) and the RBAC of GKE's
    snapshot controller (:data:`GKE_ROLE`: every verb on ``podsnapshot.gke.io``)."""
    guard = [doc for doc in yaml.safe_load_all(GUARD.read_text()) if doc]
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": GKE_ROLE},
        "rules": [{"apiGroups": ["podsnapshot.gke.io"], "resources": ["*"], "verbs": ["*"]}],
    }
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": GKE_ROLE},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": GKE_ROLE,
        },
        "subjects": [
            {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": GKE_CONTROLLER}
        ],
    }
    return [*guard, role, binding]


def install_gke(plane: ControlPlane, deadline: float) -> None:
    """Create :func:`gke_objects` as admin; wait until RBAC lets GKE's controller write
    PodSnapshots (a SubjectAccessReview). The guard's binding takes effect a moment later, and
    only on a PodSnapshot CRD: ``wait_for_guard`` in ``tests/envtest/plugin.py`` waits for it.

    Raises:
        ControlPlaneError: an object was refused, or RBAC did not allow it before ``deadline``.
    """
    for obj in gke_objects():
        status, answer = _request(plane, "POST", _COLLECTIONS[obj["kind"]], obj)
        if status not in {201, 409}:
            raise ControlPlaneError(f"creating {obj['kind']} {obj['metadata']['name']}: {answer}")
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {
            "user": GKE_CONTROLLER,
            "resourceAttributes": {
                "group": "podsnapshot.gke.io",
                "resource": "podsnapshots",
                "verb": "patch",
                "namespace": "default",
            },
        },
    }

    def allowed() -> bool:
        status, answer = _request(
            plane, "POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", review
        )
        return status == 201 and bool(answer.get("status", {}).get("allowed"))

    while not allowed():
        if time.monotonic() > deadline:
            raise ControlPlaneError(f"RBAC never allowed {GKE_CONTROLLER}:\n{plane.logs()}")
        time.sleep(0.1)


def start(
    assets: Path,
    directory: Path,
    descriptor: Path,
    *,
    owner_pid: int | None = None,
    orphan_dir: Path | None = None,
    timeout: float = START_TIMEOUT,
    profiling: bool = False,
) -> ControlPlane:
    """Start etcd, kube-apiserver and kube-controller-manager in ``directory``; wait until usable.

    Usable means: etcd healthy, the apiserver's ``/readyz`` is ok, GKE's guard on PodSnapshots
    and its controller's RBAC are installed (:func:`install_gke`), and the controller-manager's
    serviceaccount controller created ``default/default``. The API server keeps an audit log of
    PodSnapshot writes (:meth:`ControlPlane.audit_events`). The ``descriptor`` file is kept current
    from the first spawned process on. A watchdog stops everything (and removes ``orphan_dir``,
    default ``directory``) when ``owner_pid`` (default: this process) exits without calling
    :meth:`ControlPlane.stop`. With ``profiling`` the API server serves Go's
    ``/debug/pprof/`` handlers (``--profiling``; RBAC still applies: the admin may read them),
    as ``make bench-cluster --profile`` does; off otherwise, the default of a hardened cluster.

    Raises:
        ControlPlaneError: a process exited or the control plane was not usable in ``timeout``
            seconds; everything started is stopped again (the logs stay in ``directory``).
    """
    directory.mkdir(parents=True, exist_ok=True)
    began = time.monotonic()
    deadline = began + timeout
    pki = generate_pki(directory / "pki")
    apiserver_port = free_port()
    url = f"https://127.0.0.1:{apiserver_port}"
    admin_kubeconfig = write_kubeconfig(
        directory / "admin.kubeconfig",
        url,
        pki.ca_cert,
        {"client-certificate": str(pki.admin_cert), "client-key": str(pki.admin_key)},
        user_name="admin",
    )
    gke_kubeconfig = write_kubeconfig(
        directory / "gke-pod-snapshot-controller.kubeconfig",
        url,
        pki.ca_cert,
        {"client-certificate": str(pki.gke_cert), "client-key": str(pki.gke_key)},
        user_name=GKE_CONTROLLER,
    )
    audit_policy = directory / "audit-policy.yaml"
    audit_policy.write_text(yaml.safe_dump(AUDIT_POLICY, sort_keys=False))
    kcm_kubeconfig = write_kubeconfig(
        directory / "controller-manager.kubeconfig",
        url,
        pki.ca_cert,
        {"client-certificate": str(pki.kcm_cert), "client-key": str(pki.kcm_key)},
        user_name="system:kube-controller-manager",
        namespace="kube-system",
    )
    plane = ControlPlane(
        url=url,
        ca_file=pki.ca_cert,
        admin_kubeconfig=admin_kubeconfig,
        client_cert=pki.admin_cert,
        client_key=pki.admin_key,
        gke_kubeconfig=gke_kubeconfig,
        gke_cert=pki.gke_cert,
        gke_key=pki.gke_key,
        audit_log=directory / "audit.log",
        assets=assets,
        directory=directory,
        descriptor=descriptor,
        owner_pid=owner_pid or os.getpid(),
    )
    plane.save()
    try:
        watchdog_process = _spawn(
            plane,
            "watchdog",
            [
                sys.executable,
                "-m",
                "tests.envtest.controlplane",
                "watchdog",
                str(plane.owner_pid),
                str(start_time(plane.owner_pid)),
                str(descriptor),
                str(orphan_dir or directory),
            ],
            cwd=ROOT,
        )
        client_port, peer_port = free_port(), free_port()
        etcd = _spawn(
            plane,
            "etcd",
            [
                str(assets / "etcd"),
                "--name=envtest",
                f"--data-dir={directory / 'etcd'}",
                f"--listen-client-urls=http://127.0.0.1:{client_port}",
                f"--advertise-client-urls=http://127.0.0.1:{client_port}",
                f"--listen-peer-urls=http://127.0.0.1:{peer_port}",
                f"--initial-advertise-peer-urls=http://127.0.0.1:{peer_port}",
                f"--initial-cluster=envtest=http://127.0.0.1:{peer_port}",
                "--unsafe-no-fsync",  # throwaway data: no fsync, much faster on slow disks
                # The API server's watch cache learns of writes to other resources (and so
                # sends BOOKMARKs carrying them) from etcd's progress notifications: every 2 s
                # rather than whenever the API server asks (16 s to over 60 s under a loaded
                # suite: test_watch_resumes_from_the_servers_bookmark timed out in CI).
                "--watch-progress-notify-interval=2s",
                "--log-level=warn",
            ],
        )
        _wait_until(
            plane,
            "etcd /health",
            lambda: _http_ok(f"http://127.0.0.1:{client_port}/health"),
            {"etcd": etcd},
            deadline,
        )

        apiserver = _spawn(
            plane,
            "kube-apiserver",
            [
                str(assets / "kube-apiserver"),
                f"--etcd-servers=http://127.0.0.1:{client_port}",
                f"--secure-port={apiserver_port}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                f"--cert-dir={directory / 'apiserver-certs'}",
                f"--tls-cert-file={pki.serving_cert}",
                f"--tls-private-key-file={pki.serving_key}",
                f"--client-ca-file={pki.ca_cert}",
                f"--service-account-key-file={pki.sa_pub}",
                f"--service-account-signing-key-file={pki.sa_key}",
                f"--service-account-issuer={ISSUER}",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                "--authorization-mode=Node,RBAC",
                "--allow-privileged=true",
                f"--profiling={str(profiling).lower()}",
                f"--audit-policy-file={audit_policy}",
                f"--audit-log-path={plane.audit_log}",
                "--audit-log-format=json",
                "--audit-log-mode=blocking",  # written before the response: no lag to wait out
            ],
        )
        context = plane.ssl_context()
        _wait_until(
            plane,
            "kube-apiserver /readyz",
            lambda: _http_ok(f"{url}/readyz", context),
            {"etcd": etcd, "kube-apiserver": apiserver},
            deadline,
        )
        install_gke(plane, deadline)

        controller_manager = _spawn(
            plane,
            "kube-controller-manager",
            [
                str(assets / "kube-controller-manager"),
                f"--kubeconfig={kcm_kubeconfig}",
                "--controllers=*",
                "--use-service-account-credentials=true",
                f"--service-account-private-key-file={pki.sa_key}",
                f"--root-ca-file={pki.ca_cert}",
                f"--cluster-signing-cert-file={pki.ca_cert}",
                f"--cluster-signing-key-file={pki.ca_key}",
                "--leader-elect=false",
                "--secure-port=0",
                "--profiling=false",
            ],
        )
        _wait_until(
            plane,
            "the default ServiceAccount (kube-controller-manager's serviceaccount controller)",
            lambda: _http_ok(f"{url}/api/v1/namespaces/default/serviceaccounts/default", context),
            {
                "watchdog": watchdog_process,
                "etcd": etcd,
                "kube-apiserver": apiserver,
                "kube-controller-manager": controller_manager,
            },
            deadline,
        )
    except BaseException as error:
        plane.stop(remove=False)
        plane.status = "failed"
        plane.error = str(error)
        plane.save()
        raise
    plane.status = "ready"
    plane.startup_seconds = round(time.monotonic() - began, 1)
    plane.save()
    return plane


def start_with_retries(
    assets: Path,
    directory: Path,
    descriptor: Path,
    *,
    owner_pid: int | None = None,
    orphan_dir: Path | None = None,
    attempts: int = 3,
    profiling: bool = False,
) -> ControlPlane:
    """:func:`start` in ``directory/attempt-N``, again on fresh ports when a port was taken
    between probing and binding (other tests pick free ports concurrently)."""
    for attempt in range(1, attempts + 1):
        try:
            return start(
                assets,
                directory / f"attempt-{attempt}",
                descriptor,
                owner_pid=owner_pid,
                orphan_dir=orphan_dir or directory,
                profiling=profiling,
            )
        except ControlPlaneError as error:
            if attempt == attempts or "address already in use" not in str(error):
                raise
    raise AssertionError("unreachable")


# --------------------------------------------------------------------------------------------
# Watchdog: ``python -m tests.envtest.controlplane watchdog OWNER_PID OWNER_START DESCRIPTOR DIR``


def watchdog(owner_pid: int, owner_start: int, descriptor: Path, orphan_dir: Path) -> None:
    """Once ``owner_pid`` is gone, stop what ``descriptor`` lists and remove ``orphan_dir``.

    Exits quietly when the descriptor disappears first (its owner stopped everything) or when
    stopped by the owner's teardown.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    owner = ProcessRecord("owner", owner_pid, owner_start, "")
    while owner.alive():
        if not descriptor.exists():
            return
        time.sleep(0.5)
    plane = ControlPlane.load(descriptor)
    if plane is not None:
        plane.processes = [record for record in plane.processes if record.pid != os.getpid()]
        plane.stop()
    shutil.rmtree(orphan_dir, ignore_errors=True)


if __name__ == "__main__":
    if len(sys.argv) == 6 and sys.argv[1] == "watchdog":
        watchdog(int(sys.argv[2]), int(sys.argv[3]), Path(sys.argv[4]), Path(sys.argv[5]))
    else:
        sys.exit("usage: python -m tests.envtest.controlplane watchdog PID START DESCRIPTOR DIR")
