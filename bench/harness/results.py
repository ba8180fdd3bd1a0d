"""A benchmark's report as a docs page: with ``--docs`` a run also writes what it printed to
``docs/performance/<name>.md``, which the docs' Performance page includes. So the tables on the
site are the benchmark's own output, with the command, commit, date and machine they came from,
never figures copied by hand.

Markdown tables (the harness prints its tables as Markdown, ``stats.markdown_table``) are kept
as tables; every other run of lines goes into a ``text`` block, as the terminal showed it.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import io
import os
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TextIO

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs" / "performance"


def add_flag(parser: argparse.ArgumentParser) -> None:
    """The ``--docs`` flag every benchmark takes."""
    parser.add_argument(
        "--docs",
        action="store_true",
        help="also write this run's report to docs/performance/<benchmark>.md (the docs' "
        "Performance page includes it); commit it with the change it measures",
    )


class _Tee(io.TextIOBase):
    """Writes go to the terminal and to a buffer."""

    def __init__(self, *streams: TextIO) -> None:
        self.streams = streams

    def write(self, text: str) -> int:
        for stream in self.streams:
            stream.write(text)
        return len(text)

    def flush(self) -> None:
        for stream in self.streams:
            stream.flush()


def as_markdown(output: str) -> str:
    """``output`` as Markdown: table lines as they are, other lines in ``text`` blocks."""
    out: list[str] = []
    block: list[str] = []

    def close() -> None:
        while block and not block[-1].strip():
            block.pop()
        if block:
            out.extend(["```text", *block, "```", ""])
        block.clear()

    for line in output.splitlines():
        if line.startswith("|") and line.rstrip().endswith("|"):
            close()
            if out and out[-1] != "" and not out[-1].startswith("|"):
                out.append("")
            out.append(line.rstrip())
        else:
            if out and out[-1].startswith("|"):
                out.append("")
            if block or line.strip():
                block.append(line.rstrip())
    close()
    return "\n".join(out).rstrip() + "\n"


def _commit() -> str:
    try:
        found = subprocess.run(
            ["git", "-C", str(ROOT), "describe", "--always", "--dirty"],
            capture_output=True, text=True, check=True, timeout=10,
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return found.stdout.strip()


def page(
    name: str, output: str, argv: Sequence[str], *, commit: str, when: str, load: float
) -> str:
    """The Markdown page of one run of benchmark ``name`` (``load``: the machine's 1-minute load
    average when it ended, since the figures of a shared machine move with it)."""
    command = " ".join(["python -m bench." + name, *argv])
    head = [
        f"<!-- Written by `{command} --docs`; rerun it to update this file. -->",
        "",
        f"`{command}` on `{commit}`, {when}, {os.cpu_count()} CPUs, load average {load:.2f} at"
        " the end:",
        "",
    ]
    return "\n".join(head) + "\n" + as_markdown(output)


@contextlib.contextmanager
def recorded(name: str, enabled: bool, argv: Sequence[str] | None = None) -> Iterator[None]:
    """Run the body; with ``enabled``, write what it printed to ``docs/performance/<name>.md``."""
    if not enabled:
        yield
        return
    buffer = io.StringIO()
    with contextlib.redirect_stdout(_Tee(sys.stdout, buffer)):
        yield
    args = [a for a in (sys.argv[1:] if argv is None else argv) if a != "--docs"]
    when = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    DOCS.mkdir(parents=True, exist_ok=True)
    target = DOCS / f"{name}.md"
    load = os.getloadavg()[0]
    text = page(name, buffer.getvalue(), args, commit=_commit(), when=when, load=load)
    target.write_text(text)
    print(f"report written to {target.relative_to(ROOT)}", file=sys.stderr)
