"""Values of plain numbers read without a LaTeX parser: "1,000", "-\\frac{3}{4}", "3/4", "0.75".

Most answers are such numbers.  Reading them with a regular expression keeps
them off math-verify's parser, which costs tens of milliseconds an answer,
and lets the prose readers, which must not import sympy, compare two stated
numbers.
"""

from __future__ import annotations

import re
from fractions import Fraction

_INTEGER = re.compile(r"-?(?:\d{1,3}(?:,\d{3})+|\d+)")
_FRACTION = re.compile(r"(-)?\\[dt]?frac\s*(?:\{\s*(\d+)\s*\}|(\d))\s*(?:\{\s*(\d+)\s*\}|(\d))|(-)?(\d+)\s*/\s*(\d+)")
_DECIMAL = re.compile(r"-?\d*\.\d+")


def plain_integer(s: str) -> int | None:
    """The value of a plain integer answer ("1,000", "10{,}000", "-7"), else None.

    Two integers need no sympy: most MATH-500 answers are integers, and this
    keeps them off the slow path.
    """
    s = re.sub(r"\\!|\s", "", s).replace("{,}", ",")
    return int(s.replace(",", "")) if _INTEGER.fullmatch(s) else None


def plain_rational(s: str) -> tuple[Fraction, bool] | None:
    """(value, written as a decimal) of a plain number: "-\\frac{3}{4}", "\\frac43", "3/4", "0.75", "12"."""
    s = re.sub(r"\s+", " ", s.strip())
    whole = plain_integer(s)
    if whole is not None:
        return Fraction(whole), False
    if _DECIMAL.fullmatch(s):
        return Fraction(s), True
    m = _FRACTION.fullmatch(s)
    if m is None:
        return None
    if m.group(7) is not None:
        num, den, neg = int(m.group(7)), int(m.group(8)), m.group(6)
    else:
        num, den, neg = int(m.group(2) or m.group(3)), int(m.group(4) or m.group(5)), m.group(1)
    if den == 0:
        return None
    return (-Fraction(num, den) if neg else Fraction(num, den)), False
