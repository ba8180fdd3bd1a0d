"""``webhook.rules.tables``: GPU tables built once per settings object, never from another."""

from __future__ import annotations

import pydantic
import pytest

from webhook.base.sections import RuleSettings
from webhook.rules.tables import MAX_KEPT, _kept, gpu_tables


def test_tables_follow_each_settings_object() -> None:
    default = RuleSettings()
    custom = RuleSettings(
        gpu_machine_types={"g2-standard-48": 4, "a3-highgpu-8g": 8},
        gpu_accelerators={"nvidia-l4": ["g2"], "nvidia-h100-80gb": ["a3"]},
        validated_gpu_machine_types={},
        validated_gpu_accelerators={},
        multi_gpu_accelerators=["nvidia-l4"],
    )
    assert gpu_tables(default) is gpu_tables(default)
    tables = gpu_tables(custom)
    assert tables.machine_types == {"g2-standard-48", "a3-highgpu-8g"}
    assert tables.multi_counts == (("g2-standard-48", 4),)
    assert tables.single_families == {"a3"}
    assert tables.accelerators_text == "nvidia-l4, nvidia-h100-80gb"
    assert gpu_tables(default).machine_types != tables.machine_types
    assert ("g2-standard-96", 8) in gpu_tables(default).multi_counts


def test_settings_cannot_be_edited_in_place() -> None:
    """What keeps a kept table true: a reload builds new settings, assignment is refused."""
    with pytest.raises(pydantic.ValidationError):
        RuleSettings().gke_version = "1.36.0-gke.1"  # type: ignore[misc]


def test_bounded() -> None:
    objects = [RuleSettings() for _ in range(MAX_KEPT + 3)]
    for rules in objects:
        gpu_tables(rules)
    assert len(_kept) <= MAX_KEPT
