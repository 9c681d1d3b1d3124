"""Cheap numeric equality of two parsed expressions, tried before sympy's symbolic check.

math-verify decides equality by `simplify(gold - pred)`, which can run for
minutes on harmless-looking input (powers of a root of unity, nested
radicals).  Evaluating both sides to 30 digits is fast and decides most
cases outright: two constants that differ beyond rounding are different,
two that agree to 1e-12 are equal.  Expressions with variables are
evaluated at a few random points (the identity test of Schwartz-Zippel):
two different functions agree at random points only by accident, so
agreement at three points counts as equal and a disagreement at any point
as different.  When evaluation fails (functions without values, sets,
matrices) the answer is "undecided" and the symbolic check runs as before.
"""

from __future__ import annotations

import random
from typing import Any

from sympy import Eq, Expr, FiniteSet, Float, Rational, Symbol, Tuple, nan, oo, zoo

_POINTS = 3
_DIGITS = 30
_EQUAL_REL = 1e-12
_DIFFERENT_REL = 1e-8


def evaluate(expr: Expr, subs: dict[Symbol, Any]) -> complex | None:
    """The value of `expr` with `subs` substituted, to 30 digits, or None when it has none."""
    try:
        value = expr.xreplace(subs).evalf(_DIGITS) if subs else expr.evalf(_DIGITS)
    except Exception:  # noqa: BLE001 - anything sympy cannot evaluate is "undecided"
        return None
    if not isinstance(value, Expr) or value.free_symbols or value.has(nan, oo, -oo, zoo):
        return None
    try:
        return complex(value)
    except (TypeError, ValueError):
        return None


def _close(a: complex, b: complex, rel: float) -> bool:
    return abs(a - b) <= rel * max(1.0, abs(a), abs(b))


def same_value(a: complex, b: complex) -> bool:
    """Whether two evaluated values agree to the precision that counts as equal (1e-12, relative)."""
    return _close(a, b, _EQUAL_REL)


def plain_expression(obj: Any) -> bool:
    """A scalar sympy expression (not a relation, set, tuple or matrix)."""
    return isinstance(obj, Expr) and not getattr(obj, "is_Matrix", False)


def sample_points(symbols: list[Symbol], seed: int) -> list[dict[Symbol, Any]]:
    """A fixed set of random points for the variables (the same for both sides of a comparison)."""
    rng = random.Random(seed)
    # Rationals in (0.5, 2.5) with odd denominators: away from the poles and
    # branch cuts of typical answers (1/x, sqrt(x), log(x)) and never integers.
    # Floats, not Rationals: a rational to the 2024th power is computed exactly, a float is not.
    return [
        {
            s: Float(Rational(rng.randrange(37, 203), 73) + Rational(rng.randrange(1, 50), 9973), _DIGITS)
            for s in symbols
        }
        for _ in range(_POINTS)
    ]


def numeric_equal(gold: Any, pred: Any, *, rename: bool = False) -> bool | None:
    """True / False when evaluation decides, None when it cannot.

    With `rename`, a prediction in one variable is compared with a reference
    in one other variable as if the names were the same (`z^2` vs `x^2`).
    """
    if not (plain_expression(gold) and plain_expression(pred)):
        return None
    if gold.has(Float) or pred.has(Float):
        return None  # decimals: math-verify's rounding rules decide (0.333333 vs 1/3)
    g_syms, p_syms = sorted(gold.free_symbols, key=str), sorted(pred.free_symbols, key=str)
    if g_syms != p_syms:
        if rename and len(g_syms) == 1 and len(p_syms) == 1:
            pred = pred.xreplace({p_syms[0]: g_syms[0]})
        elif g_syms and p_syms:
            return None
    symbols = sorted(gold.free_symbols | pred.free_symbols, key=str)
    if len(symbols) > 6:
        return None
    points = sample_points(symbols, seed=len(symbols)) if symbols else [{}]
    decided_equal = True
    for point in points:
        g, p = evaluate(gold, point), evaluate(pred, point)
        if g is None or p is None:
            return None
        if not _close(g, p, _EQUAL_REL):
            decided_equal = False
            if not _close(g, p, _DIFFERENT_REL):
                return False
    return True if decided_equal else None


def numeric_equal_any(gold: Any, pred: Any) -> bool | None:
    """`numeric_equal` extended to tuples (in order), finite sets (in any order) and `name = value`.

    Sets and tuples of expressions are where sympy's simplify is slowest
    (every pair of elements is simplified), so they too are decided by
    evaluation when every element can be.
    """
    if isinstance(gold, Eq) and isinstance(pred, Eq):
        if gold.lhs != pred.lhs or not isinstance(gold.lhs, Symbol):
            return None
        gold, pred = gold.rhs, pred.rhs
    if isinstance(gold, Tuple) and isinstance(pred, Tuple):
        if len(gold.args) != len(pred.args):
            return False
        return _all_decided([numeric_equal(g, p) for g, p in zip(gold.args, pred.args)])
    if isinstance(gold, FiniteSet) and isinstance(pred, FiniteSet):
        if len(gold.args) != len(pred.args):
            return None  # math-verify's rules on repeated or extra elements decide
        left = list(pred.args)
        for g in gold.args:
            results = [numeric_equal(g, p) for p in left]
            if None in results:
                return None
            if True not in results:
                return False
            left.pop(results.index(True))
        return True
    return numeric_equal(gold, pred)


def _all_decided(results: list[bool | None]) -> bool | None:
    if False in results:
        return False
    return None if None in results else True


def constant_value(obj: Any) -> complex | None:
    """The numeric value of a constant expression (no variables), or None."""
    if not plain_expression(obj) or obj.free_symbols:
        return None
    return evaluate(obj, {})
