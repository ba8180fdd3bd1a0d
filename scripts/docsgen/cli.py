"""The CLI reference, from the argparse parsers the ``snapready`` entry point builds.

Each command gets its usage line, its description and one row per option; ``missing_help``
lists the options without help text, which tests/docs/ holds at none.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator


def commands(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """``parser`` and every subcommand's parser below it, as (command path, parser)."""
    yield path or (parser.prog,), parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from commands(sub, (path or (parser.prog,)) + (name,))


def _options(parser: argparse.ArgumentParser) -> Iterator[argparse.Action]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction | argparse._HelpAction):
            continue
        if action.help == argparse.SUPPRESS:
            continue
        yield action


def flag_names(action: argparse.Action) -> str:
    """``--format`` / ``-n, --namespace`` / the positional's metavar."""
    if action.option_strings:
        return ", ".join(action.option_strings)
    return str(action.metavar or action.dest)


def _default(action: argparse.Action) -> str:
    if not action.option_strings or action.default in (None, argparse.SUPPRESS, False):
        return ""
    if isinstance(action, argparse._StoreConstAction | argparse._AppendConstAction):
        return ""
    default = action.default
    if isinstance(default, set | frozenset):
        return f"`{','.join(sorted(map(str, default)))}`"
    if isinstance(default, list | tuple):
        return f"`{','.join(map(str, default))}`" if default else ""
    return f"`{default}`"


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def render(parser: argparse.ArgumentParser) -> str:
    """Markdown: a section per command, usage in a code block and a table of its options."""
    out: list[str] = []
    for path, sub in commands(parser):
        name = " ".join(path)
        anchor = "-".join(path)
        out += [f"### `{name}` {{ #{anchor} }}", ""]
        if sub.description and "\n" in sub.description.strip():
            out += ["```text", sub.description.strip(), "```", ""]
        elif sub.description:
            out += [_cell(sub.description), ""]
        usage = " ".join(sub.format_usage().removeprefix("usage: ").split())
        out += ["```text", usage, "```", ""]
        rows = list(_options(sub))
        if rows:
            out += ["| option | default | what it does |", "|---|---|---|"]
            for action in rows:
                choices = ""
                if action.choices and not isinstance(action, argparse._SubParsersAction):
                    choices = " (one of " + ", ".join(f"`{c}`" for c in action.choices) + ")"
                help_text = _cell(sub._get_formatter()._expand_help(action)) if action.help else ""
                names = f"`{flag_names(action)}`"
                out.append(f"| {names} | {_default(action)} | {help_text}{choices} |")
            out.append("")
        if sub.epilog:
            out += ["```text", sub.epilog.strip(), "```", ""]
    return "\n".join(out)


def missing_help(parser: argparse.ArgumentParser) -> list[str]:
    """Options the reference could not describe: no help text (``snapready serve --x``)."""
    return [
        f"{' '.join(path)} {flag_names(action)}"
        for path, sub in commands(parser)
        for action in _options(sub)
        if not action.help
    ]
