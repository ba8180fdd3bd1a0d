"""CPU time and memory of processes and of the whole machine, from /proc.

CPU is ``utime + stime`` of ``/proc/<pid>/stat`` (every thread of the process, in clock ticks:
10 ms on Linux), the machine's from the first line of ``/proc/stat``; memory is ``VmRSS`` (resident
now) and ``VmHWM`` (peak resident) of ``/proc/<pid>/status``. A phase's CPU (``cpu_sample`` and
``cpu_delta_ms``) also reads each thread's run time in nanoseconds (``/proc/<pid>/task/*/
schedstat``, first field: the scheduler's ``sum_exec_runtime``), so a 160 ms phase is not
measured to +-10 ms. The parsers take the file's text, so they are tested without a process.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import NamedTuple

TICKS = os.sysconf("SC_CLK_TCK")
MIB = 1024 * 1024


def stat_ticks(stat: str) -> int:
    """utime + stime (clock ticks) from the text of ``/proc/<pid>/stat``; the command name, in
    parentheses, may itself hold spaces and parentheses."""
    fields = stat.rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def busy_ticks(line: str) -> int:
    """Ticks every CPU spent neither idle nor in iowait, from the ``cpu`` line of /proc/stat."""
    values = [int(v) for v in line.split()[1:]]
    idle = values[3] + (values[4] if len(values) > 4 else 0)
    return sum(values[:8]) - idle  # user nice system idle iowait irq softirq steal


def status_mib(status: str) -> dict[str, float]:
    """``VmRSS`` and ``VmHWM`` in MiB from the text of ``/proc/<pid>/status``."""
    values: dict[str, float] = {}
    for line in status.splitlines():
        key, _, rest = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            values[key] = int(rest.split()[0]) / 1024
    return values


def cpu_ms(pid: int) -> float:
    """CPU milliseconds of ``pid`` so far (all its threads); 0 when it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0
    return stat_ticks(stat) * 1000 / TICKS


def schedstat_ns(schedstat: str) -> int:
    """Nanoseconds on a CPU, the first field of ``/proc/<pid>/task/<tid>/schedstat`` (then the
    time waited on a run queue and the number of time slices)."""
    return int(schedstat.split(maxsplit=1)[0])


class CpuSample(NamedTuple):
    """One reading of a process's CPU: ``ticks_ms`` from ``/proc/<pid>/stat`` (exited threads
    included, 10 ms steps) and ``run_ms``, the sum of its live threads' ``schedstat`` run times
    (exact; None when unreadable)."""

    ticks_ms: float
    run_ms: float | None


TICK_SLACK_MS = 2 * 1000 / TICKS + 1.0
"""How far a phase's exact figure may lie from its tick figure: each of the two tick readings is
truncated by up to one tick (plus 1 ms for the readings not being taken at the same instant)."""


def cpu_sample(pid: int) -> CpuSample:
    """``pid``'s CPU now, both ways (0 and None when it is gone)."""
    ticks = cpu_ms(pid)
    total = 0
    try:
        for task in os.scandir(f"/proc/{pid}/task"):
            total += schedstat_ns(Path(task.path, "schedstat").read_text())
    except (OSError, ValueError, IndexError):
        return CpuSample(ticks, None)
    return CpuSample(ticks, total / 1e6)


def cpu_delta_ms(before: CpuSample, after: CpuSample) -> float:
    """CPU milliseconds between two samples of one process: the exact run-time difference when
    both were read and it agrees with the tick difference within ``TICK_SLACK_MS`` (a thread
    that exited in between takes its run time with it: the sum of the live threads drops),
    else the tick difference."""
    ticks = after.ticks_ms - before.ticks_ms
    if before.run_ms is None or after.run_ms is None:
        return ticks
    exact = after.run_ms - before.run_ms
    return exact if abs(exact - ticks) <= TICK_SLACK_MS else ticks


def main_thread_cpu_ms(pid: int) -> float:
    """CPU milliseconds so far of ``pid``'s main thread (the thread whose id is the process id;
    a Python server's event loop): its exact run time (``/proc/<pid>/task/<pid>/schedstat``),
    else ``utime + stime`` of its ``stat`` in ticks; 0 when it is gone."""
    try:
        return schedstat_ns(Path(f"/proc/{pid}/task/{pid}/schedstat").read_text()) / 1e6
    except (OSError, ValueError, IndexError):
        pass
    try:
        stat = Path(f"/proc/{pid}/task/{pid}/stat").read_text()
    except OSError:
        return 0.0
    return stat_ticks(stat) * 1000 / TICKS


def machine_busy_ms() -> float:
    """CPU time spent by the whole machine (every CPU, not idle or iowait), in milliseconds."""
    return busy_ticks(Path("/proc/stat").read_text().split("\n", 1)[0]) * 1000 / TICKS


def memory_mib(pid: int) -> dict[str, float]:
    """``{"VmRSS": ..., "VmHWM": ...}`` of ``pid`` in MiB."""
    return status_mib(Path(f"/proc/{pid}/status").read_text())
