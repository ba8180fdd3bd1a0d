"""Containers under real gVisor (``runsc``): root filesystems, OCI specs, run, checkpoint, restore.

``runsc`` comes from ``scripts/runsc.sh`` (``make runsc``: built once from the Go module proxy at
the version pinned in ``gvisor/go.mod``, cached under ``~/.cache/snapready/runsc/``). ``find_runsc``
returns it, or raises ``RunscUnavailable`` with the reason it cannot start a sandbox here (not
Linux, not root, no cached binary and no Go); the ``runsc`` fixture in ``tests/gvisor/conftest.py``
turns that into a skip, or a failure under ``CI=true``.

Every sandbox runs as ``runsc --root <state> --network=none --ignore-cgroups`` (the default systrap
platform, no network namespace or cgroups to set up), detached, its stdout and stderr in files.
There is no image store: a root filesystem is a folder whose ``/usr`` (Debian: dash, coreutils,
python3) or ``/bin`` (busybox applets) comes from this machine through read-only OCI bind mounts.
The helpers are mounted at ``/snapready`` read-only, where the injected init container copies them.
"""

from __future__ import annotations

import contextlib
import copy
import ctypes
import json
import os
import re
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from webhook.snapshots.evidence import restore_failure

ROOT = Path(__file__).resolve().parents[2]
RUNSC_SCRIPT = ROOT / "scripts" / "runsc.sh"
HELPERS = ROOT / "webhook" / "assets" / "helpers"
CONTAINER_NAME_ANNOTATION = "io.kubernetes.cri.container-name"
"""containerd's name for the container; gVisor finds ``spec_environ`` by it (empty without it)."""
BUSYBOX_APPLETS = (
    "sh",
    "od",
    "dd",
    "tr",
    "env",
    "cat",
    "ls",
    "grep",
    "sleep",
    "printf",
    "echo",
    "cp",
    "mv",
)
"""What the helper and the test programs use in the busybox root filesystem."""
RUNSC_TIMEOUT = 60.0


class RunscUnavailable(Exception):
    """runsc cannot start a sandbox on this machine; the message says why."""


def find_runsc() -> Path:
    """The runsc binary: ``$SNAPREADY_RUNSC``, else built or reused by ``scripts/runsc.sh``.

    Raises:
        RunscUnavailable: not Linux, not root (runsc's sandbox needs it), or the build failed
            (the script's last lines are in the message).
    """
    if not sys.platform.startswith("linux"):
        raise RunscUnavailable(f"gVisor runs on Linux only (this is {sys.platform})")
    if os.geteuid() != 0:
        raise RunscUnavailable("runsc needs root to start a sandbox (sudo make unit)")
    explicit = os.environ.get("SNAPREADY_RUNSC")
    if explicit:
        if not os.access(explicit, os.X_OK):
            raise RunscUnavailable(f"SNAPREADY_RUNSC={explicit} is not an executable file")
        return Path(explicit)
    result = subprocess.run(
        ["bash", str(RUNSC_SCRIPT)], capture_output=True, text=True, check=False
    )
    paths = re.findall(r"^RUNSC=(.+)$", result.stdout, re.MULTILINE)
    if result.returncode != 0 or not paths:
        tail = "\n".join(result.stderr.strip().splitlines()[-5:])
        raise RunscUnavailable(f"scripts/runsc.sh exited {result.returncode}: {tail}")
    return Path(paths[-1])


@dataclass(frozen=True)
class Rootfs:
    """A root filesystem folder and the OCI mounts that fill it from this machine."""

    path: Path
    mounts: tuple[dict[str, Any], ...]
    shell: str


def _ro_bind(destination: str, source: str | Path) -> dict[str, Any]:
    return {
        "destination": destination,
        "type": "bind",
        "source": str(source),
        "options": ["rbind", "rprivate", "ro"],
    }


def _skeleton(path: Path) -> None:
    for folder in ("proc", "dev", "tmp", "sys", "etc", "usr", "snapready", "app", "data"):
        (path / folder).mkdir(parents=True, exist_ok=True)


def debian_rootfs(path: Path) -> Rootfs:
    """A Debian-like root: this machine's ``/usr`` (merged-usr links), ``/bin/sh`` is dash."""
    _skeleton(path)
    for link, target in (("bin", "usr/bin"), ("sbin", "usr/sbin"), ("lib", "usr/lib")):
        if not (path / link).is_symlink():
            (path / link).symlink_to(target)
    if Path("/usr/lib64").is_dir() and not (path / "lib64").is_symlink():
        (path / "lib64").symlink_to("usr/lib64")
    return Rootfs(path, (_ro_bind("/usr", "/usr"),), "/bin/sh")


def busybox_rootfs(path: Path, busybox: str) -> Rootfs:
    """A busybox image: ``/bin`` holds only busybox and its applet links (``/bin/sh`` is ash).

    The C library comes from this machine (read-only ``/lib`` and ``/lib64``) in case the
    binary is dynamically linked, as Debian's ``busybox`` package is.
    """
    _skeleton(path)
    bin_dir = path / "bin"
    bin_dir.mkdir(exist_ok=True)
    shutil.copy2(busybox, bin_dir / "busybox")
    for applet in BUSYBOX_APPLETS:
        if not (bin_dir / applet).is_symlink():
            (bin_dir / applet).symlink_to("busybox")
    mounts = [_ro_bind("/lib", Path("/lib").resolve())]
    if Path("/lib64").exists():
        (path / "lib64").mkdir(exist_ok=True)
        mounts.append(_ro_bind("/lib64", Path("/lib64").resolve()))
    return Rootfs(path, tuple(mounts), "/bin/sh")


def oci_spec(
    rootfs: Rootfs,
    args: list[str],
    env: list[str],
    *,
    name: str = "app",
    app_dir: Path | None = None,
    annotations: dict[str, str] | None = None,
    mounts: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """An OCI runtime spec for one container, shaped like containerd's for a pod's container.

    ``name`` becomes the ``io.kubernetes.cri.container-name`` annotation; ``app_dir`` (the test
    programs) is mounted read-only at ``/app``; the helpers at ``/snapready`` (read-only, as the
    injected emptyDir mount is).
    """
    all_mounts = [
        {"destination": "/proc", "type": "proc", "source": "proc"},
        {"destination": "/dev", "type": "tmpfs", "source": "tmpfs"},
        {"destination": "/tmp", "type": "tmpfs", "source": "tmpfs"},
        *copy.deepcopy(list(rootfs.mounts)),
        _ro_bind("/snapready", HELPERS),
    ]
    if app_dir is not None:
        all_mounts.append(_ro_bind("/app", app_dir))
    all_mounts.extend(mounts or [])
    caps = ["CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FOWNER", "CAP_KILL", "CAP_SETGID", "CAP_SETUID"]
    return {
        "ociVersion": "1.1.0",
        "process": {
            "terminal": False,
            "user": {"uid": 0, "gid": 0},
            "args": args,
            "env": env,
            "cwd": "/",
            "capabilities": {key: caps for key in ("bounding", "effective", "permitted")},
        },
        "root": {"path": str(rootfs.path), "readonly": False},
        "hostname": "pod",
        "mounts": all_mounts,
        "annotations": {CONTAINER_NAME_ANNOTATION: name, **(annotations or {})},
        "linux": {"namespaces": [{"type": kind} for kind in ("pid", "ipc", "uts", "mount")]},
    }


def write_spec(bundle: Path, spec: dict[str, Any], raw_env: list[bytes] | None = None) -> None:
    """Write ``bundle/config.json``; ``raw_env`` entries are written as raw bytes (not escaped).

    JSON text has no way to carry bytes that are not UTF-8; writing them raw is the closest a
    runtime can be handed them (Go's decoder then replaces them with U+FFFD).
    """
    bundle.mkdir(parents=True, exist_ok=True)
    text = json.dumps(spec, indent=1, ensure_ascii=False).encode()
    if raw_env:
        placeholder = b'"__raw_env__"'
        spec = copy.deepcopy(spec)
        spec["process"]["env"] = [*spec["process"]["env"], "__raw_env__"]
        text = json.dumps(spec, indent=1, ensure_ascii=False).encode()
        raw = b", ".join(b'"' + entry + b'"' for entry in raw_env)
        text = text.replace(placeholder, raw)
    (bundle / "config.json").write_bytes(text)


@dataclass
class Container:
    """A started sandbox: its id, bundle and the files its stdout and stderr go to."""

    cid: str
    bundle: Path
    stdout: Path
    stderr: Path

    def output(self) -> str:
        """Everything the container printed so far.

        A restored process keeps the file offset its stdout had at the checkpoint, so a restore's
        fresh stdout file starts with that many NUL bytes; they are dropped here.
        """
        return self.stdout.read_bytes().replace(b"\0", b"").decode("utf-8", "replace")

    def wait_for(self, pattern: str, timeout: float = 20.0) -> re.Match[str]:
        """Poll stdout until ``pattern`` (a multi-line regex) matches; raise with the output."""
        deadline = time.monotonic() + timeout
        while True:
            match = re.search(pattern, self.output(), re.MULTILINE)
            if match:
                return match
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"{self.cid}: no {pattern!r} after {timeout}s\n--- stdout\n{self.output()}"
                    f"\n--- stderr\n{self.stderr.read_text(errors='replace')[-3000:]}"
                )
            time.sleep(0.02)


@dataclass
class Runsc:
    """One runsc state folder; every container it starts is deleted by ``close``."""

    binary: Path
    work: Path
    started: list[str] = field(default_factory=list)

    def command(self, *args: str) -> list[str]:
        state = self.work / "state"
        state.mkdir(parents=True, exist_ok=True)
        return [
            str(self.binary),
            "--root",
            str(state),
            "--network=none",
            "--ignore-cgroups",
            *args,
        ]

    def call(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """Run a runsc command; raise with its output unless ``check`` is false."""
        result = subprocess.run(
            self.command(*args), capture_output=True, text=True, timeout=RUNSC_TIMEOUT, check=False
        )
        if check and result.returncode != 0:
            raise AssertionError(
                f"runsc {' '.join(args)} exited {result.returncode}:\n{result.stderr[-3000:]}"
            )
        return result

    def _start(
        self, verb: list[str], spec: dict[str, Any], raw_env: list[bytes] | None
    ) -> tuple[Container, int]:
        cid = f"snapready-{uuid.uuid4().hex[:12]}"
        bundle = self.work / cid
        write_spec(bundle, spec, raw_env)
        container = Container(cid, bundle, bundle / "stdout", bundle / "stderr")
        with container.stdout.open("wb") as out, container.stderr.open("wb") as err:
            result = subprocess.run(
                self.command(*verb, "--detach", "--bundle", str(bundle), cid),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                timeout=RUNSC_TIMEOUT,
                check=False,
            )
        self.started.append(cid)
        return container, result.returncode

    def run(self, spec: dict[str, Any], raw_env: list[bytes] | None = None) -> Container:
        """Start a container from ``spec`` (detached); raise with runsc's stderr on failure."""
        container, status = self._start(["run"], spec, raw_env)
        if status != 0:
            raise AssertionError(f"runsc run exited {status}:\n{container.stderr.read_text()}")
        return container

    def checkpoint(self, container: Container, image: Path, *, leave_running: bool) -> None:
        """``runsc checkpoint`` into ``image`` (stops the container unless ``leave_running``)."""
        image.mkdir(parents=True, exist_ok=True)
        extra = ["--leave-running"] if leave_running else []
        self.call("checkpoint", "--image-path", str(image), *extra, container.cid)

    def restore(
        self, image: Path, spec: dict[str, Any], raw_env: list[bytes] | None = None
    ) -> tuple[Container, int]:
        """``runsc restore`` a new container from ``image`` with ``spec``: (container, status).

        A refused restore exits non-zero with gVisor's reason in ``container.stderr``.
        """
        container, status = self._start(["restore", "--image-path", str(image)], spec, raw_env)
        return container, status

    def delete(self, cid: str) -> None:
        """Stop and remove a container (no error when it is gone already)."""
        self.call("delete", "--force", cid, check=False)

    def close(self) -> None:
        """Delete every container this object started, then unmount the null network namespace.

        With ``--network=none`` runsc bind-mounts an empty network namespace at
        ``<root>/null-netns`` for its gofers and leaves it mounted (runsc's own
        ``specutils.UnmountNullNetNS``); the folder cannot be removed until it is unmounted.
        """
        for cid in self.started:
            self.delete(cid)
        self.started.clear()
        unmount_all(self.work / "state" / "null-netns")


def unmount_all(path: Path) -> None:
    """Lazily unmount every mount stacked on ``path`` (``umount2(MNT_DETACH)`` until it fails)."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        for _ in range(64):
            if libc.umount2(str(path).encode(), 2) != 0:  # MNT_DETACH = 2
                return


def image_files(image: Path) -> list[str]:
    """The file names of a checkpoint image folder, sorted."""
    return sorted(entry.name for entry in image.iterdir())


def parse_report(text: str, tag: str) -> dict[str, bytes | None]:
    """``{name: value}`` of the programs' ``<tag> NAME=<hex>`` and ``<tag> NAME unset`` lines."""
    values: dict[str, bytes | None] = {}
    for line in text.splitlines():
        parts = line.split(" ", 1)
        if len(parts) != 2 or parts[0] != tag:
            continue
        entry = parts[1]
        if entry.endswith(" unset"):
            values[entry[: -len(" unset")]] = None
        else:
            name, _, hexed = entry.rpartition("=")
            values[name] = bytes.fromhex(hexed)
    return values


def parse_environ(hexed: str) -> Iterator[tuple[str, bytes]]:
    """(name, value) of a hex dump of ``/proc/PID/environ`` (NUL-ended ``NAME=VALUE``)."""
    for entry in bytes.fromhex(hexed).split(b"\0"):
        name, sep, value = entry.partition(b"=")
        if sep:
            yield name.decode("utf-8", "replace"), value


def crash_seen(runsc_error: str) -> bool:
    """Whether the leader's crash detection (``snapshots.evidence.restore_failure``) sees a
    restore crash in a container whose start failed with ``runsc_error`` (runsc's stderr: its
    first line that is not a harness line, as the kubelet reports a ``StartError``; containerd
    only prefixes it)."""
    lines = [line for line in runsc_error.splitlines() if line and not line.startswith("runsc ")]
    terminated = {"exitCode": 128, "reason": "StartError", "message": lines[0] if lines else ""}
    status = {"containerStatuses": [{"name": "app", "lastState": {"terminated": terminated}}]}
    return restore_failure(status) is not None
