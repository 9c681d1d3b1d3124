"""Work an answer leaves undone: functions applied, powers and roots not evaluated (`\\cos 1`, `2^{10}`).

sympy finds `\\cos \\frac{2\\pi}{15} \\cos \\frac{4\\pi}{15} \\cos \\frac{8\\pi}{15}
\\cos \\frac{16\\pi}{15}` equal to `\\frac{1}{16}`, `\\log_2 8` equal to 3 and
`\\dbinom{8}{4}` equal to 70, but a problem that says "Simplify", "Compute" or
"Evaluate" asks for the value those expressions stand for, and such an
answer is the problem restated.  `unevaluated` names the kinds of work an
answer leaves undone; the form check (`normal_form`) counts only the kinds
the reference itself does not contain, so `\\log_2 3`, `\\arctan 2` or
`\\frac{\\ln 3}{\\ln 2}` stay answers where the reference is a logarithm or
an angle of that kind.  `\\sqrt{2}`, `\\pi`, `2^{1/3}` and `1.5 \\times
10^{3}` are values, not work left undone; `2^{10}`, `8^{1/3}` and
`\\sqrt{16}` are not.
"""

from __future__ import annotations

import re
from fractions import Fraction

from sympy import integer_nthroot

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
_POWER = re.compile(
    r"(?<![\w^_.{}\\])(\d+)\s*\^\s*(?:(\d)|\{\s*(-?)\s*(?:(\d+)\s*/\s*(\d+)|\\[dt]?frac\s*\{\s*(\d+)\s*\}\s*\{\s*(\d+)\s*\}|(\d+))\s*\})"
)
_SCIENTIFIC = re.compile(r"(?:\\times|\\cdot|×)\s*$")
"""`1.5 \\times 10^{3}`: scientific notation writes a value, it leaves nothing to evaluate."""
ROOT = re.compile(r"\\sqrt\s*(?:\[\s*(\d+)\s*\])?\s*(?:\{\s*(\d+)\s*\}|(\d))")
"""A root of an integer, `\\sqrt{18}`, `\\sqrt[3]{16}`: (index, radicand braced, radicand as one digit)."""


def applied_functions(s: str) -> set[str]:
    """The kinds of function `s` applies, named as in a grade's reason ("a trigonometric function")."""
    return {name for name, pattern in _FUNCTIONS if pattern.search(s)}


def _exact_root(base: int, degree: int) -> bool:
    """Whether `base` is a perfect `degree`-th power, so its `degree`-th root is an integer."""
    return bool(integer_nthroot(base, degree)[1])


def _power_left(s: str) -> bool:
    """Whether `s` raises an integer to a power whose value is rational (`2^{10}`, `2^{-4}`, `8^{1/3}`)."""
    for m in _POWER.finditer(s):
        if m.group(1) == "10" and _SCIENTIFIC.search(s[: m.start()]):
            continue
        num = int(m.group(2) or m.group(4) or m.group(6) or m.group(8))
        den = int(m.group(5) or m.group(7) or 1)
        if den and _exact_root(int(m.group(1)), Fraction(num, den).denominator):
            return True
    return False


def _root_left(s: str) -> bool:
    """Whether `s` takes a root that is an integer (`\\sqrt{16}`, `\\sqrt[3]{27}`)."""
    return any(_exact_root(int(m.group(2) or m.group(3)), int(m.group(1) or 2)) for m in ROOT.finditer(s))


def unevaluated(s: str) -> set[str]:
    """What `s` leaves to evaluate: functions applied, powers and roots with a rational value, named as in a reason."""
    found = {f"{name} left to evaluate" for name in applied_functions(s)}
    if _power_left(s):
        found.add("a power left to evaluate")
    if _root_left(s):
        found.add("a root left to evaluate")
    return found


def closed(obj: object) -> bool:
    """Whether a parsed answer is a value without variables (a number, or a tuple or set of numbers)."""
    symbols = getattr(obj, "free_symbols", None)
    return symbols is not None and not symbols
