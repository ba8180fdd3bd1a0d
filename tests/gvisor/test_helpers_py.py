"""``snapready_rehydrate`` inside real gVisor (python3 of a Debian root), across ``runsc
checkpoint`` and ``runsc restore`` with a changed environment.

The program (``programs/rehydrate_app.py``) registers ``on_restore(callback)`` as the README shows
and loops on ``wait_for_checkpoint`` in its main thread; the callback reports ``os.environ`` and
what a child process inherits.
"""

from __future__ import annotations

from pathlib import Path

from tests.gvisor.conftest import PROGRAMS
from tests.gvisor.environments import (
    BASE,
    EXPECTED_NEW,
    EXPECTED_THIRD,
    NEW,
    REPORTED,
    THIRD,
)
from tests.gvisor.test_helpers_sh import IMAGE_FILES, checkpointed, restored, trigger
from tests.support.gvisor import Container, Rootfs, Runsc, image_files, oci_spec, parse_environ

ADDED_NAMES = ["my.var"]


def app_spec(
    rootfs: Rootfs, env: list[str], mode: str = "wait", annotations: dict[str, str] | None = None
) -> dict[str, object]:
    args = ["/usr/bin/python3", "-u", "/app/rehydrate_app.py", mode, *REPORTED, *ADDED_NAMES]
    return oci_spec(rootfs, args, env, app_dir=PROGRAMS, annotations=annotations)


def assert_rehydrated(container: Container, calls: int, expected: dict[str, bytes | None]) -> None:
    """The ``calls``-th callback saw ``expected`` in ``os.environ`` and in a child's environ."""
    container.wait_for(rf"^child{calls} ")
    output = container.output().splitlines()
    seen = {}
    for line in output:
        tag, _, entry = line.partition(" ")
        if tag == f"env{calls}" and not entry.endswith(" unset"):
            name, _, hexed = entry.rpartition("=")
            seen[name] = bytes.fromhex(hexed)
    assert {name: seen.get(name) for name in expected} == expected
    assert seen["my.var"] == b"not a shell name"
    (child_line,) = [line for line in output if line.startswith(f"child{calls} ")]
    child = dict(parse_environ(child_line.split(" ", 1)[1]))
    assert {name: child.get(name) for name in expected} == expected
    assert [line for line in output if line.startswith("callback ")] == [f"callback {calls}"]


def test_on_restore_refreshes_os_environ_and_calls_back_once(
    runsc: Runsc, debian: Rootfs, tmp_path: Path
) -> None:
    checkpointed(runsc, app_spec(debian, BASE), tmp_path / "image")

    copy = restored(runsc, tmp_path / "image", app_spec(debian, NEW))

    copy.wait_for(r"^answer1 restore$")
    assert_rehydrated(copy, 1, EXPECTED_NEW)
    copy.wait_for(r"^waiting 1$")  # both loops wait again, callback not repeated
    assert copy.output().count("callback ") == 1


def test_a_restored_copy_checkpoints_and_restores_again(
    runsc: Runsc, debian: Rootfs, tmp_path: Path
) -> None:
    checkpointed(runsc, app_spec(debian, BASE), tmp_path / "one")
    first = restored(runsc, tmp_path / "one", app_spec(debian, NEW))
    first.wait_for(r"^waiting 1$")

    runsc.checkpoint(first, tmp_path / "two", leave_running=False)
    second = restored(runsc, tmp_path / "two", app_spec(debian, THIRD))

    second.wait_for(r"^answer2 restore$")
    assert_rehydrated(second, 2, EXPECTED_THIRD)  # the second callback of this memory


def test_leave_running_answers_resume_and_does_not_rehydrate(
    runsc: Runsc, debian: Rootfs, tmp_path: Path
) -> None:
    original = runsc.run(app_spec(debian, BASE))
    original.wait_for(r"^waiting 0$")

    runsc.checkpoint(original, tmp_path / "resume", leave_running=True)

    original.wait_for(r"^answer1 resume$")
    original.wait_for(r"^waiting 1$")
    assert "callback" not in original.output()
    runsc.checkpoint(original, tmp_path / "image", leave_running=False)
    copy = restored(runsc, tmp_path / "image", app_spec(debian, NEW))
    copy.wait_for(r"^answer2 restore$")
    assert_rehydrated(copy, 1, EXPECTED_NEW)  # the first callback: resume did not run it


def test_checkpoint_now_answers_resume_then_restore(
    runsc: Runsc, debian: Rootfs, tmp_path: Path
) -> None:
    image = tmp_path / "image"
    original = runsc.run(app_spec(debian, BASE, "checkpoint", trigger(image)))

    original.wait_for(r"^answer1 resume$")
    assert image_files(image) == IMAGE_FILES
    original.wait_for(r"^waiting 1$")
    assert "callback" not in original.output()
    spec = app_spec(debian, NEW, "checkpoint", trigger(tmp_path / "next"))
    copy = restored(runsc, image, spec)
    copy.wait_for(r"^answer1 restore$")
    assert_rehydrated(copy, 1, EXPECTED_NEW)


def test_checkpoint_now_is_refused_without_the_enable_annotation(
    runsc: Runsc, debian: Rootfs
) -> None:
    original = runsc.run(app_spec(debian, BASE, "checkpoint"))

    line = original.wait_for(r"^answer1 refused .*$").group(0)
    assert "PermissionError" in line
    assert "dev.gvisor.internal.checkpoint.enable" in line


def test_a_checkpoint_taken_while_the_callback_runs_is_not_missed(
    runsc: Runsc, debian: Rootfs, tmp_path: Path
) -> None:
    """A real-runsc trial: the first restore's callback was still running (a slow reconnect)
    when the copy was checkpointed again; restored from that, the copy never called back and
    kept the first restore's environment, because the watcher opened its next wait only after
    the callback (gVisor counts a wait from its open). It is opened before the callback now."""
    checkpointed(runsc, app_spec(debian, BASE), tmp_path / "one")
    first = restored(runsc, tmp_path / "one", app_spec(debian, [*NEW, "SLOW_CALLBACK=8"]))
    first.wait_for(r"^slow 1$")  # the callback sleeps: its report is out, it has not returned

    runsc.checkpoint(first, tmp_path / "two", leave_running=False)
    second = restored(runsc, tmp_path / "two", app_spec(debian, [*THIRD, "SLOW_CALLBACK=0"]))

    second.wait_for(r"^slow 1 done$", timeout=30)  # the first callback returns in the copy
    second.wait_for(r"^child2 ", timeout=30)
    assert_rehydrated(second, 2, EXPECTED_THIRD)
