"""Rehydrate a Python process restored from a GKE Pod snapshot (standard library only).

snapready copies this file to ``/snapready`` in every selected pod. Use it from the app::

    import os, sys
    sys.path.insert(0, os.environ.get("SNAPREADY_HELPERS", "/snapready"))
    import snapready_rehydrate

    def reconnect() -> None:
        ...  # re-read secrets, reseed random generators, reopen external connections

    snapready_rehydrate.on_restore(reconnect)

A restored process resumes with the memory of the pod that was frozen, so its ``os.environ`` is the
old pod's. gVisor puts the restoring pod's environment in ``/proc/gvisor/spec_environ``
(``KEY=VALUE`` entries each ended by a NUL byte, like ``/proc/PID/environ``) and answers a blocking
read of ``/proc/gvisor/checkpoint`` with ``resume``, ``restore`` or ``error`` after a checkpoint.
The paths come from ``SNAPREADY_SPEC_ENVIRON`` and ``SNAPREADY_CHECKPOINT`` (injected by
snapready), defaulting to the gVisor ones. Works on Python 3.8 and later.
"""

from __future__ import annotations

import errno
import os
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator

__all__ = [
    "CHECKPOINT_ANSWERS",
    "checkpoint_now",
    "on_restore",
    "read_spec_environ",
    "refresh_environ",
    "wait_for_checkpoint",
]

DEFAULT_SPEC_ENVIRON = "/proc/gvisor/spec_environ"
DEFAULT_CHECKPOINT = "/proc/gvisor/checkpoint"
CHECKPOINT_ANSWERS = ("resume", "restore", "error")
"""What a read of the checkpoint file returns: checkpoint done and this is the original process
(``resume``), this process is a restored copy (``restore``), or the checkpoint failed."""
_READ_SIZE = 64
_EMPTY_READ_PAUSE_SECONDS = 1.0


def _spec_environ_path(path: str | None) -> str:
    return path or os.environ.get("SNAPREADY_SPEC_ENVIRON") or DEFAULT_SPEC_ENVIRON


def _checkpoint_path(path: str | None) -> str:
    return path or os.environ.get("SNAPREADY_CHECKPOINT") or DEFAULT_CHECKPOINT


def read_spec_environ(path: str | None = None, errors: str = "surrogateescape") -> dict[str, str]:
    """The restoring pod's environment, as a dict.

    Args:
        path: the spec_environ file; default ``$SNAPREADY_SPEC_ENVIRON`` or
            ``/proc/gvisor/spec_environ``.
        errors: how bytes that are not UTF-8 are decoded (a ``bytes.decode`` error handler).
            The default ``surrogateescape`` keeps them exactly, and ``os.environ`` encodes them
            back to the same bytes; pass ``"replace"`` to get U+FFFD instead.

    Returns:
        ``{name: value}``. Entries are split on the first ``=`` (values may contain ``=``,
        newlines, quotes); a repeated name keeps its last value; an entry without ``=`` or with
        an empty name is skipped; the last entry may lack its NUL terminator.

    Raises:
        FileNotFoundError: the file does not exist (e.g. not running in GKE Sandbox).
        OSError: the file cannot be read.
    """
    file_path = _spec_environ_path(path)
    try:
        with open(file_path, "rb") as handle:
            raw = handle.read()
    except FileNotFoundError as error:
        raise FileNotFoundError(
            error.errno,
            f"{file_path} does not exist (not running in GKE Sandbox? set SNAPREADY_SPEC_ENVIRON)",
            file_path,
        ) from None
    environ: dict[str, str] = {}
    for entry in raw.split(b"\0"):
        name, sep, value = entry.partition(b"=")
        if sep and name:
            environ[name.decode("utf-8", errors)] = value.decode("utf-8", errors)
    return environ


def refresh_environ(path: str | None = None) -> dict[str, str]:
    """Lay the restoring pod's environment over ``os.environ`` (names not in it are kept).

    Returns:
        the entries that were applied (the same dict as ``read_spec_environ``).

    Raises:
        FileNotFoundError, OSError: as ``read_spec_environ``.
    """
    environ = read_spec_environ(path)
    os.environ.update(environ)
    return environ


def wait_for_checkpoint(path: str | None = None) -> str:
    """Block until the next checkpoint event and return ``resume``, ``restore`` or ``error``.

    One ``read(2)`` of the checkpoint file (default ``$SNAPREADY_CHECKPOINT`` or
    ``/proc/gvisor/checkpoint``); surrounding whitespace and NUL bytes are stripped. Anything else
    the file returns (an empty string at end of file included) is returned as it is.

    Raises:
        FileNotFoundError: the file does not exist (e.g. not running in GKE Sandbox).
        OSError: the file cannot be read.
    """
    file_path = _checkpoint_path(path)
    fd = _open_checkpoint(file_path, os.O_RDONLY)
    try:
        data = os.read(fd, _READ_SIZE)
    finally:
        os.close(fd)
    return _answer(data)


def _open_checkpoint(file_path: str, flags: int) -> int:
    """``os.open`` of the checkpoint file; a missing file says where to look."""
    try:
        return os.open(file_path, flags)
    except FileNotFoundError as error:
        raise FileNotFoundError(
            error.errno,
            f"{file_path} does not exist (not running in GKE Sandbox? set SNAPREADY_CHECKPOINT)",
            file_path,
        ) from None


def _answer(data: bytes) -> str:
    """What the checkpoint file returned, without surrounding whitespace and NUL bytes."""
    return data.decode("utf-8", "replace").strip("\0 \t\r\n")


def checkpoint_now(path: str | None = None) -> str:
    """Ask for a checkpoint of this pod now (GKE's workload trigger) and wait for its outcome.

    Opens the checkpoint file for reading and writing, writes ``1`` and reads the answer on the
    same descriptor: gVisor answers on a descriptor opened before the checkpoint. Returns
    ``resume`` (the checkpoint is done and this is the original process, when the policy keeps
    the pod running), ``restore`` (this process is a copy restored from that checkpoint; if
    ``on_restore`` runs, its callback runs too) or ``error``. When the checkpoint stops the pod,
    the original process never sees an answer: only restored copies return.

    gVisor allows the write only when the pod's OCI spec has
    ``dev.gvisor.internal.checkpoint.enable: "true"`` (GKE sets it when the PodSnapshotPolicy's
    trigger type is ``workload``); otherwise opening for writing fails with ``EPERM``.

    Raises:
        FileNotFoundError: the file does not exist (e.g. not running in GKE Sandbox).
        PermissionError: the sandbox refused the trigger (the message names the annotation).
        OSError: the file cannot be opened or read, or the write of ``1`` was refused after the
            open succeeded (``ENXIO`` from gVisor's ``SaveAsync``: a second workload trigger in
            one sandbox; the message says so).
    """
    file_path = _checkpoint_path(path)
    try:
        fd = _open_checkpoint(file_path, os.O_RDWR)
    except PermissionError as error:
        raise PermissionError(
            error.errno,
            f"{file_path} refuses a checkpoint request (is the PodSnapshotPolicy trigger type "
            "workload? dev.gvisor.internal.checkpoint.enable must be true)",
            file_path,
        ) from None
    try:
        try:
            os.write(fd, b"1")
        except OSError as error:
            if error.errno != errno.ENXIO:
                raise
            raise OSError(
                error.errno,
                f"{file_path} took the request but the sandbox refused to checkpoint "
                f"({error.strerror}): gVisor refuses a second workload-triggered checkpoint in "
                "one sandbox this way, and the other waiters on the file read error",
                file_path,
            ) from None
        data = os.read(fd, _READ_SIZE)
    finally:
        os.close(fd)
    return _answer(data)


def on_restore(
    callback: Callable[[], object],
    *,
    path: str | None = None,
    spec_environ: str | None = None,
    refresh: bool = True,
) -> threading.Thread:
    """Run ``callback()`` in a daemon thread after every restore of this process.

    The thread waits on the checkpoint file (``path``, as ``wait_for_checkpoint``); on
    ``restore`` it first calls ``refresh_environ(spec_environ)`` (unless ``refresh`` is false),
    then ``callback``. ``resume`` and ``error`` are ignored (a failed checkpoint leaves the
    process running, and the next one may succeed). The wait for the next checkpoint is opened
    before the callback runs: gVisor counts a descriptor's checkpoint from its open, so a
    checkpoint taken while a slow callback runs is seen when it returns (a loop that opened
    only after the callback missed it, and its restored copy kept the old environment). An
    exception from the callback or the refresh is printed to stderr (traceback) and the loop
    goes on; a restore whose spec_environ is empty says so on stderr (gVisor found no
    environment for this container: snapready always injects ``SNAPREADY_SPEC_ENVIRON``). The
    thread ends when the checkpoint file cannot be opened or read (missing outside GKE
    Sandbox). An empty read (end of file) pauses 1 s before the next read, so a plain file
    cannot make the loop spin.

    Returns:
        the started thread (named ``snapready-on-restore``).
    """

    def loop() -> None:
        for answer in _checkpoint_events(path):
            if answer == "restore":
                _run_guarded(callback, spec_environ, refresh)
            elif not answer:
                time.sleep(_EMPTY_READ_PAUSE_SECONDS)

    thread = threading.Thread(target=loop, name="snapready-on-restore", daemon=True)
    thread.start()
    return thread


def _checkpoint_events(path: str | None) -> Iterator[str]:
    """Each answer of the checkpoint file (``path``, as ``wait_for_checkpoint``), one per
    checkpoint, with the wait for the next one already open when an answer is handed out (gVisor
    counts a descriptor's checkpoint from its open). Ends when the file cannot be opened or
    read; the answer read before a failed open is still handed out."""
    try:
        fd = _open_checkpoint(_checkpoint_path(path), os.O_RDONLY)
    except OSError:
        return
    while True:
        try:
            data = os.read(fd, _READ_SIZE)
        except OSError:
            os.close(fd)
            return
        try:  # open the next wait, then let go of this one
            following = _open_checkpoint(_checkpoint_path(path), os.O_RDONLY)
        except OSError:
            os.close(fd)
            yield _answer(data)
            return
        os.close(fd)
        fd = following
        yield _answer(data)


def _run_guarded(callback: Callable[[], object], spec_environ: str | None, refresh: bool) -> None:
    """Refresh and call back; print an exception's traceback to stderr and keep going."""
    try:
        if refresh and not refresh_environ(spec_environ):
            print(
                f"snapready_rehydrate: {_spec_environ_path(spec_environ)} is empty: gVisor "
                "found no environment for this container (os.environ left as it was)",
                file=sys.stderr,
                flush=True,
            )
        callback()
    except Exception:  # the app's callback may raise anything; the watcher must survive it
        traceback.print_exc()
