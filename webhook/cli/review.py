"""``snapready review FILE|-``: run one AdmissionReview through the handlers, print the response."""

from __future__ import annotations

import argparse
import base64
from typing import Any

import orjson

from webhook.admission.engine import admit
from webhook.base.errors import BadRequest, ConfigError
from webhook.cli.common.inputs import read_source
from webhook.cli.common.options import add_settings_arguments, settings_from
from webhook.cli.common.output import fail, print_json
from webhook.kube.responses import HTTP_BAD_REQUEST, finalize, malformed_review
from webhook.kube.review import api_version_hint, parse_review


def register(subparsers: Any) -> None:
    """Add the ``review`` subcommand."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "review",
        help="answer one AdmissionReview file in-process (debugging)",
        epilog="exit status:\n  0  the answer allows the object\n  1  the answer denies it\n"
        "  2  the input cannot be read or parsed, or (after the answer) the review is malformed "
        "and answered with a 400",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("file", help="AdmissionReview JSON file, or - for stdin")
    parser.add_argument(
        "--endpoint",
        choices=["mutate", "validate"],
        default="mutate",
        help="which webhook to act as (default mutate)",
    )
    add_settings_arguments(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Print the response review; the decoded patch is added as ``response.patchDecoded``.

    Exit status: 0 when the answer allows the object, 1 when it denies it (as ``check`` and the
    other subcommands: 1 is a finding, so a CI step running ``review`` fails on a denial); 2
    when the input cannot be read or parsed
    (a message on stderr), and also 2, after printing the answer, when the review is malformed
    but its uid is known, so the server answers with a 400 denial (``request.object`` not an
    object, missing from a CREATE or UPDATE or contradicting ``request.kind``, an unknown
    operation...): the printed answer is
    the server's, and a CI step does not take a broken review for a checked one.
    """
    try:
        settings = settings_from(args)
        from webhook.server.runner import build_engine  # noqa: PLC0415 - lazy

        engine = build_engine(settings)
        body = read_source(args.file)
        review = parse_review(body)
    except ConfigError as exc:
        return fail(str(exc))
    except BadRequest as exc:
        if exc.uid is None:
            return fail(str(exc))
        # The uid is known: the server answers with a 400 review; print the same, exit 2.
        print_json(malformed_review(str(exc), uid=exc.uid, api_version=api_version_hint(body)))
        return 2
    decision = admit(review.request, args.endpoint, engine)
    wire = finalize(decision, uid=review.request.uid, api_version=review.api_version)
    response = wire["response"]
    if "patch" in response:
        response["patchDecoded"] = orjson.loads(base64.b64decode(response["patch"]))
    print_json(wire)
    if decision.code == HTTP_BAD_REQUEST:
        return 2
    return 0 if decision.allowed else 1
