"""``snapready diff``: not built yet (placeholder so the CLI table is complete)."""

from __future__ import annotations

import argparse
from typing import Any

from webhook.cli.common import fail


def register(subparsers: Any) -> None:
    """Add the ``diff`` subcommand."""
    parser: argparse.ArgumentParser = subparsers.add_parser("diff", help="(not built yet)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Not built yet."""
    del args
    return fail("'diff' is not built yet")
