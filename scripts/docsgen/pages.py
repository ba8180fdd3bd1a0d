"""The generated parts of the pages: a marker ``<!-- snapready:NAME -->`` in a page becomes NAME's
reference, built from the code at build time (the hook calls ``expand``).

Markers: ``settings``, ``cli``, ``metrics``, ``alerts``, ``chart-values``, ``rules`` (the index of
every rule id, from the code and the rule pages' front matter), ``rule`` (on a rule page: the
modules that raise it) and ``bench-results`` (the reports the benchmarks wrote with ``--docs``).
An unknown marker is an error, so a typo cannot leave a hole in a page.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from pathlib import Path

import yaml

from scripts.docsgen import chart, cli, metrics, rules, settings
from webhook.base.config import Settings
from webhook.cli import build_parser

MARKER = re.compile(r"<!-- snapready:([a-z-]+) -->")


class MarkerError(ValueError):
    """A page names a marker that does not exist, or uses ``rule`` off a rule page."""


def front_matter(page: Path) -> dict[str, str]:
    """The YAML front matter of ``page`` (empty when it has none)."""
    text = page.read_text()
    if not text.startswith("---\n"):
        return {}
    data = yaml.safe_load(text[4 : text.index("\n---", 4)])
    return {str(k): str(v) for k, v in (data or {}).items()}


def _settings(root: Path) -> str:
    return settings.render(Settings)


def _cli(root: Path) -> str:
    return cli.render(build_parser())


@functools.cache
def _rule_ids(package: Path) -> dict[str, list[str]]:
    """``rules.rule_ids``, once per build (every rule page asks)."""
    return rules.rule_ids(package)


def _rules_index(root: Path) -> str:
    found = _rule_ids(root / "webhook")
    out = ["| rule id | applies to | default | checks |", "|---|---|---|---|"]
    for rule in found:
        meta = front_matter(root / "docs" / "rules" / f"{rule}.md")
        summary = meta.get("summary", "").replace("|", "\\|")
        row = f"| [`{rule}`]({rule}.md) | {meta.get('applies', '')} | {meta.get('default', '')} |"
        out.append(f"{row} {summary} |")
    return "\n".join(out) + "\n"


def _rule(root: Path, page: str) -> str:
    if not page.startswith("rules/"):
        raise MarkerError(f"{page}: the rule marker belongs on a rule page")
    rule = Path(page).stem
    found = _rule_ids(root / "webhook")
    if rule not in found:
        raise MarkerError(f"{page}: no finding in the code carries rule id {rule!r}")
    modules = ", ".join(f"`{m}`" for m in found[rule])
    return f"Raised by {modules}. Rule id in findings, metrics and reports: `{rule}`.\n"


BENCHMARKS = {
    "cluster": "Real path: `make bench-cluster`",
    "admit": "In-process admission: `make bench-admit`",
    "scale": "Scale: `make bench-scale`",
    "throughput": "In-process and hey: `make bench`",
    "cli": "The CLI on hostile and large input: `make bench-cli`",
}


def _bench_results(root: Path) -> str:
    """Each benchmark's last ``--docs`` report (docs/performance/<name>.md, written by
    ``bench.harness.results``), or how to record one."""
    out: list[str] = []
    for name, title in BENCHMARKS.items():
        out += [f"### {title} {{ #results-{name} }}", ""]
        report = root / "docs" / "performance" / f"{name}.md"
        if report.is_file():
            out += [report.read_text().rstrip(), ""]
        else:
            target = title.split("`")[1]
            out += [f"Not recorded yet: `{target} BENCH_ARGS=--docs` writes it.", ""]
    return "\n".join(out)


GENERATORS: dict[str, Callable[[Path], str]] = {
    "bench-results": _bench_results,
    "settings": _settings,
    "cli": _cli,
    "metrics": lambda root: metrics.render(metrics.metrics(root / "webhook")),
    "alerts": lambda root: chart.render_alerts(root / "chart/templates/prometheusrule.yaml"),
    "chart-values": lambda root: chart.render_values(root / "chart/values.yaml"),
    "rules": _rules_index,
}


def expand(markdown: str, page: str, root: Path) -> str:
    """``markdown`` of ``page`` (path under docs/) with every marker replaced."""

    def one(match: re.Match[str]) -> str:
        name = match[1]
        if name == "rule":
            return _rule(root, page)
        if name not in GENERATORS:
            raise MarkerError(f"{page}: unknown marker {name!r} (known: {sorted(GENERATORS)})")
        return GENERATORS[name](root)

    return MARKER.sub(one, markdown)
