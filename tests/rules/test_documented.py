"""Every rule id admission can report on a pod is documented: a row of the README's "Readiness
rules" table (design.md: "ids are stable; docs list each with its fix")."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from webhook.admission import guard
from webhook.admission.context import DEPENDS_RULE
from webhook.admission.rollout import RULE as ROLLOUT_RULE
from webhook.mutation import WORDINGS as MUTATION_WORDINGS
from webhook.rules import PREDICTION_RULES, RULES, WORDINGS

README = Path(__file__).resolve().parents[2] / "README.md"
ADMISSION_RULES = ("policy-overlap", "not-stamped", guard.RULE, ROLLOUT_RULE, DEPENDS_RULE)
"""Rule ids admission reports itself (``admission.decision``, ``admission.guard``, the template
handler's advisory ``admission.rollout`` and ``admission.context.not_selected``)."""


def documented() -> set[str]:
    """The ids in the first column of the "## Readiness rules" table."""
    text = README.read_text()
    section = text[text.index("## Readiness rules") :]
    section = section[: section.index("\n## ", 1)]
    return set(re.findall(r"^\| `([a-z0-9-]+)` \|", section, re.M))


RULE_IDS = sorted(
    {
        *(rule_id for rule in (*RULES, *PREDICTION_RULES) for rule_id in rule.rule_ids),
        *MUTATION_WORDINGS,
        *ADMISSION_RULES,
    }
)


@pytest.mark.parametrize("rule_id", RULE_IDS)
def test_every_rule_id_has_a_row_in_the_readme(rule_id: str) -> None:
    assert rule_id in documented()


def test_every_finding_of_the_mutating_webhook_has_its_wording() -> None:
    ids = {rule_id for rule in PREDICTION_RULES for rule_id in rule.rule_ids}
    assert ids == set(WORDINGS)
    assert set(MUTATION_WORDINGS) == {"helper-collision", "too-many-containers"}
