"""The references the docs generate describe everything the code has: every setting, CLI option,
rule id, metric and chart value, each with a description; and each check catches a planted gap."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, cast

from pydantic import BaseModel, Field

from scripts.docsgen import chart, cli, metrics, pages, rules, settings
from tests.docs.conftest import ROOT
from tests.server.test_report_metrics import audit
from webhook.base.config import Settings
from webhook.cli import build_parser
from webhook.rules import RULES
from webhook.server.metrics import Metrics
from webhook.server.report_metrics import ReportCollector


def expanded(marker: str) -> str:
    return pages.expand(f"<!-- snapready:{marker} -->", "reference/x.md", ROOT)


# Settings


def test_every_setting_has_a_description() -> None:
    assert settings.missing_descriptions(Settings) == []


def test_the_configuration_reference_names_every_setting_and_its_env_var() -> None:
    text = expanded("settings")
    for setting in settings.walk(Settings):
        assert f"`{setting.name}`" in text and f"`{setting.env}`" in text


def test_the_configuration_reference_shows_no_path_of_the_build_machine() -> None:
    """Defaults inside the package read as its path (``webhook/assets/examples``), not as the
    absolute path of the checkout the docs were built in."""
    text = expanded("settings")
    root = str(Path(__file__).resolve().parents[2])
    assert root not in text
    assert "webhook/assets/examples" in text


def test_an_undescribed_setting_is_caught() -> None:
    class Section(BaseModel):
        documented: int = Field(1, description="one")
        bare: int = 2

    class Planted(BaseModel):
        nested: Section = Section()

    assert settings.missing_descriptions(Planted) == ["nested.bare"]


# CLI


def test_every_cli_option_has_help() -> None:
    assert cli.missing_help(build_parser()) == []


def test_the_cli_reference_names_every_command_and_option() -> None:
    text = expanded("cli")
    for path, parser in cli.commands(build_parser()):
        assert f"### `{' '.join(path)}`" in text
        for action in parser._actions:
            if action.option_strings and action.help != argparse.SUPPRESS:
                assert f"`{cli.flag_names(action)}`" in text or action.dest == "help"


def test_an_option_without_help_is_caught() -> None:
    parser = argparse.ArgumentParser(prog="tool")
    sub = parser.add_subparsers().add_parser("run")
    sub.add_argument("--documented", help="says what it does")
    sub.add_argument("--bare")
    assert cli.missing_help(parser) == ["tool run --bare"]


# Rule ids


def test_every_rule_id_has_a_page_and_every_page_a_rule() -> None:
    found = rules.rule_ids(ROOT / "webhook")
    assert len(found) > 30
    assert rules.missing_pages(found, ROOT / "docs" / "rules") == []
    assert rules.stale_pages(found, ROOT / "docs" / "rules") == []


def test_the_rule_table_ids_are_all_found() -> None:
    """The scan sees every id of the ordered rule table (webhook/rules/__init__.py)."""
    table = {rule_id for rule in RULES for rule_id in rule.rule_ids}
    assert table <= set(rules.rule_ids(ROOT / "webhook"))


def test_every_rule_page_has_a_summary_default_and_fix() -> None:
    for page in sorted((ROOT / "docs" / "rules").glob("*.md")):
        if page.stem == "index":
            continue
        meta = pages.front_matter(page)
        assert meta.get("summary") and meta.get("applies") and meta.get("default"), page.name
        assert "<!-- snapready:rule -->" in page.read_text(), page.name
        assert "\n## Fix\n" in page.read_text(), page.name


def test_a_rule_id_without_a_page_and_a_page_without_a_rule_are_caught(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "rule.py").write_text(
        "RULE = 'kept-constant'\n"
        "def check(pod):\n"
        "    yield Finding('spec', 'planted-rule', 'fix it')\n"
        "    yield Finding('spec', RULE, 'fix it', 'warn')\n"
        "def _finding(path, rule, message):\n"
        "    return Finding(path, rule, message)\n"
        "def other(pod):\n"
        "    return [_finding('spec', 'via-helper', 'x'), helper(pod, 'not-a-rule')]\n"
    )
    found = rules.rule_ids(package)
    assert sorted(found) == ["kept-constant", "planted-rule", "via-helper"]
    pages_dir = tmp_path / "rules"
    pages_dir.mkdir()
    (pages_dir / "kept-constant.md").write_text("# kept\n")
    (pages_dir / "via-helper.md").write_text("# via\n")
    (pages_dir / "retired-rule.md").write_text("# gone\n")
    assert rules.missing_pages(found, pages_dir) == ["planted-rule"]
    assert rules.stale_pages(found, pages_dir) == ["retired-rule"]


# Metrics


def test_every_metric_has_help_and_is_in_the_reference() -> None:
    found = metrics.metrics(ROOT / "webhook")
    assert metrics.missing_help(found) == []
    text = expanded("metrics")
    for metric in found:
        assert f"`{metric.exposed}`" in text


def _exposed(families: Any) -> set[str]:
    return {f.name + ("_total" if f.type == "counter" else "") for f in families}


def test_the_scan_finds_every_series_the_registry_exposes() -> None:
    """What the server really registers (and the report collector yields) is what the source
    scan documents: the two cannot drift apart."""
    documented = {m.exposed for m in metrics.metrics(ROOT / "webhook")}
    assert _exposed(Metrics().registry.collect()) <= documented
    assert _exposed(ReportCollector(cast(Any, audit())).collect()) <= documented


def test_a_metric_without_help_is_caught(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text(
        "a = Counter('snapready_planted', '', ['x'])\nb = Gauge('snapready_fine', 'says so')\n"
    )
    assert metrics.missing_help(metrics.metrics(tmp_path)) == ["snapready_planted"]


# Chart values and alerts


def test_every_chart_value_is_commented_and_in_the_reference() -> None:
    values = ROOT / "chart" / "values.yaml"
    assert chart.missing_comments(values) == []
    text = expanded("chart-values")
    for value in chart.values(values):
        assert f"`{value.key}`" in text


def test_an_uncommented_chart_value_is_caught(tmp_path: Path) -> None:
    values = tmp_path / "values.yaml"
    values.write_text(
        "# -- Replicas (count).\nreplicaCount: 2\n\nbare: true\n"
        "# -- A section.\nsection:\n  inner: 1\n"
    )
    assert chart.missing_comments(values) == ["bare"]


def test_every_alert_is_in_the_reference() -> None:
    template = ROOT / "chart" / "templates" / "prometheusrule.yaml"
    found = chart.alerts(template)
    assert len(found) >= 5
    text = expanded("alerts")
    for rule in found:
        assert f"`{rule['alert']}`" in text and rule["annotations"]["summary"]
