"""``snapready_rehydrate``, the stdlib-only module apps import from ``/snapready``.

Same tricky files as the sh tool (``CASES``); the checkpoint file is a FIFO so reads really block.
"""

from __future__ import annotations

import ast
import errno
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.assets.test_helpers_sh import CASES, Case
from webhook.assets.helpers import snapready_rehydrate as rehydrate

HELPERS = Path(rehydrate.__file__).resolve().parent


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_read_spec_environ_parses_tricky_files(tmp_path: Path, case: Case) -> None:
    path = tmp_path / "spec_environ"
    path.write_bytes(case.raw)
    assert rehydrate.read_spec_environ(str(path)) == case.expected


def test_bytes_that_are_not_utf8_round_trip_or_are_replaced(tmp_path: Path) -> None:
    path = tmp_path / "spec_environ"
    path.write_bytes(b"BIN=\xff\x80ok\0")
    kept = rehydrate.read_spec_environ(str(path))["BIN"]
    assert kept.encode("utf-8", "surrogateescape") == b"\xff\x80ok"
    assert rehydrate.read_spec_environ(str(path), errors="replace")["BIN"] == "\ufffd\ufffdok"


def test_default_path_comes_from_the_injected_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "spec_environ"
    path.write_bytes(b"A=1\0")
    monkeypatch.setenv("SNAPREADY_SPEC_ENVIRON", str(path))
    assert rehydrate.read_spec_environ() == {"A": "1"}


def test_missing_file_raises_with_a_hint(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="SNAPREADY_SPEC_ENVIRON"):
        rehydrate.read_spec_environ(str(tmp_path / "absent"))


def test_refresh_environ_lays_the_file_over_os_environ(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "spec_environ"
    path.write_bytes(b"TOKEN=new\0EXTRA=\xffx\0")
    monkeypatch.setenv("TOKEN", "old")
    monkeypatch.setenv("UNTOUCHED", "kept")
    monkeypatch.delenv("EXTRA", raising=False)
    applied = rehydrate.refresh_environ(str(path))
    assert set(applied) == {"TOKEN", "EXTRA"}
    assert os.environ["TOKEN"] == "new"
    assert os.environ["UNTOUCHED"] == "kept"
    assert os.environb[b"EXTRA"] == b"\xffx"


def write_later(path: Path, data: bytes) -> threading.Thread:
    """Open the FIFO for writing in a thread (the reader blocks in open() until then)."""
    thread = threading.Thread(target=path.write_bytes, args=(data,), daemon=True)
    thread.start()
    return thread


@pytest.mark.parametrize(
    ("data", "answer"),
    [
        pytest.param(b"restore", "restore", id="restore"),
        pytest.param(b"resume\n", "resume", id="resume-with-newline"),
        pytest.param(b"error\0", "error", id="error-with-nul"),
    ],
)
def test_wait_for_checkpoint_blocks_until_an_answer(
    tmp_path: Path, data: bytes, answer: str
) -> None:
    fifo = tmp_path / "checkpoint"
    os.mkfifo(fifo)
    writer = write_later(fifo, data)
    assert rehydrate.wait_for_checkpoint(str(fifo)) == answer
    writer.join(10)


def test_checkpoint_now_missing_file_raises_with_a_hint(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="SNAPREADY_CHECKPOINT"):
        rehydrate.checkpoint_now(str(tmp_path / "absent"))


def test_wait_for_checkpoint_missing_file_raises(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="SNAPREADY_CHECKPOINT"):
        rehydrate.wait_for_checkpoint(str(tmp_path / "absent"))


def scripted(*answers: str) -> Callable[[str | None], Iterator[str]]:
    """A stand-in for ``_checkpoint_events`` giving ``answers``, then "file gone" (ends the loop).

    The FIFO tests above cover the blocking read; scripted events check the loop's reactions
    without racing a pipe.
    """

    def events(path: str | None = None) -> Iterator[str]:
        yield from answers

    return events


def test_on_restore_refreshes_then_calls_back_only_on_restore(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        rehydrate, "_checkpoint_events", scripted("resume", "restore", "", "error", "restore")
    )
    monkeypatch.setattr(rehydrate, "_EMPTY_READ_PAUSE_SECONDS", 0.0)
    spec = tmp_path / "spec_environ"
    spec.write_bytes(b"ROLE=restored\0")
    monkeypatch.setenv("ROLE", "original")
    seen: list[str] = []

    def callback() -> None:
        seen.append(os.environ["ROLE"])
        if len(seen) == 1:
            raise RuntimeError("the app's callback failed; the watcher must go on")

    thread = rehydrate.on_restore(callback, path="ckpt", spec_environ=str(spec))
    thread.join(10)
    assert not thread.is_alive()
    assert seen == ["restored", "restored"]


def test_on_restore_without_refresh_leaves_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(rehydrate, "_checkpoint_events", scripted("restore"))
    monkeypatch.setattr(rehydrate, "_EMPTY_READ_PAUSE_SECONDS", 0.0)
    monkeypatch.setenv("SNAPREADY_SPEC_ENVIRON", str(tmp_path / "absent"))
    calls: list[bool] = []
    thread = rehydrate.on_restore(lambda: calls.append(True), refresh=False)
    thread.join(10)
    assert calls == [True]


def test_the_next_wait_is_open_before_the_callback_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """gVisor counts a descriptor's checkpoint from its open: a loop that opened the next wait
    only after a slow callback missed a checkpoint taken meanwhile, and that restored copy kept
    the old environment (a real-runsc trial; ``tests/gvisor`` replays it). The order of opens,
    reads and the callback, with the file's answers scripted."""
    log: list[str] = []
    answers = iter([b"restore\n", b"restore\n"])
    descriptors = iter(range(100, 200))

    def fake_open(path: str, flags: int) -> int:
        if len([e for e in log if e.startswith("open")]) == 2:
            raise FileNotFoundError(path)  # the third wait cannot open: the loop ends
        fd = next(descriptors)
        log.append(f"open {fd}")
        return fd

    def fake_read(fd: int, size: int) -> bytes:
        log.append(f"read {fd}")
        return next(answers)

    monkeypatch.setattr(rehydrate, "_open_checkpoint", fake_open)
    monkeypatch.setattr(vars(rehydrate)["os"], "read", fake_read)
    monkeypatch.setattr(vars(rehydrate)["os"], "close", lambda fd: log.append(f"close {fd}"))
    spec = tmp_path / "spec_environ"
    spec.write_bytes(b"ROLE=restored\0")
    thread = rehydrate.on_restore(lambda: log.append("callback"), spec_environ=str(spec))
    thread.join(10)
    assert log == [
        "open 100", "read 100", "open 101", "close 100", "callback",
        "read 101", "close 101", "callback",  # no third open: this answer still calls back
    ]  # fmt: skip


def test_an_empty_spec_environ_is_said_on_restore(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(rehydrate, "_checkpoint_events", scripted("restore"))
    spec = tmp_path / "spec_environ"
    spec.write_bytes(b"")
    calls: list[bool] = []
    rehydrate.on_restore(lambda: calls.append(True), spec_environ=str(spec)).join(10)
    assert calls == [True]
    assert f"{spec} is empty" in capsys.readouterr().err


def test_a_refused_second_trigger_says_why(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """gVisor answers a second workload trigger in one sandbox with ENXIO on the write; the
    bare ``OSError [Errno 6]`` said nothing of it."""
    target = tmp_path / "checkpoint"
    target.write_bytes(b"")

    def refused(fd: int, data: bytes) -> int:
        raise OSError(errno.ENXIO, os.strerror(errno.ENXIO))

    monkeypatch.setattr(vars(rehydrate)["os"], "write", refused)
    with pytest.raises(OSError, match="second workload-triggered checkpoint") as raised:
        rehydrate.checkpoint_now(str(target))
    assert raised.value.errno == errno.ENXIO


def test_on_restore_thread_ends_when_the_file_is_missing(tmp_path: Path) -> None:
    thread = rehydrate.on_restore(lambda: None, path=str(tmp_path / "absent"))
    thread.join(10)
    assert not thread.is_alive()
    assert thread.daemon


def test_module_imports_standalone_from_a_helpers_directory(tmp_path: Path) -> None:
    """As an app does: only the copied directory on sys.path, no site-packages, no project."""
    target = tmp_path / "snapready"
    shutil.copytree(HELPERS, target, ignore=shutil.ignore_patterns("__pycache__"))
    spec = tmp_path / "spec_environ"
    spec.write_bytes(b"A=x=y\0")
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); import snapready_rehydrate as r;"
        "print(r.read_spec_environ(sys.argv[2])['A'])"
    )
    result = subprocess.run(
        [sys.executable, "-I", "-S", "-c", code, str(target), str(spec)],
        capture_output=True,
        text=True,
        check=False,
        timeout=30,
    )
    assert (result.returncode, result.stdout) == (0, "x=y\n"), result.stderr


def test_module_parses_as_python_3_8_and_imports_only_the_standard_library() -> None:
    tree = ast.parse((HELPERS / "snapready_rehydrate.py").read_text(), feature_version=(3, 8))
    imported = {
        alias.name.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    } | {
        (node.module or "").split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
    }
    assert imported <= set(sys.stdlib_module_names) | {"__future__"}
