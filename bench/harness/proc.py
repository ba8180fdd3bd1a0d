"""CPU time and memory of processes and of the whole machine, from /proc.

CPU is ``utime + stime`` of ``/proc/<pid>/stat`` (every thread of the process, in clock ticks:
10 ms on Linux), the machine's from the first line of ``/proc/stat``; memory is ``VmRSS`` (resident
now) and ``VmHWM`` (peak resident) of ``/proc/<pid>/status``. The parsers take the file's text, so
they are tested without a process.
"""

from __future__ import annotations

import os
from pathlib import Path

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


def main_thread_cpu_ms(pid: int) -> float:
    """CPU milliseconds so far of ``pid``'s main thread (``/proc/<pid>/task/<pid>/stat``: the
    thread whose id is the process id; a Python server's event loop); 0 when it is gone."""
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
