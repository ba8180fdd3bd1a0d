"""Reading a Kubernetes quantity string: a port of apimachinery's ``parseQuantityString`` and
suffix tables (k8s.io/apimachinery/pkg/api/resource quantity.go, suffix.go). Pure module; the
canonical form written back is ``quantity_canonical``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, NamedTuple

DECIMAL_SI_FORMAT: Final = "DecimalSI"
BINARY_SI_FORMAT: Final = "BinarySI"
DECIMAL_EXPONENT_FORMAT: Final = "DecimalExponent"
INT32_MIN: Final = -(2**31)
INT64_MAX: Final = 2**63 - 1

# Suffix tables of suffix.go (newSuffixer): decimal SI exponents of 10, binary SI exponents of 2.
DECIMAL_SI: Final[Mapping[str, int]] = {
    "n": -9,
    "u": -6,
    "m": -3,
    "": 0,
    "k": 3,
    "M": 6,
    "G": 9,
    "T": 12,
    "P": 15,
    "E": 18,
}


BINARY_SI: Final[Mapping[str, int]] = {
    "Ki": 10,
    "Mi": 20,
    "Gi": 30,
    "Ti": 40,
    "Pi": 50,
    "Ei": 60,
}


ASCII_DIGITS: Final = frozenset("0123456789")


SUFFIX_LETTERS: Final = frozenset("eEinumkKMGTP")  # parseQuantityString's suffix alphabet


class Scanned(NamedTuple):
    """parseQuantityString's result: sign, numeric text, digits before/after '.', suffix."""

    positive: bool
    value: str
    num: str
    denom: str
    suffix: str


def scan(text: str) -> Scanned | None:
    """parseQuantityString: a faithful port (also accepts ``"."``, ``"1."`` and ``"1.G"``);
    None for ErrFormatWrong."""
    positive, pos, end = True, 0, len(text)
    if text[0] in "+-":
        positive = text[0] == "+"
        pos = 1
    while pos < end and text[pos] == "0":  # leading zeros
        pos += 1
    if pos >= end:
        return Scanned(positive, "0", "0", "", "")
    start = pos
    while pos < end and text[pos] in ASCII_DIGITS:
        pos += 1
    num = text[start:pos] or "0"
    if pos >= end:
        return Scanned(positive, text, num, "", "")
    denom = ""
    if text[pos] == ".":
        pos += 1
        start = pos
        while pos < end and text[pos] in ASCII_DIGITS:
            pos += 1
        denom = text[start:pos]
        if pos >= end:
            return Scanned(positive, text, num, denom, "")
    value, suffix_start = text[:pos], pos
    while pos < end and text[pos] in SUFFIX_LETTERS:
        pos += 1
    if pos < end and text[pos] in "+-":
        pos += 1
    while pos < end and text[pos] in ASCII_DIGITS:
        pos += 1
    if pos < end:
        return None
    return Scanned(positive, value, num, denom, text[suffix_start:])


def interpret(suffix: str) -> tuple[int, int, str] | None:
    """suffixHandler.interpret: (base, exponent, format) of a suffix, or None (ErrSuffix)."""
    if suffix in DECIMAL_SI:
        return 10, DECIMAL_SI[suffix], DECIMAL_SI_FORMAT
    if suffix in BINARY_SI:
        return 2, BINARY_SI[suffix], BINARY_SI_FORMAT
    if len(suffix) > 1 and suffix[0] in "eE":
        parsed = go_parse_int64(suffix[1:])
        if parsed is None:
            return None
        wrapped = (parsed - INT32_MIN) % 2**32 + INT32_MIN  # Go's int32(parsed)
        return 10, wrapped, DECIMAL_EXPONENT_FORMAT
    return None


def go_parse_int64(text: str) -> int | None:
    """strconv.ParseInt(text, 10, 64), or None where Go returns an error."""
    body = text[1:] if text[:1] in ("+", "-") else text
    if not body or any(char not in ASCII_DIGITS for char in body):
        return None
    digits = body.lstrip("0") or "0"
    if len(digits) > 19:
        return None
    value = -int(digits) if text[0] == "-" else int(digits)
    return value if -(2**63) <= value <= INT64_MAX else None
