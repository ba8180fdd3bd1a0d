"""py-spy profiles of a running server, and their summary (``--profile DIR`` of ``make
bench-cluster`` and ``make bench-scale``).

``record`` samples a process with ``py-spy record --threads --native`` (raw collapsed stacks)
while a callable runs; ``summarise_profile`` says where the event-loop thread's busy samples go:
inclusive Python frames, leaf frames, and coarse areas (a webhook folder, OpenSSL, uvloop,
orjson, the CPython runtime).
"""

from __future__ import annotations

import contextlib
import re
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

PROFILE_RATE = 200


def py_spy() -> str | None:
    """The py-spy executable (PATH, else next to this Python), or None when absent."""
    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    return spy if Path(spy).exists() else None


@contextlib.contextmanager
def recording(pid: int, raw: Path) -> Iterator[None]:
    """Sample ``pid`` at ``PROFILE_RATE`` Hz into ``raw`` while the ``with`` block runs.

    Nothing happens when py-spy is missing (said once on stdout); py-spy's stderr is kept next
    to ``raw`` as ``<name>.py-spy.log``. Sampling pauses the process briefly for each stack:
    profile a phase that is not measured.
    """
    spy = py_spy()
    if spy is None:
        print(f"  py-spy not found: no profile {raw.name} (pip install py-spy)")
        yield
        return
    log = raw.with_name(raw.name.split(".")[0] + ".py-spy.log")
    recorder = subprocess.Popen(
        [spy, "record", "--pid", str(pid), "--rate", str(PROFILE_RATE), "--format", "raw",
         "--threads", "--native", "-o", str(raw)],
        stdout=subprocess.DEVNULL,
        stderr=log.open("wb"),
        start_new_session=True,
    )  # fmt: skip
    try:
        time.sleep(1.5)  # attached
        yield
        time.sleep(0.3)
    finally:
        recorder.send_signal(signal.SIGINT)
        try:
            recorder.wait(30)
        except subprocess.TimeoutExpired:
            recorder.kill()
            recorder.wait(5)


def record(pid: int, raw: Path, during: Callable[[], object]) -> Path | None:
    """``during()`` under ``recording(pid, raw)``; ``raw``, or None when nothing was written."""
    with recording(pid, raw):
        during()
    return raw if raw.exists() else None


FRAME = re.compile(r"^(?P<func>.*?) \((?P<file>[^()]*?)(?::\d+)?\)$")
IDLE_LEAVES = ("epoll_wait", "epoll_pwait", "poll", "select", "futex", "nanosleep", "0x")
"""Leaf frames of a thread waiting in the kernel (an unresolved libc address is a futex wait)."""


def summarise_profile(raw: Path, top: int = 20, thread: str | None = "MainThread") -> str:
    """Where the event-loop thread's CPU goes, from py-spy raw stacks (``--threads --native``).

    Only ``thread``'s samples whose leaf is not a kernel wait (epoll, poll, futex) count; by
    default MainThread, the thread serving admissions (the cache, leader, scope and metrics
    threads are reported as one figure); ``thread=None`` counts every thread's busy samples
    (a sync, where the work is in the reflector and controller threads). Frames are grouped by
    function and file, without line numbers.
    """
    inclusive: Counter[str] = Counter()
    own: Counter[str] = Counter()
    areas: Counter[str] = Counter()
    busy_threads: Counter[str] = Counter()
    active = idle = others_active = others_idle = 0
    for line in raw.read_text(errors="replace").splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        name, *frames = stack.split(";")
        leaf = frames[-1] if frames else ""
        waiting = leaf.startswith(IDLE_LEAVES)
        if thread is not None and thread not in name:
            if waiting:
                others_idle += count
            else:
                others_active += count
                busy_threads[name.split(": ", 1)[-1]] += count
            continue
        if waiting:
            idle += count
            continue
        active += count
        if thread is None:
            busy_threads[name.split(": ", 1)[-1]] += count
        names = [short_frame(frame) for frame in frames]
        for frame_name in set(names):
            inclusive[frame_name] += count
        own[names[-1]] += count
        areas[area(frames[-1])] += count
    if not active:
        return f"{raw}: no active samples of the " + (
            "event-loop thread" if thread == "MainThread" else (thread or "any thread")
        )
    who = "event-loop thread" if thread == "MainThread" else (thread or "every thread")
    lines = [
        f"{who}: {active} busy samples, {idle} waiting (epoll); other threads: "
        f"{others_active} busy, {others_idle} waiting (py-spy --native, {PROFILE_RATE} Hz)",
        "",
        f"inclusive, Python frames (% of the {who}'s busy samples; frames in >= 95% "
        "omitted: the event loop itself):",
    ]
    below_loop = [
        (name, n)
        for name, n in inclusive.most_common()
        if n < 0.95 * active and ".py)" in name  # Python frames: the native ones are the loop
    ]
    lines += [f"  {100 * n / active:5.1f}%  {name}" for name, n in below_loop[:top]]
    lines += ["", "self (leaf frame, native frames included):"]
    lines += [f"  {100 * n / active:5.1f}%  {name}" for name, n in own.most_common(top)]
    lines += ["", "self by area:"]
    lines += [f"  {100 * n / active:5.1f}%  {name}" for name, n in areas.most_common(16)]
    lines += ["", "busy samples by thread" if thread is None else
              "busy samples of the other threads (vs the event loop's):"]  # fmt: skip
    lines += [f"  {n:6d}  {name}" for name, n in busy_threads.most_common(5)]
    return "\n".join(lines)


def short_frame(frame: str) -> str:
    """``func (path/file.py:12)`` -> ``func (path/file.py)``."""
    match = FRAME.match(frame.strip())
    if not match:
        return frame.strip()
    return f"{match.group('func')} ({match.group('file')})"


def area(frame: str) -> str:
    """A coarse owner of a leaf frame: a webhook folder, a library, or the runtime."""
    match = FRAME.match(frame.strip())
    path = match.group("file") if match else frame
    if path.startswith("webhook/"):
        return "/".join(path.split("/")[:2])
    for marker, name in (
        ("libcrypto", "OpenSSL (libcrypto)"),
        ("libssl", "OpenSSL (libssl)"),
        ("_ssl.c", "CPython _ssl"),
        ("loop.c", "uvloop"),
        ("uv", "libuv"),
        ("orjson", "orjson"),
        ("pydantic_core", "pydantic-core"),
        ("httptools", "httptools"),
        ("libc.so", "libc (syscalls)"),
        ("libpython", "CPython runtime"),
    ):
        if marker in path:
            return name
    if path.endswith((".c", ".h")):
        return "CPython runtime"
    return path.split("/", 1)[0] if "/" in path else path
