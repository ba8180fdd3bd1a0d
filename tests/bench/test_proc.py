"""CPU and memory parsed from the text of /proc files."""

from __future__ import annotations

import os
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


def test_a_phase_is_its_exact_run_time_when_it_agrees_with_the_ticks() -> None:
    before = proc.CpuSample(ticks_ms=1000.0, run_ms=1003.25)
    after = proc.CpuSample(ticks_ms=1160.0, run_ms=1171.5)  # ticks say 160, exactly 168.25
    assert proc.cpu_delta_ms(before, after) == 168.25


def test_a_thread_gone_in_the_phase_leaves_the_tick_figure() -> None:
    # A thread that ran 500 ms exited: the live threads' sum fell, the ticks still count it.
    before = proc.CpuSample(ticks_ms=2000.0, run_ms=2004.0)
    after = proc.CpuSample(ticks_ms=2100.0, run_ms=1610.0)
    assert proc.cpu_delta_ms(before, after) == 100.0


def test_without_run_times_the_phase_is_the_tick_figure() -> None:
    assert proc.cpu_delta_ms(proc.CpuSample(10.0, None), proc.CpuSample(30.0, 29.0)) == 20.0
    assert proc.cpu_delta_ms(proc.CpuSample(10.0, 9.0), proc.CpuSample(30.0, None)) == 20.0


def test_the_exact_figure_sees_what_ticks_cannot() -> None:
    """Five 3 ms bursts of a thread that stays alive: 15 ms exactly, within a millisecond
    (ticks would say 10 or 20)."""
    pid = os.getpid()
    go, done, stop = threading.Event(), threading.Event(), threading.Event()

    def bursts() -> None:
        go.wait(30)
        for _ in range(5):
            end = time.thread_time() + 0.003
            while time.thread_time() < end:
                pass
        done.set()
        stop.wait(30)

    worker = threading.Thread(target=bursts)
    worker.start()
    before = proc.cpu_sample(pid)
    go.set()
    assert done.wait(30)
    after = proc.cpu_sample(pid)
    stop.set()
    worker.join()
    assert before.run_ms is not None and after.run_ms is not None
    assert 15.0 <= after.run_ms - before.run_ms < 17.5
    assert 15.0 <= proc.cpu_delta_ms(before, after) < 17.5
    assert proc.cpu_sample(2**22 + 1) == proc.CpuSample(0.0, None)  # a process that is gone
