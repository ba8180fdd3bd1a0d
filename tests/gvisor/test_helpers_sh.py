"""``/snapready/rehydrate`` inside real gVisor, under dash (Debian) and busybox sh, across
``runsc checkpoint`` and ``runsc restore`` with a changed environment.

The program (``programs/rehydrate_loop.sh``) loops on ``rehydrate wait`` and, after a restore,
``eval "$(rehydrate env)"``, as the README shows; the helpers are mounted read-only at
``/snapready`` as the injected init container leaves them.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from tests.gvisor.conftest import PROGRAMS
from tests.gvisor.environments import (
    BASE,
    EXPECTED_NEW,
    EXPECTED_THIRD,
    IMAGE,
    INJECTED,
    NEW,
    NEW_RAW,
    REPORTED,
    THIRD,
)
from tests.support.gvisor import (
    Container,
    Rootfs,
    Runsc,
    image_files,
    oci_spec,
    parse_environ,
    parse_report,
)

IMAGE_FILES = ["checkpoint.img", "pages.img", "pages_meta.img"]
TRIGGER = {
    "dev.gvisor.internal.checkpoint.enable": "true",
    "dev.gvisor.internal.checkpoint.resume": "true",
}


def loop_spec(
    rootfs: Rootfs, env: list[str], mode: str = "wait", annotations: dict[str, str] | None = None
) -> dict[str, object]:
    args = [rootfs.shell, "/app/rehydrate_loop.sh", mode, *REPORTED]
    return oci_spec(rootfs, args, env, app_dir=PROGRAMS, annotations=annotations)


def checkpointed(runsc: Runsc, spec: dict[str, object], image: Path) -> Container:
    """Run ``spec`` until its loop waits for the first checkpoint, then checkpoint it into
    ``image`` (the sandbox stops); the container that was checkpointed."""
    original = runsc.run(spec)
    original.wait_for(r"^waiting 0$")
    runsc.checkpoint(original, image, leave_running=False)
    return original


def restored(runsc: Runsc, image: Path, spec: dict[str, object]) -> Container:
    container, status = runsc.restore(image, spec, NEW_RAW)
    assert status == 0, container.stderr.read_text()
    return container


def assert_rehydrated(container: Container, cycle: int, expected: dict[str, bytes | None]) -> None:
    """The shell's variables after ``eval "$(rehydrate env)"`` and the env ``exec`` passes on."""
    container.wait_for(rf"^answer{cycle} restore 0$")
    container.wait_for(rf"^exec{cycle} ")
    output = container.output()
    assert parse_report(output, f"env{cycle}") == expected
    (exec_line,) = [line for line in output.splitlines() if line.startswith(f"exec{cycle} ")]
    passed = dict(parse_environ(exec_line.split(" ", 1)[1]))
    assert {name: passed.get(name) for name in expected} == expected
    assert passed["my.var"] == b"not a shell name"  # env(1) takes any name; sh could not


def test_restore_lays_the_restoring_pods_env_over_the_shell(
    runsc: Runsc, shell_rootfs: Rootfs, tmp_path: Path
) -> None:
    checkpointed(runsc, loop_spec(shell_rootfs, BASE), tmp_path / "image")
    assert image_files(tmp_path / "image") == IMAGE_FILES

    copy = restored(runsc, tmp_path / "image", loop_spec(shell_rootfs, NEW))

    assert_rehydrated(copy, 1, EXPECTED_NEW)
    assert "skipped 'my.var'" in copy.stderr.read_text()  # env names what it cannot export


def test_a_restored_copy_checkpoints_and_restores_again(
    runsc: Runsc, shell_rootfs: Rootfs, tmp_path: Path
) -> None:
    checkpointed(runsc, loop_spec(shell_rootfs, BASE), tmp_path / "one")
    first = restored(runsc, tmp_path / "one", loop_spec(shell_rootfs, NEW))
    first.wait_for(r"^waiting 1$")

    runsc.checkpoint(first, tmp_path / "two", leave_running=False)
    second = restored(runsc, tmp_path / "two", loop_spec(shell_rootfs, THIRD))

    assert_rehydrated(second, 2, EXPECTED_THIRD)  # cycle 2: its memory holds the first restore


def test_leave_running_answers_resume_to_the_original(
    runsc: Runsc, shell_rootfs: Rootfs, tmp_path: Path
) -> None:
    original = runsc.run(loop_spec(shell_rootfs, BASE))
    original.wait_for(r"^waiting 0$")

    runsc.checkpoint(original, tmp_path / "image", leave_running=True)

    original.wait_for(r"^answer1 resume 0$")
    original.wait_for(r"^waiting 1$")  # the original runs on and waits for the next checkpoint
    assert "env1 " not in original.output()
    copy = restored(runsc, tmp_path / "image", loop_spec(shell_rootfs, NEW))
    assert_rehydrated(copy, 1, EXPECTED_NEW)


def trigger(image: Path) -> dict[str, str]:
    """GKE's workload trigger: the app may write ``1``; the image goes to ``image``, which runsc
    creates its files in when the sandbox starts (it refuses a folder that already holds them)."""
    image.mkdir()
    return {**TRIGGER, "dev.gvisor.internal.checkpoint.path": str(image)}


def test_workload_trigger_answers_resume_then_restore(
    runsc: Runsc, shell_rootfs: Rootfs, tmp_path: Path
) -> None:
    image = tmp_path / "image"
    original = runsc.run(loop_spec(shell_rootfs, BASE, "checkpoint", trigger(image)))

    original.wait_for(r"^answer1 resume 0$")
    assert image_files(image) == IMAGE_FILES
    original.wait_for(r"^waiting 1$")
    spec = loop_spec(shell_rootfs, NEW, "checkpoint", trigger(tmp_path / "next"))
    copy = restored(runsc, image, spec)
    assert_rehydrated(copy, 1, EXPECTED_NEW)


def test_workload_trigger_is_refused_without_the_enable_annotation(
    runsc: Runsc, shell_rootfs: Rootfs
) -> None:
    original = runsc.run(loop_spec(shell_rootfs, BASE, "checkpoint"))

    original.wait_for(r"^answer1  8$")
    assert "dev.gvisor.internal.checkpoint.enable" in original.stderr.read_text()


def watch_spec(rootfs: Rootfs, env: list[str]) -> dict[str, object]:
    """``rehydrate watch -- rehydrate_hook.sh NAME...`` (``programs/rehydrate_watch.sh``)."""
    args = [rootfs.shell, "/app/rehydrate_watch.sh", *REPORTED]
    return oci_spec(rootfs, args, env, app_dir=PROGRAMS)


def assert_hooked(container: Container, plain: str, expected: dict[str, bytes | None]) -> None:
    """The hook ``watch`` ran after the restore whose ``PLAIN`` is ``plain`` saw ``expected``."""
    container.wait_for(rf"^done-{plain}$", timeout=30)
    assert parse_report(container.output(), f"hook-{plain}") == expected


def test_watch_runs_its_command_after_each_restore_with_the_restoring_env(
    runsc: Runsc, shell_rootfs: Rootfs, tmp_path: Path
) -> None:
    original = runsc.run(watch_spec(shell_rootfs, BASE))
    original.wait_for(r"^watching$")
    runsc.checkpoint(original, tmp_path / "image", leave_running=False)

    copy = restored(runsc, tmp_path / "image", watch_spec(shell_rootfs, NEW))

    assert_hooked(copy, "new", EXPECTED_NEW)
    assert "hook-" not in original.output()  # the original never restored


def test_watch_sees_a_checkpoint_taken_while_its_command_runs(
    runsc: Runsc, shell_rootfs: Rootfs, tmp_path: Path
) -> None:
    """A real-runsc trial: the documented `while answer=$(rehydrate wait)` loop reopened the
    checkpoint file only after its (slow) command; a checkpoint taken meanwhile was never
    answered, and the copy restored from it kept the first restore's environment. ``watch``
    opens the next wait before it runs the command."""
    original = runsc.run(watch_spec(shell_rootfs, BASE))
    original.wait_for(r"^watching$")
    runsc.checkpoint(original, tmp_path / "one", leave_running=False)
    first = restored(runsc, tmp_path / "one", watch_spec(shell_rootfs, [*NEW, "SLOW_CALLBACK=8"]))
    first.wait_for(r"^slow-new$", timeout=30)  # the command is still running

    runsc.checkpoint(first, tmp_path / "two", leave_running=False)
    third = watch_spec(shell_rootfs, [*THIRD, "SLOW_CALLBACK=0"])
    second = restored(runsc, tmp_path / "two", third)

    second.wait_for(r"^slow-new done$", timeout=30)
    assert_hooked(second, "third", EXPECTED_THIRD)


def test_watch_goes_on_after_a_failed_checkpoint(
    runsc: Runsc, shell_rootfs: Rootfs, tmp_path: Path
) -> None:
    """A checkpoint that fails (its image does not fit: a 64 KiB tmpfs) answers ``error`` and
    leaves the process running; the documented loop ended there (``wait`` exits 6), so the
    next, good checkpoint's copy never rehydrated. ``watch`` notes it and waits on."""
    original = runsc.run(watch_spec(shell_rootfs, BASE))
    original.wait_for(r"^watching$")
    small = tmp_path / "small"
    small.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(small)], check=True)
    try:
        failed = runsc.call(
            "checkpoint", "--leave-running", "--image-path", str(small), original.cid, check=False
        )
    finally:
        subprocess.run(["umount", "-l", str(small)], check=False)
    assert failed.returncode != 0
    deadline = time.monotonic() + 20
    while "a checkpoint failed (error); still watching" not in original.stderr.read_text():
        assert time.monotonic() < deadline, original.stderr.read_text()
        time.sleep(0.05)

    runsc.checkpoint(original, tmp_path / "good", leave_running=False)
    copy = restored(runsc, tmp_path / "good", watch_spec(shell_rootfs, NEW))
    assert_hooked(copy, "new", EXPECTED_NEW)


def test_a_second_workload_trigger_is_refused_with_its_own_exit_code(
    runsc: Runsc, shell_rootfs: Rootfs, tmp_path: Path
) -> None:
    """gVisor takes one workload-triggered checkpoint per sandbox: the second write of ``1``
    fails (ENXIO). It was exit 8 with advice about the policy's trigger type, which was right;
    it is exit 9 and says what happened."""
    image = tmp_path / "image"
    original = runsc.run(loop_spec(shell_rootfs, BASE, "checkpoint-twice", trigger(image)))

    original.wait_for(r"^first resume 0$")
    original.wait_for(r"^second  9$")
    stderr = original.stderr.read_text()
    assert "refused to checkpoint" in stderr and "second workload-triggered" in stderr
    assert "trigger type workload?" not in stderr


def test_a_large_environment_round_trips_in_env_and_exec(
    runsc: Runsc, shell_rootfs: Rootfs
) -> None:
    """A 64 KiB value among 2,000 service-link variables (what ``enableServiceLinks`` gives a
    namespace with many Services): exact through ``env`` and ``exec``. The first version built
    its strings byte by byte and took 32-51 s on this input under gVisor (a real-runsc trial);
    the test only checks the bytes, the time is in docs/concepts/helpers.md."""
    big = "c" * 65_000 + "'\"\n$`x\\"
    services = [f"SVC_{i}_SERVICE_HOST=10.0.{i % 250}.{i % 200}" for i in range(2000)]
    env = [*IMAGE, *INJECTED, f"BIG={big}", *services]
    args = [shell_rootfs.shell, "/app/rehydrate_many.sh"]
    container = runsc.run(oci_spec(shell_rootfs, args, env, app_dir=PROGRAMS))
    container.wait_for(r"^finished$", timeout=120)
    output = container.output()
    assert parse_report(output, "env")["BIG"] == big.encode()
    assert "last 10.0.249.199" in output.splitlines()
    assert parse_report(output, "exec")["BIG"] == big.encode()
