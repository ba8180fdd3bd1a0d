"""The frame of the commands that read the cluster (``status``, ``explain``).

Flags (``--kubeconfig``, ``--format``, ``--config``), the connection (``cluster.api.client``,
imported only when a command connects, so ``snapready hash`` starts fast), one read through
``cluster.api.snapshot_reader`` that builds the command's report, then the report as JSON or text
and the reading's notes on stderr. Errors: ``ConfigError`` (kubeconfig, settings, no such pod)
and ``READ_ERRORS`` (the API server unreachable or refusing) become one ``snapready: ...``
line and exit 2; anything else too (``internal error``), never a traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from webhook.base.config import Settings
from webhook.base.errors import ConfigError
from webhook.base.text import clip
from webhook.cli.common.options import add_settings_arguments, settings_from
from webhook.cli.common.output import fail, internal_error, print_json
from webhook.cluster.api.snapshot_reader import READ_ERRORS

if TYPE_CHECKING:  # the kubernetes client is imported only when a command connects
    from webhook.cluster.api.client import Connection

FORMAT_VERSION = 1
"""Bumped only on an incompatible change of either command's JSON document."""


Reader = Callable[["Connection", Settings], tuple[dict[str, Any], list[str]]]
"""Reads the cluster through the connection and builds a command's report; returns the report
and notes for stderr. May raise ``ConfigError`` (bad input) or ``READ_ERRORS``."""


def run_reader(
    args: argparse.Namespace, read: Reader, render: Callable[[dict[str, Any]], str]
) -> int:
    """What ``status`` and ``explain`` share: settings, connection, read (closing it after),
    output as ``--format`` says, notes on stderr; 0, or 2 with one ``snapready: ...`` line and
    never a traceback."""
    try:
        try:
            settings = settings_from(args)
            connection = open_connection(args, settings)
        except ConfigError as exc:
            return fail(str(exc))
        try:
            report, notes = read(connection, settings)
        except ConfigError as exc:
            return fail(str(exc))
        except READ_ERRORS as exc:
            return fail(read_error(exc, connection))
        finally:
            connection.close()
        if args.format == "json":
            print_json(report)
        else:
            sys.stdout.write(render(report))
        for note in notes:
            sys.stderr.write(f"snapready: note: {note}\n")
        return 0
    except Exception as exc:  # the last line: a message, never a traceback
        return internal_error(exc)


def read_error(exc: Exception, connection: Connection) -> str:
    """One line for a failed read; a connection failure names the server and its root cause
    (urllib3 keeps it as the ``reason`` of the error the transport replaced)."""
    cause = getattr(exc.__context__, "reason", None)
    if isinstance(cause, Exception):
        text = clip(str(cause).rsplit("): ", 1)[-1], 160)
        return f"cannot reach the API server {connection.host} ({connection.where}): {text}"
    return f"cannot read the cluster ({connection.where}): {exc}"


def add_cluster_arguments(parser: argparse.ArgumentParser) -> None:
    """``--kubeconfig``, ``--format`` and the settings arguments (``--config``)."""
    parser.add_argument(
        "--kubeconfig",
        type=Path,
        help="kubeconfig (default: $KUBECONFIG, else ~/.kube/config, else in-cluster)",
    )
    parser.add_argument("--format", choices=["text", "json"], default="text", help="output format")
    add_settings_arguments(parser, policies=False)  # the cluster's policies, not files


def open_connection(args: argparse.Namespace, settings: Settings) -> Connection:
    """``--kubeconfig``, else ``source.kubeconfig`` of the settings, else kubectl's defaults.

    Raises:
        ConfigError: the configuration cannot be loaded.
    """
    kubeconfig = args.kubeconfig or settings.source.kubeconfig
    if kubeconfig is not None and not Path(kubeconfig).exists():
        raise ConfigError(f"kubeconfig {kubeconfig}: no such file")
    if kubeconfig is not None and not Path(kubeconfig).is_file():
        raise ConfigError(f"kubeconfig {kubeconfig}: not a regular file")
    from webhook.cluster.api.client import connect  # noqa: PLC0415 - keep `snapready hash` fast

    return connect(kubeconfig, request_timeout=settings.source.request_timeout_seconds)
