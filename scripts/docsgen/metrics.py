"""Every Prometheus series snapready defines, read from the package's source.

A series is a call of a ``prometheus_client`` constructor (``Counter``, ``Gauge``, ``Histogram``,
``Summary``, ``Info`` or a ``*MetricFamily``) whose first argument is a literal name starting
with ``snapready_``; its help is the second argument and its labels the ``labels``/third
argument. The collectors that only yield series when the cluster source runs are found the same
way, so the reference never depends on a running server.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

CONSTRUCTORS = {
    "Counter": "counter",
    "Gauge": "gauge",
    "Histogram": "histogram",
    "Summary": "summary",
    "Info": "info",
    "CounterMetricFamily": "counter",
    "GaugeMetricFamily": "gauge",
    "HistogramMetricFamily": "histogram",
    "SummaryMetricFamily": "summary",
    "InfoMetricFamily": "info",
}


@dataclass(frozen=True)
class Metric:
    """One series family as exposed (counters get ``_total``)."""

    name: str
    kind: str
    help: str
    labels: tuple[str, ...]
    module: str

    @property
    def exposed(self) -> str:
        return self.name + "_total" if self.kind == "counter" else self.name


def _text(node: ast.AST) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


def _labels(node: ast.AST | None) -> tuple[str, ...]:
    if isinstance(node, ast.List | ast.Tuple):
        return tuple(v for e in node.elts if (v := _text(e)) is not None)
    return ()


def metrics(package: Path) -> list[Metric]:
    """Every ``snapready_*`` family defined under ``package``, sorted by name."""
    found: dict[str, Metric] = {}
    for path in sorted(package.rglob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call) or len(node.args) < 2:
                continue
            func = node.func
            callee = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
            name, help_text = _text(node.args[0]), _text(node.args[1])
            if callee not in CONSTRUCTORS or not name or not name.startswith("snapready_"):
                continue
            labels = _labels(node.args[2] if len(node.args) > 2 else None)
            for keyword in node.keywords:
                if keyword.arg in ("labels", "labelnames"):
                    labels = _labels(keyword.value)
            module = path.relative_to(package.parent).as_posix()
            kind = CONSTRUCTORS[callee]
            found[name] = Metric(name, kind, " ".join((help_text or "").split()), labels, module)
    return [found[name] for name in sorted(found)]


def render(found: list[Metric]) -> str:
    """Markdown: one row per family with its type, labels and help."""
    out = ["| series | type | labels | meaning |", "|---|---|---|---|"]
    for m in found:
        labels = ", ".join(f"`{label}`" for label in m.labels) or "-"
        help_text = m.help.replace("|", "\\|")
        out.append(f"| `{m.exposed}` {{ #{m.name} }} | {m.kind} | {labels} | {help_text} |")
    return "\n".join(out) + "\n"


def missing_help(found: list[Metric]) -> list[str]:
    """Series the reference could not describe: no help text."""
    return [m.name for m in found if not m.help]
