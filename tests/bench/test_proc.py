"""CPU and memory parsed from the text of /proc files."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

from bench.harness import proc

STAT = (
    "4242 (python3 (bench) x) S 1 4242 4242 0 -1 4194560 1000 0 0 0 "
    "150 25 0 0 20 0 3 0 12345 100000000 5000 18446744073709551615"
)
STATUS = (
    "Name:\tpython3\nVmPeak:\t  999 kB\nVmHWM:\t  204800 kB\nVmRSS:\t  102400 kB\nThreads:\t3\n"
)


def test_stat_ticks_are_utime_plus_stime_past_a_command_with_parentheses() -> None:
    assert proc.stat_ticks(STAT) == 150 + 25


def test_busy_ticks_leave_out_idle_and_iowait() -> None:
    # user nice system idle iowait irq softirq steal guest guest_nice
    assert proc.busy_ticks("cpu  100 5 50 9000 300 7 8 2 0 0") == 100 + 5 + 50 + 7 + 8 + 2


def test_status_mib_reads_rss_and_peak() -> None:
    assert proc.status_mib(STATUS) == {"VmHWM": 200.0, "VmRSS": 100.0}


def test_this_process_has_cpu_time_and_memory() -> None:
    assert proc.cpu_ms(os.getpid()) > 0
    memory = proc.memory_mib(os.getpid())
    assert 0 < memory["VmRSS"] <= memory["VmHWM"]
    assert proc.machine_busy_ms() > 0


def test_a_gone_process_has_no_cpu_time() -> None:
    assert proc.cpu_ms(2**22 + 1) == 0.0


def test_the_main_threads_cpu_leaves_out_what_other_threads_burn() -> None:
    """bench-cluster splits the webhook's CPU into its event loop (the main thread) and the
    rest (watches, controllers)."""
    pid = os.getpid()
    process_before, main_before = proc.cpu_ms(pid), proc.main_thread_cpu_ms(pid)

    def spin() -> None:
        end = time.thread_time() + 0.3  # 300 ms of this thread's own CPU
        while time.thread_time() < end:
            pass

    worker = threading.Thread(target=spin)
    worker.start()
    worker.join()  # the main thread sleeps meanwhile
    process = proc.cpu_ms(pid) - process_before
    main = proc.main_thread_cpu_ms(pid) - main_before
    assert process >= 250  # the worker's CPU counts for the process (10 ms ticks)
    assert main < 100  # and not for the main thread
    assert proc.main_thread_cpu_ms(2**22 + 1) == 0.0  # a process that is gone


def test_schedstat_ns_is_the_first_field() -> None:
    assert proc.schedstat_ns("473353 172891 1\n") == 473353


def test_a_phase_is_the_exact_difference_when_both_samples_have_it() -> None:
    before = proc.CpuSample(ticks_ms=1000.0, exact_ms=1003.25)
    after = proc.CpuSample(ticks_ms=1160.0, exact_ms=1171.5)  # ticks say 160, exactly 168.25
    assert proc.cpu_delta_ms(before, after) == 168.25


def test_without_the_exact_clock_the_phase_is_the_tick_figure() -> None:
    assert proc.cpu_delta_ms(proc.CpuSample(10.0, None), proc.CpuSample(30.0, 29.0)) == 20.0
    assert proc.cpu_delta_ms(proc.CpuSample(10.0, 9.0), proc.CpuSample(30.0, None)) == 20.0


def _spin(seconds: float) -> None:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def test_another_process_is_measured_exactly_with_its_exited_threads() -> None:
    """A child that runs three 7 ms threads, each exiting, then waits: 21 ms exactly (ticks
    would say 20 or 30), and none lost with the threads gone (a per-thread sum would lose
    them)."""
    script = (
        "import sys, threading, time\n"
        "def spin():\n"
        "    end = time.thread_time() + 0.007\n"
        "    while time.thread_time() < end: pass\n"
        "sys.stdin.readline()\n"
        "for _ in range(3):\n"
        "    t = threading.Thread(target=spin); t.start(); t.join()\n"
        "print('done', flush=True)\n"
        "sys.stdin.readline()\n"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert child.stdin is not None and child.stdout is not None
    try:
        time.sleep(0.2)  # the interpreter has started and waits on stdin
        before = proc.cpu_sample(child.pid)
        child.stdin.write("go\n")
        child.stdin.flush()
        assert child.stdout.readline().strip() == "done"
        after = proc.cpu_sample(child.pid)
    finally:
        child.stdin.close()
        child.wait(30)
    assert before.exact_ms is not None and after.exact_ms is not None
    spent = proc.cpu_delta_ms(before, after)
    # 21 ms of the threads, plus the child's own starting and joining of them (well under 5 ms)
    assert 21.0 <= spent < 26.0, spent
    assert proc.cpu_sample(child.pid) == proc.CpuSample(0.0, None)  # gone: reaped above


def test_the_main_threads_run_time_is_to_the_millisecond() -> None:
    pid = os.getpid()
    before = proc.main_thread_cpu_ms(pid)
    _spin(0.015)
    spent = proc.main_thread_cpu_ms(pid) - before
    assert 15.0 <= spent < 17.5, spent
