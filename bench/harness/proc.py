"""CPU time and memory of processes and of the whole machine, from /proc.

CPU is ``utime + stime`` of ``/proc/<pid>/stat`` (every thread of the process, in clock ticks:
10 ms on Linux), the machine's from the first line of ``/proc/stat``; memory is ``VmRSS`` (resident
now) and ``VmHWM`` (peak resident) of ``/proc/<pid>/status``. A phase's CPU (``cpu_sample`` and
``cpu_delta_ms``) is the process's CPU clock in nanoseconds (``clock_gettime`` on the clock of
``pid``: every thread, exited ones included), so a 160 ms phase is not measured to +-10 ms;
ticks only when that clock cannot be read. The parsers take the file's text, so they are tested
without a process.
"""

from __future__ import annotations

import os
import time
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
    """One reading of a process's CPU: ``ticks_ms`` from ``/proc/<pid>/stat`` (10 ms steps) and
    ``exact_ms`` from its CPU clock (None when unreadable); both count every thread the process
    ever had."""

    ticks_ms: float
    exact_ms: float | None


def process_clock_id(pid: int) -> int:
    """The ``clockid_t`` of process ``pid``'s CPU clock: glibc's ``clock_getcpuclockid``,
    i.e. the kernel's ``MAKE_PROCESS_CPUCLOCK(pid, CPUCLOCK_SCHED)`` = ``(~pid << 3) | 2``
    (include/linux/posix-timers.h): the scheduler's run time of the whole thread group, in
    nanoseconds. Any process may read another's (a thread's clock only within its process)."""
    return ((~pid) << 3) | 2


def cpu_sample(pid: int) -> CpuSample:
    """``pid``'s CPU now, both ways (``CpuSample(0.0, None)`` when it is gone)."""
    ticks = cpu_ms(pid)
    try:
        exact = time.clock_gettime_ns(process_clock_id(pid)) / 1e6
    except OSError:
        return CpuSample(ticks, None)
    return CpuSample(ticks, exact)


def cpu_delta_ms(before: CpuSample, after: CpuSample) -> float:
    """CPU milliseconds between two samples of one process: the exact difference when both
    samples have it, else the tick difference."""
    if before.exact_ms is None or after.exact_ms is None:
        return after.ticks_ms - before.ticks_ms
    return after.exact_ms - before.exact_ms


def main_thread_cpu_ms(pid: int) -> float:
    """CPU milliseconds so far of ``pid``'s main thread (the thread whose id is the process id;
    a Python server's event loop): its run time in nanoseconds (``/proc/<pid>/task/<pid>/
    schedstat``; another process's thread clock cannot be read), else ``utime + stime`` of its
    ``stat`` in ticks; 0 when it is gone."""
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
