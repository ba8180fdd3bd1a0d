"""``webhook.base.text``: user-supplied values in messages are clipped to a bounded width."""

from __future__ import annotations

from typing import Any

import pytest

from webhook.base.text import clip, clip_all


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        pytest.param("nvidia-l4", "nvidia-l4", id="short-text-is-kept"),
        pytest.param("x" * 20, "x" * 20, id="text-at-the-width-is-kept"),
        pytest.param("9" * 400, "9" * 17 + "...", id="long-text-ends-in-an-ellipsis"),
        pytest.param(7, "7", id="number-as-repr"),
        pytest.param(10**5000, "<int>", id="integer-too-long-for-str-is-named"),
    ],
)
def test_clip_shows_at_most_twenty_characters(value: Any, shown: str) -> None:
    assert clip(value) == shown


def test_clip_all_names_the_rest_by_count() -> None:
    assert clip_all(["a", "b", "c", "d", "e"]) == "a, b, c +2 more"
