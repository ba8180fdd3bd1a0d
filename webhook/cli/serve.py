"""``snapready serve``: the HTTPS admission server."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path
from typing import Any

from webhook.cli.common import add_settings_arguments, fail, settings_from
from webhook.errors import ConfigError


def register(subparsers: Any) -> None:
    """Add the ``serve`` subcommand."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "serve", help="run the HTTPS admission webhook server"
    )
    add_settings_arguments(parser)
    parser.add_argument("--host", help="listen address (default 127.0.0.1)")
    parser.add_argument("--port", type=int, help="HTTPS port (default 8443)")
    parser.add_argument("--cert-file", type=Path, help="PEM serving certificate")
    parser.add_argument("--key-file", type=Path, help="PEM private key")
    parser.add_argument("--log-level", choices=["debug", "info", "warning", "error"])
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Start the server; returns 2 on invalid settings or policy files."""
    server = {
        key: value
        for key, value in {
            "host": args.host,
            "port": args.port,
            "cert_file": args.cert_file,
            "key_file": args.key_file,
            "log_level": args.log_level,
        }.items()
        if value is not None
    }
    try:
        settings = settings_from(args, **({"server": server} if server else {}))
    except ConfigError as exc:
        return fail(str(exc))
    logging.basicConfig(
        level=settings.server.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s %(message)s",
    )
    from webhook.server import serve  # noqa: PLC0415 - keep CLI start-up light

    try:
        serve(settings)
    except (ConfigError, FileNotFoundError) as exc:
        return fail(str(exc))
    return 0
