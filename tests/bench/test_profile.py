"""The py-spy summary of ``make bench-cluster --profile``: only the event loop's busy samples."""

from __future__ import annotations

from pathlib import Path

from bench.harness.profile import area, short_frame, summarise_profile

RAW = "\n".join(
    [
        "MainThread: 1;run (uvicorn/server.py:60);admit (webhook/admission/engine.py:40);"
        "distill (webhook/pod/distill.py:12) 30",
        "MainThread: 1;run (uvicorn/server.py:60);SSL_write (libssl.so.3) 10",
        "MainThread: 1;run (uvicorn/server.py:60);epoll_wait (libc.so.6) 500",
        "Thread 7: reflector;watch (webhook/cluster/reflector.py:9) 4",
        "not a stack line",
    ]
)


def test_frames_lose_their_line_numbers() -> None:
    assert short_frame(" admit (webhook/admission/engine.py:40) ") == (
        "admit (webhook/admission/engine.py)"
    )
    assert short_frame("0x7f00") == "0x7f00"


def test_areas_are_webhook_folders_or_libraries() -> None:
    assert area("distill (webhook/pod/distill.py:12)") == "webhook/pod"
    assert area("SSL_write (libssl.so.3)") == "OpenSSL (libssl)"
    assert area("PyObject_Call (Objects/call.c)") == "CPython runtime"


def test_summary_counts_the_event_loop_busy_samples_only(tmp_path: Path) -> None:
    raw = tmp_path / "snapready.collapsed.txt"
    raw.write_text(RAW)
    summary = summarise_profile(raw)
    assert summary.startswith("event-loop thread: 40 busy samples, 500 waiting (epoll)")
    assert "other threads: 4 busy, 0 waiting" in summary
    assert " 75.0%  distill (webhook/pod/distill.py)" in summary  # 30 of 40, a leaf
    assert " 75.0%  webhook/pod" in summary
    assert " 25.0%  OpenSSL (libssl)" in summary


def test_no_busy_samples_says_so(tmp_path: Path) -> None:
    raw = tmp_path / "idle.txt"
    raw.write_text("MainThread: 1;epoll_wait (libc.so.6) 9\n")
    assert summarise_profile(raw).endswith("no active samples of the event-loop thread")


def test_every_thread_counts_the_reflector_too(tmp_path: Path) -> None:
    raw = tmp_path / "sync.collapsed.txt"
    raw.write_text(RAW)
    summary = summarise_profile(raw, thread=None)
    assert summary.startswith("every thread: 44 busy samples, 500 waiting")
    assert "     4  reflector" in summary  # busy samples by thread, the reflector's included
    assert " 68.2%  distill (webhook/pod/distill.py)" in summary  # 30 of 44
