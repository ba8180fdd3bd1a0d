"""The ``snapready`` command line: one entry point, one module (or package) per subcommand.

A command with parts is a package (``check/``, ``status/``, ``explain/``: ``register`` and
``run`` in its ``__init__``, its parts beside them); one without (``serve``, ``certs``,
``review``, ``hash``, ``diff``: one module of at most ~150 lines each) stays a module. Commands
never import each other: what several use lives in ``cli.common`` (import-linter contracts in
``pyproject.toml``).

Exit codes shared by every subcommand: 0 success, 1 a finding/denial/difference, 2 bad input or
usage (argparse also uses 2).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from webhook import __version__

COMMANDS = ("serve", "certs", "review", "hash", "diff", "check", "status", "explain")
"""Subcommands under ``webhook.cli`` (a module, or a package when the command has parts);
each defines ``register(subparsers)``."""

EXIT_OK = 0
EXIT_FINDINGS = 1
EXIT_BAD_INPUT = 2


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser with every subcommand registered."""
    parser = argparse.ArgumentParser(
        prog="snapready",
        description="Admission webhook and CI tool for GKE Pod snapshot readiness.",
    )
    parser.add_argument("--version", action="version", version=f"snapready {__version__}")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        module = importlib.import_module(f"webhook.cli.{name}")
        module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` and run the chosen subcommand; returns its exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    code: int = args.func(args)
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
