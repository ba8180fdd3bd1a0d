"""``snapready serve``: the HTTPS admission server."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from webhook.base.config import Settings, SourceSettings
from webhook.base.errors import ConfigError
from webhook.base.settings_errors import invalid_settings
from webhook.cli.common.options import add_settings_arguments, settings_from
from webhook.cli.common.output import fail
from webhook.server.logs import configure as configure_logging


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
    parser.add_argument(
        "--log-level",
        choices=["debug", "info", "warning", "error"],
        help="least severe log line written (default info; debug adds the redacted object)",
    )
    parser.add_argument("--metrics-port", type=int, help="plain-HTTP /metrics port (0: off)")
    parser.add_argument(
        "--source",
        choices=["files", "kube"],
        help="policy source: files (--policies, the default) or kube (list+watch the API server)",
    )
    parser.add_argument(
        "--kubeconfig",
        type=Path,
        help="kubeconfig for --source kube (implies it); default: the in-cluster service account",
    )
    parser.set_defaults(func=run)


def with_source_flags(settings: Settings, args: argparse.Namespace) -> Settings:
    """Apply ``--source``/``--kubeconfig`` on top of the other settings (flags win).

    Raises:
        ConfigError: the resulting source settings are invalid.
    """
    kind = args.source or ("kube" if args.kubeconfig is not None else None)
    updates = {"kind": kind, "kubeconfig": args.kubeconfig}
    updates = {key: value for key, value in updates.items() if value is not None}
    if not updates:
        return settings
    try:
        source = SourceSettings.model_validate({**settings.source.model_dump(), **updates})
    except ValidationError as exc:
        raise ConfigError(invalid_settings(exc)) from None
    return settings.model_copy(update={"source": source})


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
            "metrics_port": args.metrics_port,
        }.items()
        if value is not None
    }
    try:
        settings = settings_from(args, **({"server": server} if server else {}))
        settings = with_source_flags(settings, args)
    except ConfigError as exc:
        return fail(str(exc))
    configure_logging(settings.server.log_level)
    from webhook.server.runner import serve  # noqa: PLC0415 - keep CLI start-up light

    try:
        serve(settings)
    except (ConfigError, FileNotFoundError) as exc:
        return fail(str(exc))
    return 0
