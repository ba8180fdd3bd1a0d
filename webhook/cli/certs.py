"""``snapready certs``: write a CA and a serving certificate, print the caBundle."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from webhook.cli.common.output import fail
from webhook.server import certs


def register(subparsers: Any) -> None:
    """Add the ``certs`` subcommand."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "certs", help="generate a CA and serving certificate; print the base64 caBundle"
    )
    parser.add_argument("--out", type=Path, default=Path("certs"), help="output directory")
    parser.add_argument("--service", default="snapready", help="webhook Service name")
    parser.add_argument("--namespace", default="snapready", help="webhook Service namespace")
    parser.add_argument("--dns", action="append", default=[], help="extra DNS SAN (repeatable)")
    parser.add_argument("--ip", action="append", default=[], help="extra IP SAN (repeatable)")
    parser.add_argument("--force", action="store_true", help="overwrite existing files")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Generate the files (refusing to overwrite without ``--force``) and print the caBundle."""
    paths = certs.CertPaths(args.out)
    if paths.tls_key.exists() and not args.force:
        return fail(f"{paths.tls_key} exists; pass --force to replace the CA and certificate")
    try:
        certs.generate(
            args.out,
            service=args.service,
            namespace=args.namespace,
            dns_names=("localhost", *args.dns),
            ip_addresses=("127.0.0.1", *args.ip),
        )
    except (ValueError, OSError) as exc:
        return fail(str(exc))
    written = ", ".join(
        str(p) for p in (paths.ca_cert, paths.ca_key, paths.tls_cert, paths.tls_key)
    )
    sys.stderr.write(f"wrote {written} (keys 0600)\n")
    sys.stdout.write(certs.ca_bundle(paths.ca_cert) + "\n")
    return 0
