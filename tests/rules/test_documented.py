"""Every rule id admission can report on a pod is documented: a page ``docs/rules/<id>.md`` with its
source and fix (design.md: "ids are stable; docs list each with its fix"), and the docs' scan of
the source (``scripts.docsgen.rules``, which builds the rules index) finds it."""

from __future__ import annotations

from pathlib import Path

import pytest

from scripts.docsgen import rules as docs_rules
from webhook.admission import guard
from webhook.admission.context import DEPENDS_RULE
from webhook.admission.rollout import RULE as ROLLOUT_RULE
from webhook.base.rule_ids import RULE_IDS as RULE_ID_LIST
from webhook.mutation import WORDINGS as MUTATION_WORDINGS
from webhook.rules import PREDICTION_RULES, RULES, WORDINGS

ROOT = Path(__file__).resolve().parents[2]
ADMISSION_RULES = ("policy-overlap", "not-stamped", guard.RULE, ROLLOUT_RULE, DEPENDS_RULE)
"""Rule ids admission reports itself (``admission.decision``, ``admission.guard``, the template
handler's advisory ``admission.rollout`` and ``admission.context.not_selected``)."""


def documented() -> set[str]:
    """The ids with a page under docs/rules/."""
    return {page.stem for page in (ROOT / "docs" / "rules").glob("*.md")} - {"index"}


RULE_IDS = sorted(
    {
        *(rule_id for rule in (*RULES, *PREDICTION_RULES) for rule_id in rule.rule_ids),
        *MUTATION_WORDINGS,
        *ADMISSION_RULES,
    }
)


@pytest.mark.parametrize("rule_id", RULE_IDS)
def test_every_rule_id_has_a_page_in_the_docs(rule_id: str) -> None:
    assert rule_id in documented()


def test_the_docs_scan_finds_every_rule_id() -> None:
    assert set(RULE_IDS) <= set(docs_rules.rule_ids(ROOT / "webhook"))


def test_every_finding_of_the_mutating_webhook_has_its_wording() -> None:
    ids = {rule_id for rule in PREDICTION_RULES for rule_id in rule.rule_ids}
    assert ids == set(WORDINGS)
    assert set(MUTATION_WORDINGS) == {"helper-collision", "too-many-containers"}


def test_the_rule_ids_settings_are_checked_against_are_those_the_rules_raise() -> None:
    """``rules.disabled``/``rules.modes`` are checked against ``webhook.base.rule_ids.RULE_IDS``;
    a rule added without its id there would be refused in those settings, one removed would be
    accepted and do nothing."""
    raised = set(docs_rules.rule_ids(ROOT / "webhook"))
    assert raised - RULE_ID_LIST == set(), "add these ids to webhook/base/rule_ids.py"
    assert RULE_ID_LIST - raised == set(), "no rule raises these ids any more"
