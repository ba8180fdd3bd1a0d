"""The chart's values and alerts, from ``chart/values.yaml`` and the PrometheusRule template.

Every value in ``values.yaml`` carries a ``# --`` comment (helm-docs' convention; style.md: every
value commented with its unit and the reason for its default). ``values`` reads the comments
beside the keys; ``missing_comments`` lists the keys without one; ``alerts`` reads the alerting
rules the chart ships, with the Helm template directives taken out.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

KEY = re.compile(r"^(?P<indent> *)(?P<key>[A-Za-z_][\w.-]*):(?P<rest>.*)$")


@dataclass(frozen=True)
class Value:
    """One key of values.yaml: ``lifecycle.prune``."""

    key: str
    default: str
    comment: str
    section: bool


def values(path: Path) -> list[Value]:
    """Every key of ``path`` in file order, with its ``# --`` comment (or plain comment block)."""
    defaults = yaml.safe_load(path.read_text())
    stack: list[tuple[int, str]] = []
    comment: list[str] = []
    found: list[Value] = []
    for line in path.read_text().splitlines():
        stripped = line.strip()
        if stripped.startswith("#"):
            text = stripped.lstrip("#").strip()
            if text.startswith("--"):
                comment = [text.removeprefix("--").strip()]
            elif comment or text:
                comment.append(text)
            continue
        match = KEY.match(line)
        if not match:
            if not stripped:
                comment = [] if not found or stack else comment
            continue
        indent = len(match["indent"])
        while stack and stack[-1][0] >= indent:
            stack.pop()
        dotted = ".".join([*(name for _, name in stack), match["key"]])
        value: Any = defaults
        for part in dotted.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        section = isinstance(value, dict) and bool(value)
        default = "" if section else json.dumps(value)
        found.append(Value(dotted, default, " ".join(comment), section))
        comment = []
        stack.append((indent, match["key"]))
    return found


def render_values(path: Path) -> str:
    """Markdown: one table row per key; sections (maps of keys) as their own rows."""
    out = ["| value | default | description |", "|---|---|---|"]
    for v in values(path):
        default = f"`{v.default}`".replace("|", "\\|") if v.default else ""
        comment = v.comment.replace("|", "\\|")
        key = f"**`{v.key}`**" if v.section else f"`{v.key}`"
        out.append(f"| {key} | {default} | {comment} |")
    return "\n".join(out) + "\n"


def missing_comments(path: Path) -> list[str]:
    """Leaf keys the reference could not describe: no comment above them or their section."""
    described = {v.key for v in values(path) if v.comment}
    return [
        v.key
        for v in values(path)
        if not v.section and not any(v.key == d or v.key.startswith(d + ".") for d in described)
    ]


def alerts(template: Path) -> list[dict[str, Any]]:
    """The alerting rules of the chart's PrometheusRule template (Helm directives dropped)."""
    lines = [
        line for line in template.read_text().splitlines() if not line.strip().startswith("{{")
    ]
    # {{`{{ $labels.policy }}`}} is Prometheus' own template, kept; other Helm expressions go.
    kept: list[str] = []

    def keep(match: re.Match[str]) -> str:
        kept.append(match[1])
        return f"\0{len(kept) - 1}\0"

    text = re.sub(r"\{\{`(.*?)`\}\}", keep, "\n".join(lines))
    text = re.sub(r"\{\{.*?\}\}", "...", text)
    text = re.sub(r"\0(\d+)\0", lambda m: kept[int(m[1])], text)
    document = yaml.safe_load(text)
    return [rule for group in document["spec"]["groups"] for rule in group["rules"]]


def render_alerts(template: Path) -> str:
    """Markdown: each alert with its expression, hold time, summary and what to do."""
    out: list[str] = []
    for rule in alerts(template):
        notes = rule.get("annotations", {})
        out += [f"### `{rule['alert']}` {{ #{rule['alert']} }}", ""]
        out += ["```promql", str(rule["expr"]).strip(), "```", ""]
        out += [f"Fires after: `{rule.get('for', '0m')}`. {notes.get('summary', '')}", ""]
        if notes.get("description"):
            out += [" ".join(str(notes["description"]).split()), ""]
    return "\n".join(out)
