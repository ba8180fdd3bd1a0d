"""Kubernetes resource quantities as exact decimals (pure: no I/O).

``parse_quantity`` follows k8s.io/apimachinery/pkg/api/resource ``ParseQuantity`` (suffixes,
exponents, rounding up to 1n) and rejects what Kubernetes would cap (beyond 2^63-1).
``webhook.pod.node_pins`` uses it to count the devices (``nvidia.com/gpu``) a pod asks for.

The form the API server writes a quantity back in is ``webhook.kube.quantity_canonical``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from decimal import ROUND_UP, Context, Decimal
from typing import Any

from webhook.base.text import clip

# k8s.io/apimachinery/pkg/api/resource: <number><suffix>, suffix binary (Ki..Ei), decimal
# (n, u, m, "", k, M, G, T, P, E) or an exponent (e3, E-2). ASCII digits only, like Go.
_QUANTITY = re.compile(
    r"^([+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+))((?:[KMGTPE]i)|[numkMGTPE]|[eE][+-]?[0-9]+)?$"
)
_SUFFIXES: Mapping[str, Decimal] = {
    "": Decimal(1),
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
    **{f"{p}i": Decimal(1024) ** (i + 1) for i, p in enumerate("KMGTPE")},
}
MAX_QUANTITY = Decimal(2**63 - 1)
"""Largest quantity Kubernetes represents (resource.Quantity caps at int64 max); beyond it a value
is a typo or an attack, so ``parse_quantity`` rejects it instead of capping."""
_NANO = Decimal("1e-9")  # Kubernetes rounds every non-zero quantity up to a multiple of 1n
_MAX_EXPONENT = 2**31 - 1  # Go parses the e-suffix as int32 (resource.ErrSuffix beyond)


def _out_of_range(value: Any) -> ValueError:
    return ValueError(f"{clip(value)!r} is out of range (Kubernetes quantities stop at 2^63-1)")


def _scaled(number: str, suffix: str, value: Any) -> Decimal:
    """``number`` times its suffix, exact, rounded up (away from 0) to 1n like Kubernetes."""
    mantissa = Decimal(number)  # construction from a string is exact
    if suffix in _SUFFIXES:
        factor, exponent = _SUFFIXES[suffix], 0
    else:
        digits = suffix[1:].lstrip("+-").lstrip("0")
        if len(digits) > 10:  # checked before int(): Python refuses over 4300 digits
            raise _out_of_range(value)
        factor, exponent = Decimal(1), int(suffix[1:])
        if abs(exponent) > _MAX_EXPONENT:
            raise _out_of_range(value)
    if mantissa.is_zero():
        return Decimal(0)
    magnitude = mantissa.adjusted() + factor.adjusted() + exponent
    if magnitude > MAX_QUANTITY.adjusted():
        raise _out_of_range(value)
    if magnitude < -10:  # below 1n: Kubernetes rounds any non-zero amount up to 1n
        return _NANO.copy_sign(mantissa)
    # Precision for every digit of the mantissa and suffix: the product is exact.
    exact = Context(prec=len(mantissa.as_tuple().digits) + 40, rounding=ROUND_UP)
    result = exact.multiply(mantissa, factor).scaleb(exponent, exact)
    result = result.quantize(_NANO, context=exact)
    if abs(result) > MAX_QUANTITY:
        raise _out_of_range(value)
    return result


def parse_quantity(value: Any) -> Decimal:
    """Parse a Kubernetes resource quantity (``"1"``, ``1``, ``"500m"``, ``"2Ki"``, ``"1e3"``).

    Semantics of k8s.io/apimachinery/pkg/api/resource ``ParseQuantity``: non-zero amounts are
    rounded up (away from zero) to a multiple of 1n (``"1e-99999999"`` is ``1n``), so the result
    is exact and finite. Where Kubernetes would cap at 2^63-1 we reject instead.

    Raises:
        ValueError: not a string or number (booleans, None, NaN and infinities included), not
            quantity syntax, or out of range (magnitude above 2^63-1, exponent beyond int32).
    """
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ValueError(f"{clip(value)!r} is not a quantity")
    if isinstance(value, int):
        if abs(value) > MAX_QUANTITY:
            raise _out_of_range(value)
        return Decimal(value)
    text = repr(value) if isinstance(value, float) else value.strip()  # repr(inf) fails below
    match = _QUANTITY.match(text)
    if match is None:
        raise ValueError(f"{clip(value)!r} is not a quantity")
    try:
        return _scaled(match.group(1), match.group(2) or "", value)
    except ArithmeticError:  # a decimal signal (Overflow) on a mantissa of millions of digits
        raise _out_of_range(value) from None
