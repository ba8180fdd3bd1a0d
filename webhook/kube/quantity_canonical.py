"""Kubernetes resource quantities in the form the API server writes them back (pure: no I/O).

``canonical_quantity`` is the string the API server stores and sends to webhooks for a Quantity
field (``1024Mi`` becomes ``1Gi``): ``webhook.kube.defaults`` applies it to the hashed quantity
fields, so a manifest fingerprints like its admitted pod. A port of
k8s.io/apimachinery/pkg/api/resource (quantity.go: ParseQuantity, CanonicalizeBytes, MarshalJSON;
suffix.go; amount.go).
"""

from __future__ import annotations

import functools
import math
from decimal import MAX_EMAX, MIN_EMIN, ROUND_UP, Context, Decimal
from typing import Any, Final

from webhook.kube.quantity_scan import (
    ASCII_DIGITS,
    BINARY_SI,
    BINARY_SI_FORMAT,
    DECIMAL_SI,
    DECIMAL_SI_FORMAT,
    INT32_MIN,
    INT64_MAX,
    Scanned,
    interpret,
    scan,
)

_DECIMAL_SI_SUFFIX: Final = {exponent: suffix for suffix, exponent in DECIMAL_SI.items()}
_BINARY_SI_SUFFIX: Final = {0: "", **{e // 10: s for s, e in BINARY_SI.items()}}
# Go's unicode.IsSpace (what strings.TrimSpace strips in Quantity.UnmarshalJSON); Python's
# str.strip() would also strip \x1c-\x1f, which Go keeps.
_GO_SPACE: Final = (
    " \t\n\v\f\r\x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009"
    "\u200a\u2028\u2029\u202f\u205f\u3000"
)
_INT32_MAX: Final = 2**31 - 1
_MAX_INT64_FACTORS: Final = 18  # amount.go: decimal digits an int64 always holds
_NANO_SCALE: Final = -9  # resource.Nano: the finest step ParseQuantity keeps
_MILLI_SCALE: Final = -3  # resource.Milli: SetDefaults_ResourceList rounds up to it
_EXPONENT_MARGIN: Final = 2**20  # exponents this close to int32's bounds are left as written
_MAX_TEXT: Final = 256  # longer quantities are junk: left as written (bounded time and cache)


def canonical_quantity(value: Any, *, round_up_to_milli: bool = False) -> Any:
    """The string the API server writes for a Quantity field sent as ``value``.

    A port of k8s.io/apimachinery/pkg/api/resource (quantity.go): ``Quantity.UnmarshalJSON``
    (a JSON number or string, surrounding whitespace trimmed), ``ParseQuantity`` (rounding up to
    1n away from zero, BinarySI capped at 2^63-1, and the string kept verbatim when its fast path
    deems it canonical: ``"+1Gi"`` and ``"01"`` are written back as sent), then
    ``MarshalJSON``/``CanonicalizeBytes``: the largest suffix of the value's format class that
    loses no precision (``"1024Mi"`` -> ``"1Gi"``, ``"1000m"`` -> ``"1"``, ``"0.5"`` ->
    ``"500m"``, ``"1.5Gi"`` -> ``"1536Mi"``, ``"1000M"`` -> ``"1G"``, ``".001e12"`` -> ``"1e9"``);
    BinarySI values below 1024 or not integral are written as DecimalSI; a DecimalSI exponent
    beyond ``E`` is written as ``e<exp>`` (apimachinery at commit 357557a6; releases before that
    fix dropped the exponent). ``round_up_to_milli`` adds ``SetDefaults_ResourceList``
    (pkg/apis/core/v1/defaults.go): ``Quantity.RoundUp(-3)``, for ResourceList values.

    Pure, deterministic and idempotent (a written value maps to itself). Never raises:
    booleans, non-numbers, text ParseQuantity rejects (the API server would refuse the object),
    texts over 256 characters and exponents within 2^20 of int32's bounds (where Go's int32
    scale arithmetic wraps) are returned unchanged. Integers and
    floats become their string form (floats as Go's encoding/json writes them).
    """
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        text: str | None = value.strip(_GO_SPACE)
    elif isinstance(value, int):
        try:
            text = str(value)
        except ValueError:  # beyond Python's int-to-str digit limit
            return value
    elif isinstance(value, float):
        text = _go_json_float(value)
    else:
        return value
    if text is None or len(text) > _MAX_TEXT:
        return value
    result = _canonical(text, round_up_to_milli)
    return value if result is None else result


@functools.lru_cache(maxsize=1024)  # the same few sizes recur on every admission
def _canonical(text: str, round_up_to_milli: bool) -> str | None:
    """What ``MarshalJSON(ParseQuantity(text))`` writes, or None where ParseQuantity fails."""
    if not text:
        return None
    if text == "0":  # ParseQuantity's own shortcut
        return "0"
    scanned = scan(text)
    interpreted = interpret(scanned.suffix) if scanned is not None else None
    if scanned is None or interpreted is None:
        return None
    base, exponent, fmt = interpreted
    if abs(exponent) > _INT32_MAX - _EXPONENT_MARGIN:
        return None  # Go's int32 scale arithmetic wraps around there: not reproduced
    num, denom = scanned.num, scanned.denom
    try:
        amount = _fast_path_amount(text, scanned, (base, exponent, fmt), round_up_to_milli)
        if isinstance(amount, str):
            return amount
        if amount is None:
            amount = _slow_path_amount(scanned, base, exponent)
            if amount is None:
                return None
            if fmt == BINARY_SI_FORMAT and abs(amount) > INT64_MAX:
                amount = Decimal(INT64_MAX).copy_sign(amount)  # ParseQuantity's BinarySI cap
            if round_up_to_milli:
                amount = _round_up(amount, _MILLI_SCALE, len(num) + len(denom))
        return _format(amount, fmt)
    except ArithmeticError:  # a decimal signal on absurd input: leave it as written
        return None


def _fast_path_amount(
    text: str, scanned: Scanned, interpreted: tuple[int, int, str], round_up_to_milli: bool
) -> Decimal | str | None:
    """ParseQuantity's int64 fast path: ``text`` itself when it is kept verbatim (the parsed
    Quantity caches it and MarshalJSON writes it back), else the exact amount; None when the
    value needs the arbitrary-precision path."""
    base, exponent, fmt = interpreted
    num, denom = scanned.num, scanned.denom
    if base == 10:
        precision = _MAX_INT64_FACTORS - (len(num) + len(denom))
    elif not denom:  # BinarySI: 1Mi has ~6 decimal digits, exponent*3/10 estimates them
        precision = 15 - len(num) - (exponent * 3) // 10 - 1
    else:
        precision = -1
    if precision < 0:
        return None
    scale = (exponent if base == 10 else 0) - len(denom)
    if scale < _NANO_SCALE:
        return None
    shifted = num + denom  # at most 18 digits here
    mantissa = int(shifted)
    magnitude = mantissa << exponent if base == 2 else mantissa
    if magnitude > INT64_MAX:  # int64Multiply overflow
        return None
    if fmt == BINARY_SI_FORMAT:
        kept = exponent % 10 == 0 and mantissa & 0x07 != 0
    else:
        kept = scale % 3 == 0 and not shifted.endswith("000") and shifted[0] != "0"
    # Quantity.RoundUp keeps the parsed string when the scale is already fine enough.
    if kept and not (round_up_to_milli and scale < _MILLI_SCALE):
        return text
    amount = Decimal(magnitude) if base == 2 else Decimal(f"{shifted}E{scale}")
    if not scanned.positive:
        amount = -amount
    if round_up_to_milli and scale < _MILLI_SCALE:
        amount = _round_up(amount, _MILLI_SCALE, len(shifted))
    return amount


def _slow_path_amount(scanned: Scanned, base: int, exponent: int) -> Decimal | None:
    """ParseQuantity's inf.Dec path: the exact amount rounded up (away from 0) to 1n; None when
    the numeric part has no digit (inf.Dec.SetString fails)."""
    if not any(char in ASCII_DIGITS for char in scanned.value):
        return None
    digits = len(scanned.num) + len(scanned.denom)
    context = _context(digits)
    amount = Decimal(f"{scanned.num}.{scanned.denom or '0'}")
    if base == 10:
        amount = amount.scaleb(exponent, context)
    else:
        amount = context.multiply(amount, Decimal(2**exponent))
    amount = _round_up(amount, _NANO_SCALE, digits)
    return amount if scanned.positive else -amount


def _round_up(amount: Decimal, scale: int, digits: int) -> Decimal:
    """``amount`` rounded away from zero to a multiple of 10**scale (inf.RoundUp)."""
    exponent = amount.as_tuple().exponent
    if not amount or not isinstance(exponent, int) or exponent >= scale:
        return amount
    step = Decimal(f"1E{scale}")
    if amount.adjusted() < scale:  # below one step: any non-zero amount becomes one step
        return step.copy_sign(amount)
    return amount.quantize(step, rounding=ROUND_UP, context=_context(digits))


def _context(digits: int) -> Context:
    """A decimal context exact for amounts of ``digits`` significant digits times 2^60."""
    return Context(prec=digits + 40, rounding=ROUND_UP, Emax=MAX_EMAX, Emin=MIN_EMIN)


def _format(amount: Decimal, fmt: str) -> str | None:
    """CanonicalizeBytes: mantissa and suffix of ``amount`` in format class ``fmt``."""
    if not amount:
        return "0"
    if fmt == BINARY_SI_FORMAT:
        if -1024 < amount < 1024 or amount != amount.to_integral_value():
            fmt = DECIMAL_SI_FORMAT  # would round: shown as DecimalSI instead
        else:
            whole = int(amount)  # at most 2^63-1 (capped)
            magnitude, times = abs(whole), 0
            while magnitude >= 1024 and magnitude % 1024 == 0:
                magnitude //= 1024
                times += 1
            return f"{'-' if whole < 0 else ''}{magnitude}{_BINARY_SI_SUFFIX[times]}"
    sign, digit_tuple, exponent = amount.as_tuple()
    assert isinstance(exponent, int)  # finite: built from digits
    digits = "".join(map(str, digit_tuple))
    stripped = digits.rstrip("0")
    exponent += len(digits) - len(stripped)
    padding = exponent % 3  # move the exponent down to a multiple of 3
    exponent -= padding
    if not INT32_MIN <= exponent <= _INT32_MAX:
        return None  # Go's int32 exponent arithmetic would wrap: leave the value as written
    if fmt == DECIMAL_SI_FORMAT and exponent in _DECIMAL_SI_SUFFIX:
        suffix = _DECIMAL_SI_SUFFIX[exponent]
    else:
        suffix = f"e{exponent}" if exponent else ""
    return f"{'-' if sign else ''}{stripped}{'0' * padding}{suffix}"


def _go_json_float(value: float) -> str | None:
    """The JSON text Go's encoding/json writes for a float64 (what kubectl sends for a YAML
    float): shortest round-trip digits, ``%f`` style from 1e-6 to 1e21, else ``1e-7``/``1e+21``.
    None for NaN and infinities (not JSON)."""
    if not math.isfinite(value):
        return None
    if value == 0:
        return "-0" if math.copysign(1.0, value) < 0 else "0"
    exact = Decimal(repr(value)).normalize(Context(prec=30))  # repr: shortest round-trip digits
    if 1e-6 <= abs(value) < 1e21:
        return format(exact, "f")
    sign, digit_tuple, exponent = exact.as_tuple()
    assert isinstance(exponent, int)
    digits = "".join(map(str, digit_tuple))
    power = exponent + len(digits) - 1
    mantissa = digits[0] + (f".{digits[1:]}" if len(digits) > 1 else "")
    written = f"{abs(power):02d}"
    if power < 0 and written[0] == "0":  # encoding/json turns e-09 into e-9
        written = written[1:]
    return f"{'-' if sign else ''}{mantissa}e{'-' if power < 0 else '+'}{written}"
