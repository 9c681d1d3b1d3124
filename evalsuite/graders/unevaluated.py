"""Work an answer leaves undone: functions applied and powers not evaluated (`\\cos \\frac{\\pi}{3}`, `8^{1/3}`).

sympy finds `\\cos \\frac{2\\pi}{15} \\cos \\frac{4\\pi}{15} \\cos \\frac{8\\pi}{15}
\\cos \\frac{16\\pi}{15}` equal to `\\frac{1}{16}`, `\\log_2 8` equal to 3 and
`\\dbinom{8}{4}` equal to 70, but a problem that says "Simplify", "Compute" or
"Evaluate" asks for the value those expressions stand for, and such an
answer is the problem restated.  `unevaluated` names the kinds of work an
answer leaves undone; the form check (`normal_form`) counts only the kinds
the reference itself does not contain, so `\\log_2 3`, `\\arctan 2` or
`\\frac{\\ln 3}{\\ln 2}` stay answers where the reference is a logarithm or
an angle of that kind, and `\\sqrt{2}`, `\\pi` and `2^{1/3}` are values, not
work left undone.
"""

from __future__ import annotations

import re
from fractions import Fraction

_TRIG = r"(?:arc)?(?:sin|cos|tan|cot|sec|csc)h?"
_FUNCTIONS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "a trigonometric function",
        re.compile(rf"\\(?:operatorname\s*\{{\s*)?{_TRIG}(?![A-Za-z])|(?<![A-Za-z\\]){_TRIG}(?=\s*[({{\[^\d\\])"),
    ),
    ("a logarithm", re.compile(r"\\(?:log|ln|lg)(?![A-Za-z])|(?<![A-Za-z\\])(?:log|ln)(?=\s*[({\[_\d\\])")),
    ("an exponential", re.compile(r"\\exp(?![A-Za-z])|(?<![A-Za-z\\])e\s*\^")),
    ("a factorial", re.compile(r"(?<=[\d)}])\s*!(?!=)")),
    ("a binomial coefficient", re.compile(r"\\[dt]?binom(?![A-Za-z])|\\choose(?![A-Za-z])")),
    ("a floor or ceiling", re.compile(r"\\[lr](?:floor|ceil)(?![A-Za-z])|[⌊⌈]")),
    ("a gcd or lcm", re.compile(r"\\(?:gcd|operatorname\s*\{\s*(?:gcd|lcm)\s*\})|(?<![A-Za-z\\])(?:gcd|lcm)(?=\s*\()")),
    ("a sum, product, limit or integral", re.compile(r"\\(?:sum|prod|lim|i*int)(?![A-Za-z])")),
)
_RATIONAL_POWER = re.compile(
    r"(?<![\w^_.{}\\])(\d+)\s*\^\s*\{\s*(-?)\s*(?:(\d+)\s*/\s*(\d+)|\\[dt]?frac\s*\{\s*(\d+)\s*\}\s*\{\s*(\d+)\s*\})\s*\}"
)


def applied_functions(s: str) -> set[str]:
    """The kinds of function `s` applies, named as in a grade's reason ("a trigonometric function")."""
    return {name for name, pattern in _FUNCTIONS if pattern.search(s)}


def _exact_root(base: int, degree: int) -> bool:
    """Whether `base` is a perfect `degree`-th power, so a power of it with that denominator is rational."""
    root = round(base ** (1 / degree))
    return any((root + d) ** degree == base for d in (-1, 0, 1) if root + d >= 0)


def rational_power(s: str) -> bool:
    """Whether `s` raises an integer to a fractional power that is rational (`8^{1/3}`, `4^{\\frac{3}{2}}`)."""
    for m in _RATIONAL_POWER.finditer(s):
        num, den = int(m.group(3) or m.group(5)), int(m.group(4) or m.group(6))
        if den == 0:
            continue
        degree = Fraction(num, den).denominator
        if degree > 1 and _exact_root(int(m.group(1)), degree):
            return True
    return False


def unevaluated(s: str) -> set[str]:
    """What `s` leaves to evaluate: the functions it applies and a rational power, as a grade's reason names them."""
    found = {f"{name} left to evaluate" for name in applied_functions(s)}
    if rational_power(s):
        found.add("a power left to evaluate")
    return found


def closed(obj: object) -> bool:
    """Whether a parsed answer is a value without variables (a number, or a tuple or set of numbers)."""
    symbols = getattr(obj, "free_symbols", None)
    return symbols is not None and not symbols
