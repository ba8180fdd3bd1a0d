"""py-spy profiles of snapready during ``make bench-cluster --profile DIR``, and their summary.

One extra, unmeasured phase of selected pods per snapready variant, sampled with ``py-spy record
--threads --native`` (raw collapsed stacks in DIR); the summary says where the event-loop
thread's busy samples go: inclusive Python frames, leaf frames, and coarse areas (a webhook
folder, OpenSSL, uvloop, orjson, the CPython runtime).
"""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from bench.cluster.phases import Bench, delete_pods

PROFILE_RATE = 200


def profile_phase(bench: Bench, scenario: str, pods: int, out: Path) -> Path | None:
    """Sample ``scenario``'s server with py-spy while ``pods`` selected pods are created."""
    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if not Path(spy).exists():
        print(f"  py-spy not found: no profile of {scenario} (pip install py-spy)")
        return None
    bench.activate(scenario)
    bench.create("selected", 64)
    raw = out / f"{scenario}.collapsed.txt"
    pid = bench.hooks[scenario].server.process.pid
    recorder = subprocess.Popen(
        [
            spy,
            "record",
            "--pid",
            str(pid),
            "--rate",
            str(PROFILE_RATE),
            "--format",
            "raw",
            "--threads",
            "--native",
            "-o",
            str(raw),
        ],
        stdout=subprocess.DEVNULL,
        stderr=(out / f"{scenario}.py-spy.log").open("wb"),
        start_new_session=True,
    )
    try:
        time.sleep(1.5)  # attached
        bench.create("selected", pods)
        time.sleep(0.3)
    finally:
        recorder.send_signal(signal.SIGINT)
        try:
            recorder.wait(30)
        except subprocess.TimeoutExpired:
            recorder.kill()
            recorder.wait(5)
    delete_pods(bench.api)
    return raw if raw.exists() else None


FRAME = re.compile(r"^(?P<func>.*?) \((?P<file>[^()]*?)(?::\d+)?\)$")
IDLE_LEAVES = ("epoll_wait", "epoll_pwait", "poll", "select", "futex", "nanosleep", "0x")
"""Leaf frames of a thread waiting in the kernel (an unresolved libc address is a futex wait)."""


def summarise_profile(raw: Path, top: int = 20) -> str:
    """Where the event-loop thread's CPU goes, from py-spy raw stacks (``--threads --native``).

    Only MainThread samples whose leaf is not a kernel wait (epoll, poll, futex) count: that is
    the thread serving admissions (the cache, leader, scope and metrics threads are reported as
    one figure). Frames are grouped by function and file, without line numbers.
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
        thread, *frames = stack.split(";")
        leaf = frames[-1] if frames else ""
        waiting = leaf.startswith(IDLE_LEAVES)
        if "MainThread" not in thread:
            if waiting:
                others_idle += count
            else:
                others_active += count
                busy_threads[thread.split(": ", 1)[-1]] += count
            continue
        if waiting:
            idle += count
            continue
        active += count
        names = [short_frame(frame) for frame in frames]
        for name in set(names):
            inclusive[name] += count
        own[names[-1]] += count
        areas[area(frames[-1])] += count
    if not active:
        return f"{raw}: no active samples of the event-loop thread"
    lines = [
        f"event-loop thread: {active} busy samples, {idle} waiting (epoll); other threads: "
        f"{others_active} busy, {others_idle} waiting (py-spy --native, {PROFILE_RATE} Hz)",
        "",
        "inclusive, Python frames (% of the event-loop thread's busy samples; frames in >= 95% "
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
    lines += ["", "busy samples of the other threads (vs the event loop's):"]
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
