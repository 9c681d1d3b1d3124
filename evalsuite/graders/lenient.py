"""Right answers that rule-based checkers reject, each accepted by a rule that keeps wrong ones out.

Each rule runs only after the ordinary comparison said "not equal", and each
one checks a value, never a looser string match:

- `approximation`: a decimal for an exact value (`4.67` for `\\frac{14}{3}`),
  only when the problem or the response says the answer is approximate or
  asks for a precision, and only if the decimal is the exact value rounded
  to the digits given (at least three significant ones, unless the problem
  names the precision).
- `as_set`: an inequality or set-builder set against an interval
  (`x > 3`, `\\{x \\mid x > 3\\}` for `(3, \\infty)`); the two must be the same set.
- `labelled_parts`: `a = -2, b = -2` for `-2, -2`: the labels go and every
  part must match, in order.
- `equations`: an equation against the expression it defines
  (`f(x) = x^2` for `x^2`) or the same equation scaled (`2x + y = 0` for
  `y = -2x`).
- `renamed`: one variable for another (`f(z) = z` for `f(x) = x`), when each
  side is an expression in exactly one variable (never a lone letter).
- `degrees`: degrees against radians (`60^\\circ` for `\\frac{\\pi}{3}`), only
  when one side carries a degree mark and the other is a multiple of pi.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from sympy import Eq, FiniteSet, Interval, Or, Rel, Set, Symbol, Union, pi

from evalsuite.graders.forms import split_top_level
from evalsuite.graders.numeric import constant_value, evaluate, numeric_equal, plain_expression, sample_points

Parse = Callable[[str], Any]

_PRECISION = re.compile(
    r"nearest\s+(?:tenth|hundredth|thousandth|whole|integer|cent|degree)|decimal\s+places?|significant\s+(?:figures|digits)"
    r"|as\s+a\s+decimal|to\s+\d+\s+(?:decimal|significant)|round(?:ed)?\b|approximat|estimate",
    re.IGNORECASE,
)
_DECIMAL = re.compile(r"^\s*-?\d*\.\d+\s*$")
_DEGREE_MARK = re.compile(r"\^\s*\{?\s*\\circ\s*\}?|°|\\degree")


def precision_cue(problem: str) -> bool:
    """Whether the problem asks for a rounded or approximate answer."""
    return _PRECISION.search(problem) is not None


def approximation(gold_math: Any, pred: str, *, cue: bool, problem_precision: bool) -> str | None:
    """A reason when `pred` is `gold` correctly rounded and approximation was asked for or stated."""
    if not cue or not _DECIMAL.match(pred):
        return None
    exact = constant_value(gold_math)
    if exact is None or abs(exact.imag) > 1e-12:
        return None
    got = Decimal(pred.strip())
    digits = -got.as_tuple().exponent  # type: ignore[operator]
    significant = len(str(abs(got)).replace(".", "").lstrip("0"))
    if significant < 3 and not problem_precision:
        return None
    if abs(float(got) - exact.real) <= 0.5 * 10.0**-digits * (1 + 1e-9):
        return f"approximation: {pred.strip()} is the exact value rounded to {digits} decimal places"
    return None


def _relation_set(obj: Any) -> Set | None:
    """The real set an inequality (or several joined by "or") describes, in one variable."""
    try:
        if isinstance(obj, Eq) and isinstance(obj.rhs, Set):
            return obj.rhs
        if isinstance(obj, Set) and not isinstance(obj, FiniteSet):
            return obj
        if isinstance(obj, FiniteSet) and obj.args and all(isinstance(a, Rel) for a in obj.args):
            obj = Or(*obj.args)
        if len(obj.free_symbols) != 1 or not hasattr(obj, "as_set"):
            return None
        return obj.as_set()
    except Exception:  # noqa: BLE001 - not a relation sympy can turn into a set
        return None


_SET_BUILDER = re.compile(
    r"^\\\{\s*([A-Za-z])\s*(?:\\in\s*\\mathbb\s*\{?R\}?\s*)?(?:\\mid|\||:|\\colon)\s*(.+?)\s*\\\}$"
)


def as_set(gold_math: Any, pred: str, pred_math: Any, parse: Parse) -> str | None:
    """A reason when an inequality / set-builder prediction is the reference's interval (or the reverse)."""
    m = _SET_BUILDER.match(pred.strip())
    if m is not None:
        pred_math = parse(m.group(2))
    g_set, p_set = _relation_set(gold_math), _relation_set(pred_math)
    if not isinstance(g_set, Set) or not isinstance(p_set, Set):
        return None
    if not isinstance(g_set, (Interval, Union)) and not isinstance(p_set, (Interval, Union)):
        return None
    try:
        same = bool(g_set == p_set) or bool(g_set.symmetric_difference(p_set).is_empty)
    except Exception:  # noqa: BLE001
        return None
    return f"as_set: both describe {p_set}" if same else None


_LABEL = re.compile(r"^\s*(?:[A-Za-z](?:_\{?\w+\}?)?|\\[A-Za-z]+)\s*=\s*(?!.*=)(.+)$")


def labelled_parts(gold: str, pred: str, judge: Callable[[str, str], bool]) -> str | None:
    """A reason when every `label = value` part of `pred` matches the reference's part in order."""
    g_parts = split_top_level(re.sub(r"^\s*\\left\(|\\right\)\s*$|^\s*\(|\)\s*$", "", gold))
    p_parts = split_top_level(pred)
    if len(p_parts) < 2 or len(p_parts) != len(g_parts):
        return None
    values = [m.group(1) for m in (_LABEL.match(p) for p in p_parts) if m is not None]
    if len(values) != len(p_parts):
        return None
    if all(judge(g, v) for g, v in zip(g_parts, values)):
        return "labelled_parts: every part matches in order"
    return None


def _defines(eq: Any) -> Any | None:
    """The expression an equation defines when one side is a lone name or f(x): `y = 2x` -> 2x."""
    if not isinstance(eq, Eq):
        return None
    for name_side, value_side in ((eq.lhs, eq.rhs), (eq.rhs, eq.lhs)):
        if isinstance(name_side, Symbol) or (getattr(name_side, "is_Function", False) and not name_side.is_number):
            return value_side
    return None


def _proportional(a: Any, b: Any) -> bool:
    """Whether two expressions are nonzero constant multiples of each other (same zero set)."""
    symbols = sorted(a.free_symbols | b.free_symbols, key=str)
    if not symbols or len(symbols) > 6:
        return False
    ratios = []
    for point in sample_points(symbols, seed=7):
        x, y = evaluate(a, point), evaluate(b, point)
        if x is None or y is None or abs(y) < 1e-12:
            return False
        ratios.append(x / y)
    return all(abs(r - ratios[0]) <= 1e-9 * max(1.0, abs(ratios[0])) for r in ratios) and abs(ratios[0]) > 1e-12


def equations(gold_math: Any, pred_math: Any) -> str | None:
    """A reason when an equation and the expression it defines, or two scaled equations, agree."""
    if isinstance(gold_math, Eq) and isinstance(pred_math, Eq):
        g, p = gold_math.lhs - gold_math.rhs, pred_math.lhs - pred_math.rhs
        if plain_expression(g) and plain_expression(p) and _proportional(g, p):
            return "equations: the same equation up to a constant factor"
        return None
    for eq, expr in ((gold_math, pred_math), (pred_math, gold_math)):
        defined = _defines(eq)
        if defined is not None and plain_expression(expr) and numeric_equal(defined, expr):
            return "equations: the equation defines the other side's expression"
    return None


_VARIABLE_NAME = re.compile(
    r"[A-Za-z](?:_\{?\w+\}?)?|alpha|beta|gamma|delta|theta|phi|psi|lambda|mu|nu|rho|sigma|tau|omega|xi|eta|zeta"
)


def _in_variables(obj: Any) -> bool:
    """An expression or equation in variables: not a lone letter, and every symbol a variable's name."""
    if (
        isinstance(obj, Symbol)
        or not hasattr(obj, "free_symbols")
        or not (plain_expression(obj) or isinstance(obj, Eq))
    ):
        return False
    return all(_VARIABLE_NAME.fullmatch(str(s)) for s in obj.free_symbols)


def renamed(gold_math: Any, pred_math: Any) -> str | None:
    """A reason when the answers agree after renaming the one variable of each side.

    Both sides must be expressions (or equations) in variables: a lone
    letter is a name or a choice, and a word parsed as a product of letters
    (`\\text{slow}`) is not an expression.
    """
    if not (_in_variables(gold_math) and _in_variables(pred_math)):
        return None
    g_syms, p_syms = gold_math.free_symbols, pred_math.free_symbols
    if len(g_syms) != 1 or len(p_syms) != 1 or g_syms == p_syms:
        return None
    (g_sym,), (p_sym,) = g_syms, p_syms
    moved = pred_math.xreplace({p_sym: g_sym})
    if moved == gold_math:
        return f"renamed: {p_sym} for {g_sym}"
    if isinstance(gold_math, Eq) and isinstance(moved, Eq) and gold_math.lhs == moved.lhs:
        gold_math, moved = gold_math.rhs, moved.rhs
    if numeric_equal(gold_math, moved):
        return f"renamed: {p_sym} for {g_sym}"
    return None


def degrees(gold: str, gold_math: Any, pred: str, pred_math: Any) -> str | None:
    """A reason when one side is in degrees (marked) and the other the same angle in radians."""
    g_deg, p_deg = bool(_DEGREE_MARK.search(gold)), bool(_DEGREE_MARK.search(pred))
    if g_deg == p_deg:
        return None
    deg_math, rad_math = (gold_math, pred_math) if g_deg else (pred_math, gold_math)
    if not plain_expression(rad_math) or not rad_math.has(pi) or not plain_expression(deg_math):
        return None
    if numeric_equal(deg_math * pi / 180, rad_math):
        return "degrees: the same angle in degrees and radians"
    return None
