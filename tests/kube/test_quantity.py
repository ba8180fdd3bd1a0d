"""``webhook.kube.quantity``: Kubernetes quantity syntax, rounding to 1n and bounds."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from webhook.kube.quantity import parse_quantity


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("1", Decimal(1), id="plain-string"),
        pytest.param(1, Decimal(1), id="json-integer"),
        pytest.param("0", Decimal(0), id="zero"),
        pytest.param("500m", Decimal("0.5"), id="milli"),
        pytest.param("2Ki", Decimal(2048), id="binary-suffix"),
        pytest.param("1k", Decimal(1000), id="decimal-suffix"),
        pytest.param("1e3", Decimal(1000), id="exponent"),
        pytest.param("1.5", Decimal("1.5"), id="fraction"),
        pytest.param(" 4 ", Decimal(4), id="surrounding-space"),
    ],
)
def test_parse_quantity_accepts_kubernetes_syntax(text: Any, expected: Decimal) -> None:
    assert parse_quantity(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("one", id="word"),
        pytest.param("", id="empty"),
        pytest.param("1Xi", id="unknown-suffix"),
        pytest.param(True, id="boolean"),
        pytest.param(None, id="null"),
        pytest.param(["1"], id="list"),
    ],
)
def test_parse_quantity_rejects_garbage(text: Any) -> None:
    with pytest.raises(ValueError, match="not a quantity"):
        parse_quantity(text)


INT64_MAX = 9223372036854775807  # resource.Quantity's cap (math.MaxInt64)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param("1n", Decimal("0.000000001"), id="one-nano-is-the-smallest-step"),
        pytest.param("1e-99999999", Decimal("0.000000001"), id="tiny-exponent-rounds-up-to-1n"),
        pytest.param("0.1n", Decimal("0.000000001"), id="sub-nano-rounds-up-to-1n"),
        pytest.param("-1e-30", Decimal("-0.000000001"), id="tiny-negative-rounds-away-from-0"),
        pytest.param("0e-5", Decimal(0), id="zero-with-exponent-stays-zero"),
        pytest.param(".5", Decimal("0.5"), id="leading-dot-fraction"),
        pytest.param("-1", Decimal(-1), id="negative-is-a-quantity"),
        pytest.param("1E", Decimal(10) ** 18, id="exa-suffix-is-not-an-exponent"),
        pytest.param("1Ei", Decimal(2) ** 60, id="exbi-suffix-is-not-an-exponent"),
        pytest.param("7Ei", Decimal(7 * 2**60), id="largest-whole-exbi-below-the-cap"),
        pytest.param(str(INT64_MAX), Decimal(INT64_MAX), id="int64-max-is-in-range"),
        pytest.param(INT64_MAX, Decimal(INT64_MAX), id="json-int64-max-is-in-range"),
        pytest.param(1.5, Decimal("1.5"), id="json-float"),
        pytest.param(
            "1." + "0" * 40 + "1", Decimal("1.000000001"), id="long-fraction-rounds-up-exactly"
        ),
    ],
)
def test_parse_quantity_follows_kubernetes_rounding(value: Any, expected: Decimal) -> None:
    assert parse_quantity(value) == expected


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        pytest.param("1e99999999", "out of range", id="huge-exponent-is-out-of-range"),
        pytest.param("1e400", "out of range", id="exponent-past-int64-is-out-of-range"),
        pytest.param("1e" + "9" * 5000, "out of range", id="5000-digit-exponent-is-out-of-range"),
        pytest.param("9" * 400, "out of range", id="400-digit-number-is-out-of-range"),
        pytest.param(str(INT64_MAX + 1), "out of range", id="int64-max-plus-one-is-out-of-range"),
        pytest.param("8Ei", "out of range", id="8-exbi-is-out-of-range"),
        pytest.param(10**400, "out of range", id="json-huge-integer-is-out-of-range"),
        pytest.param(1e300, "out of range", id="json-huge-float-is-out-of-range"),
        pytest.param("NaN", "not a quantity", id="nan-string-is-not-a-quantity"),
        pytest.param("Infinity", "not a quantity", id="infinity-string-is-not-a-quantity"),
        pytest.param(float("nan"), "not a quantity", id="yaml-nan-float-is-not-a-quantity"),
        pytest.param(float("inf"), "not a quantity", id="yaml-inf-float-is-not-a-quantity"),
        pytest.param("\u0663", "not a quantity", id="non-ascii-digit-is-not-a-quantity"),
        pytest.param("1e", "not a quantity", id="exponent-without-digits-is-not-a-quantity"),
    ],
)
def test_parse_quantity_rejects_absurd_values_with_value_error(value: Any, reason: str) -> None:
    with pytest.raises(ValueError, match=reason) as caught:
        parse_quantity(value)
    assert len(str(caught.value)) <= 100
