"""Grading on the form a problem asks for: integer coefficients with gcd 1, simplest form, lowest terms.

Equality of values is not enough when the problem names the form of the
answer: "integers with gcd(|A|,|B|,|C|,|D|) = 1" rejects `20x - 28y + 44z +
16 = 0` for `5x - 7y + 11z + 4 = 0`, and "simplify" or "express as a common
fraction" rejects `\\frac{2}{32}` and `\\frac14 \\cdot \\frac14` for
`\\frac{1}{16}`; "compute" or "evaluate" rejects `\\log_2 8` and `2^{10}`
for a number (`unevaluated`).  The grader sees the problem text, so `asked_forms` reads
the request from it and `form_defect` names what the prediction leaves
undone.  The reference's own form is never a defect: a check applies only
where the reference passes it, so an unusual reference is not turned
against right answers.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

from sympy import Eq, Poly, expand

from evalsuite.graders.prose import MATH_SPAN
from evalsuite.graders.unevaluated import ROOT, applied_functions, closed, unevaluated

_INTEGER_COEFFICIENTS = re.compile(r"\\gcd|\bgcd\b|integer\s+coefficients|relatively\s+prime\s+integers", re.IGNORECASE)
_POSITIVE_LEADING = re.compile(r"(?<![A-Za-z\\])[A-Za-z]\s*>\s*0\b")
_SIMPLEST = re.compile(
    r"\bsimplif(?:y|ied)\b|\bsimplest\b|lowest\s+terms|common\s+fraction|reduced\s+fraction|rationaliz",
    re.IGNORECASE,
)
_EVALUATE = re.compile(r"\b(?:comput|evaluat|calculat)(?:e|ing)\b|\bexact\s+value\b|\bvalue\s+of\b", re.IGNORECASE)
_FIND_EXPRESSION = re.compile(r"\b(?:find|what\s+is|determine)\s*(?=\$|\\[(\[])", re.IGNORECASE)


def _asks_value(problem: str) -> bool:
    """Whether the problem asks to compute a value: "Compute ...", "Evaluate ...", "Find $\\sin 20^\\circ$"."""
    if _EVALUATE.search(problem):
        return True
    for ask in _FIND_EXPRESSION.finditer(problem):
        span = MATH_SPAN.match(problem, ask.end())
        if span is not None and applied_functions(span.group(0)):
            return True
    return False


def asked_forms(problem: str) -> frozenset[str]:
    """The normal forms the problem asks for: `integer_coefficients`, `positive_leading`, `simplest`, `evaluated`.

    `evaluated`: the problem says "compute", "evaluate", "the value of", or
    asks to find an expression that applies a function ("Find $\\sin 20^\\circ
    \\sin 40^\\circ$"): it asks for the value, so an answer that still
    applies a function or leaves a power or root to evaluate restates the
    problem.
    """
    forms = set()
    if _INTEGER_COEFFICIENTS.search(problem):
        forms.add("integer_coefficients")
        if _POSITIVE_LEADING.search(problem):
            forms.add("positive_leading")
    if _SIMPLEST.search(problem):
        forms.add("simplest")
    if _asks_value(problem):
        forms.add("evaluated")
    return frozenset(forms)


def _integer_form(eq: Any) -> tuple[list[int], int] | None:
    """(coefficients, first variable's coefficient) of `lhs - rhs` when all are integers, else None."""
    if not isinstance(eq, Eq):
        return None
    expr = expand(eq.lhs - eq.rhs)
    symbols = sorted(expr.free_symbols, key=str)
    if not symbols:
        return None
    try:
        poly = Poly(expr, *symbols)
    except Exception:  # noqa: BLE001 - not a polynomial: no coefficient form to check
        return None
    coeffs = poly.coeffs()
    if not all(c.is_integer for c in coeffs):
        return [], 0
    lead = poly.coeff_monomial(symbols[0]) if poly.degree(symbols[0]) == 1 else 0
    return [int(c) for c in coeffs], int(lead)


def _coefficient_defect(gold_math: Any, pred_math: Any, positive: bool) -> str | None:
    gold, pred = _integer_form(gold_math), _integer_form(pred_math)
    if gold is None or pred is None or not gold[0] or math.gcd(*gold[0]) != 1:
        return None
    if not pred[0]:
        return "coefficients that are not integers"
    if math.gcd(*pred[0]) != 1:
        return f"integer coefficients with a common factor {math.gcd(*pred[0])}"
    if positive and gold[1] > 0 and pred[1] <= 0:
        return "a leading coefficient that is not positive"
    return None


_FRAC = re.compile(r"\\[dt]?frac\s*")
_SLASH = re.compile(r"(?<![\w.}^_])(\d+)\s*/\s*(\d+)(?![\d.])")
_NUMBER = r"(?:\d+(?:\.\d+)?|\x01)"
_ARITHMETIC = re.compile(
    rf"(?<![\w^_.{{}}\\)\]]){_NUMBER}\s*(?:[-+*]|\\cdot|\\times|\\div)\s*-?{_NUMBER}(?![\w.^{{(\\])"
)
_POWER = re.compile(r"(?<![\w^_.{\\])\d+\s*\^\s*(?:\{\s*-?\d+\s*\}|\d)")


def _group(s: str, at: int) -> tuple[str, int] | None:
    """The argument at `at` (a braced group or one character) and the index after it."""
    while at < len(s) and s[at].isspace():
        at += 1
    if at >= len(s):
        return None
    if s[at] != "{":
        return s[at], at + 1
    depth = 0
    for i in range(at, len(s)):
        depth += {"{": 1, "}": -1}.get(s[i], 0)
        if depth == 0:
            return s[at + 1 : i], i + 1
    return None


def _fractions(s: str) -> list[tuple[str, str, int, int]]:
    """Every `\\frac{num}{den}` as (num, den, start, end)."""
    out = []
    for m in _FRAC.finditer(s):
        num = _group(s, m.end())
        den = _group(s, num[1]) if num else None
        if num and den:
            out.append((num[0].strip(), den[0].strip(), m.start(), den[1]))
    return out


def _coefficient(term: str) -> int | None:
    """The integer factor of a numerator such as `2\\sqrt{6}`, `4`, `\\sqrt{3}` (1), or None."""
    m = re.fullmatch(r"(\d*)\s*(?:\\sqrt\s*(?:\{\d+\}|\d)|\\pi)?", term)
    if m is None:
        return None
    return int(m.group(1)) if m.group(1) else 1


def _defects(s: str) -> set[str]:
    """What is left undone in `s`: unreduced fractions, reducible roots, roots below, arithmetic, `unevaluated`."""
    found = unevaluated(s)
    fractions = _fractions(s)
    for num, den, _, _ in fractions:
        coefficient = _coefficient(num)
        if den.isdigit() and coefficient is not None and (math.gcd(coefficient, int(den)) > 1 or int(den) == 1):
            found.add("a fraction not in lowest terms")
        if "\\sqrt" in den:
            found.add("a root in the denominator")
        if "\\frac" in num or "\\frac" in den:
            found.add("a fraction inside a fraction")
    for a, b in _SLASH.findall(s):
        if math.gcd(int(a), int(b)) > 1 or int(b) == 1:
            found.add("a fraction not in lowest terms")
    if re.search(r"/\s*\\sqrt", s):
        found.add("a root in the denominator")
    for m in ROOT.finditer(s):
        index, radicand = int(m.group(1) or 2), int(m.group(2) or m.group(3))
        if any(radicand % k**index == 0 for k in range(2, math.isqrt(radicand) + 1)) or radicand in (0, 1):
            found.add("a root that can be simplified")
    # Plain numeric fractions become one placeholder so "\\frac14 \\cdot \\frac14" reads as number times number.
    flat = s
    for num, den, start, end in reversed(fractions):
        if num.isdigit() and den.isdigit():
            flat = flat[:start] + "\x01" + flat[end:]
    flat = _SLASH.sub("\x01", flat)
    if _ARITHMETIC.search(flat):
        found.add("arithmetic left to do")
    if _POWER.search(flat):
        found.add("a power left to evaluate")
    return found


def form_defect(gold: str, pred: str, parse: Callable[[str], Any], forms: frozenset[str]) -> str | None:
    """What keeps `pred` from the requested form that `gold` is in, or None when it is in that form.

    `parse` reads an answer as math; it is called only for the checks that
    need it.  `evaluated` applies where the reference is a value without
    variables, as "compute" asks for a number.
    """
    if "integer_coefficients" in forms:
        defect = _coefficient_defect(parse(gold), parse(pred), "positive_leading" in forms)
        if defect is not None:
            return defect
    if "simplest" in forms:
        extra = sorted(_defects(pred) - _defects(gold))
    elif "evaluated" in forms:
        extra = sorted(unevaluated(pred) - unevaluated(gold))
        extra = extra if extra and closed(parse(gold)) else []
    else:
        extra = []
    return extra[0] if extra else None
