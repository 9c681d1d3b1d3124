"""Is a predicted math answer equivalent to the reference?  math-verify, with guards.

math-verify (sympy underneath) does the heavy lifting: fractions, roots,
intervals, tuples, matrices, equations, degrees, thousands separators, `\\$`.
This module adds what it gets wrong or cannot see, each with its own reason
so a grade explains itself:

- the reference is a bare LaTeX string (MATH's `answer` field): math-verify
  only finds answers inside `$...$` or `\\boxed{}`, so a bare `\\frac{1}{2}`
  parses to nothing and every prediction scores wrong.  Both sides are
  wrapped in `\\boxed{}` before parsing.
- several required answers (`1, -2`, `2 \\pm \\sqrt{3}`) must all be given: a
  prediction with fewer answers is wrong, whatever the comparison says.
- multiple-choice letters (`\\text{(C)}`) and word answers (`\\text{Evelyn}`)
  are compared as letters / words, not as products of symbols.
- `°`, `\\varnothing`, Unicode minus and `\\textbf` are rewritten to forms
  math-verify parses.
- an equality chain of values (`\\frac{34}{100} = \\frac{17}{50}`) is
  compared, and judged for the asked form, by its last member
  (`chains.chain_end`).

math-verify's own SIGALRM timeouts are switched off: the caller runs this in
a worker process under `pool.soft_deadline` and a hard deadline, so a
timeout is reported as such instead of silently scoring "not equal".
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from fractions import Fraction
from functools import lru_cache
from typing import Any

from math_verify import LatexExtractionConfig, parse, verify
from sympy import Basic, Eq, FiniteSet

from evalsuite.graders import lenient
from evalsuite.graders.chains import chain_end
from evalsuite.graders.forms import reduce_answer
from evalsuite.graders.normal_form import form_defect
from evalsuite.graders.numeric import numeric_equal_any
from evalsuite.graders.plain_numbers import plain_integer, plain_rational

# Timeouts are disabled on purpose (see the module docstring); its one-time
# warning about that would only be noise in every worker.
logging.getLogger("math_verify").setLevel(logging.ERROR)

_LATEX = [LatexExtractionConfig(boxed_match_priority=0)]


@dataclass(frozen=True)
class Equivalence:
    """Equal or not, and the evidence: a one-line reason plus parsed forms."""

    equal: bool
    reason: str
    details: dict[str, Any] = field(default_factory=dict)


_REWRITES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\s*°"), r"^\\circ"),
    (re.compile(r"\\varnothing"), r"\\emptyset"),
    (re.compile(r"[−–]"), "-"),
    (re.compile(r"×"), r"\\times "),
    (re.compile(r"\\textbf\{"), r"\\text{"),
    (re.compile(r"\\(?:displaystyle|mathbf\b)"), ""),
    (re.compile(r"\\?\$"), ""),
)


_DEGREE = r"(?:\^\s*\{?\s*\\circ\s*\}?|°)"
_PRIME = r"(?:\^\s*\{?\s*(?:\\prime|')\s*\}?|\\prime|'|′)"
_DOUBLE_PRIME = r"(?:\^\s*\{?\s*(?:\\prime\s*\\prime|'')\s*\}?|\\prime\s*\\prime|''|″|\")"
_ARC = re.compile(
    rf"(\d+(?:\.\d+)?)\s*{_DEGREE}(?:\s|\\[,;:! ]|~)*(\d+(?:\.\d+)?)\s*{_PRIME}"
    rf"(?:(?:\s|\\[,;:! ]|~)*(\d+(?:\.\d+)?)\s*{_DOUBLE_PRIME})?"
)


def _arc_degrees(m: re.Match[str]) -> str:
    """`60^\\circ 42'` as degrees, `\\frac{607}{10}^\\circ`: math-verify reads `42'` as 42 or drops it."""
    value = Fraction(m.group(1)) + Fraction(m.group(2)) / 60 + Fraction(m.group(3) or 0) / 3600
    shown = str(value.numerator) if value.denominator == 1 else f"\\frac{{{value.numerator}}}{{{value.denominator}}}"
    return f"{shown}^\\circ"


def normalize(answer: str) -> str:
    """Surface rewrites that never change the value, for forms math-verify mis-parses."""
    s = _ARC.sub(_arc_degrees, answer.strip().replace("°", "^\\circ"))
    for pattern, repl in _REWRITES:
        s = pattern.sub(repl, s)
    s = re.sub(r"^\\\(|\\\)$|^\\\[|\\\]$", "", s).strip()
    return re.sub(r"(?<=[^\d\s])\.$", "", s).strip()


def _compact(s: str) -> str:
    return re.sub(r"\s+", "", s)


_INTERVAL = re.compile(r"^(?:\\left)?\s*[(\[].*,.*(?:\\right)?\s*[)\]]$|\\cup")
_MATRIX = re.compile(r"\\begin\s*\{[pbvBV]?matrix\}")


def _shape(s: str) -> str | None:
    """ "a matrix" / "an interval or tuple" when `s` plainly is one: such an answer never equals a number."""
    if _MATRIX.search(s):
        return "a matrix"
    if _INTERVAL.search(s.strip()) and "=" not in s and "\\in" not in s:
        return "an interval or tuple"
    return None


_CHOICE = re.compile(r"^(?:\\(?:text|mathrm|mbox)\{\s*)?\(?\s*([A-Ea-e])\s*\)?(?:\s*\})?$")
_CHOICE_GOLD = re.compile(r"^(?:\\(?:text|mathrm|mbox)\{\s*\(?\s*([A-E])\s*\)?\s*\}|\(\s*([A-E])\s*\)|([A-E]))$")
"""A reference that is a choice letter: `\\text{(C)}`, `(C)`, `\\text{C}` or a bare capital `C`."""
_BASE = re.compile(r"\s*([0-9][0-9A-Za-z]*)\s*_\s*\{?\s*([2-9]|[12]\d|3[0-6])\s*\}?\s*")
"""A numeral in another base, `52_8` / `4210_{5}`: compared digit for digit, base included (math-verify drops the base)."""
_CHOICE_PREFIX = re.compile(
    r"^(?:\\(?:text|textbf|mathrm|mbox)\{\s*)?\(\s*([A-E])\s*\)(?:\s*\})?(?!\s*[,;]\s*\(?[A-E]\))"
)
_WORD_GOLD = re.compile(r"^\\(?:text|mathrm|mbox)\{\s*([A-Za-z][A-Za-z ]*[A-Za-z])\s*\}$")


_ARTICLES = {"a", "an", "the"}
_FUNCTION_NAMES = {"sin", "cos", "tan", "cot", "sec", "csc", "log", "exp", "sqrt", "arcsin", "arccos", "arctan"}
_PLAIN_TEXT = re.compile(r"^[A-Za-z][A-Za-z\s,.;:'!?-]*$")


def _words(s: str) -> str:
    """The words of a text answer, lowercased, without articles: `\\text{The Ellipse}` -> "ellipse"."""
    s = re.sub(r"\\(?:text|mathrm|mbox|textit|emph)\{([^{}]*)\}", r"\1", s)
    return " ".join(w for w in re.findall(r"[a-z]+", s.lower()) if w not in _ARTICLES)


def is_text(s: str) -> bool:
    """Whether an answer is words, not math: `\\text{east}`, `north`, "The prism must be right"."""
    if _WORD_GOLD.match(s.strip()):
        return True
    plain = s.strip()
    if not _PLAIN_TEXT.match(plain):
        return False
    words = re.findall(r"[A-Za-z]+", plain)
    return any(len(w) >= 3 and w.lower() not in _FUNCTION_NAMES for w in words)


def _has_text(s: str) -> bool:
    """Whether words are part of the answer: a `\\text{}` with a word in it, or the answer is words."""
    return is_text(s) or re.search(r"\\(?:text|mathrm|mbox)\s*\{[^{}]*[A-Za-z]{2}", s) is not None


@lru_cache(maxsize=4096)
def parse_boxed(answer: str) -> tuple[Any, ...]:
    """math-verify's parse of `\\boxed{answer}` (sympy objects first, then string fallbacks)."""
    return tuple(parse(f"\\boxed{{{answer}}}", extraction_config=_LATEX, parsing_timeout=None))


def _math(parsed: tuple[Any, ...]) -> Any | None:
    return next((p for p in parsed if isinstance(p, Basic) or hasattr(p, "shape")), None)


def _parse_math(answer: str) -> Any | None:
    """The math object of an answer (a sympy expression, relation, set or matrix), or None."""
    return _math(parse_boxed(answer))


def answer_count(obj: Any) -> int:
    """How many separate answers a parsed value stands for: a set's size, else 1."""
    if isinstance(obj, FiniteSet):
        return len(obj.args)
    if isinstance(obj, Eq) and isinstance(obj.rhs, FiniteSet):
        return len(obj.rhs.args)
    return 1


def _show(obj: Any) -> str:
    text = str(obj)
    return text if len(text) <= 200 else text[:197] + "..."


def check_equivalence(
    gold: str,
    pred: str,
    *,
    joined: str | None = None,
    approx: bool = False,
    precision: bool = False,
    forms: frozenset[str] = frozenset(),
) -> Equivalence:
    """Whether `pred` is equivalent to the reference `gold` (gold first: order matters).

    `joined` is the prediction with all its trailing adjacent boxed answers
    (see `extract.Extraction.joined`); it is used only when the reference has
    several answers and `pred` alone gives fewer.  `approx` says the problem
    or the response marks the answer as approximate, `precision` that the
    problem names the precision; both only widen `lenient.approximation`.
    `forms` are the normal forms the problem asks for
    (`normal_form.asked_forms`): an equal value that is not in that form is
    not accepted.
    """
    last = chain_end(reduce_answer(normalize(pred)), _parse_math)
    equivalence = _compare(gold, last or pred, joined=joined, approx=approx, precision=precision)
    if last is not None:
        equivalence.details["last_member"] = last
        pred = last
    if not (equivalence.equal and forms):
        return equivalence
    used = joined if equivalence.details.get("used_joined") and joined else pred
    g, p = reduce_answer(normalize(gold)), reduce_answer(normalize(used))
    defect = form_defect(g, p, _parse_math, forms)
    if defect is None:
        return equivalence
    return Equivalence(
        False,
        f"equal value, but not in the form the problem asks for: {defect}",
        {
            **equivalence.details,
            "form": defect,
        },
    )


def _compare(gold: str, pred: str, *, joined: str | None, approx: bool, precision: bool) -> Equivalence:
    """`check_equivalence` without the form check: equal values, with the guards and lenient rules."""
    g, p = normalize(gold), normalize(pred)
    if not g:
        return Equivalence(False, "the reference answer is empty")
    if _compact(g) == _compact(p):
        return Equivalence(True, "identical after normalisation")

    choice = _CHOICE_GOLD.match(g)
    if choice:
        letter = next(g for g in choice.groups() if g)
        # "(B)" alone, or "(B)" followed by the option's text: "\\text{(B)} 3(1 + r/10)^x = 7".
        got = _CHOICE.match(reduce_answer(p)) or _CHOICE.match(p) or _CHOICE_PREFIX.match(p)
        if got is None:
            return Equivalence(False, f"the reference is choice ({letter}); the prediction is not a choice letter")
        same = got.group(1).upper() == letter
        return Equivalence(
            same, f"choice letters {'equal' if same else 'differ'}: ({letter}) vs ({got.group(1).upper()})"
        )

    if is_text(g):
        same = _words(g) == _words(p)
        return Equivalence(same, f"word answer {'equal' if same else 'differs'}: '{_words(g)}' vs '{_words(p)}'")

    base = _BASE.fullmatch(g)
    if base:
        got = _BASE.fullmatch(p)
        digits, radix = base.group(1).upper(), base.group(2)
        p_digits = got.group(1).upper() if got else re.sub(r"\\text\{[^{}]*\}|\s", "", p).upper()
        same = p_digits == digits and (got is None or got.group(2) == radix)
        return Equivalence(same, f"base-{radix} numerals {'equal' if same else 'differ'}: {digits} vs {p_digits}")

    g, p = reduce_answer(g), reduce_answer(p)
    if _compact(g) == _compact(p):
        return Equivalence(True, "identical after removing words and units")
    g_int, p_int = plain_integer(g), plain_integer(p)
    if g_int is not None and p_int is not None:
        return Equivalence(g_int == p_int, f"integers {'equal' if g_int == p_int else 'differ'}: {g_int} vs {p_int}")
    g_q, p_q = plain_rational(g), plain_rational(p)
    if g_q is not None and p_q is not None:
        if g_q[0] == p_q[0]:
            return Equivalence(True, f"numbers equal: {g_q[0]}")
        if not (g_q[1] or p_q[1]):  # a decimal may be a rounding: math-verify's rules decide those
            return Equivalence(False, f"numbers differ: {g_q[0]} vs {p_q[0]}")
    if (g_q is None) != (p_q is None):
        other = _shape(p if g_q is not None else g)
        if other is not None:
            return Equivalence(False, f"a number against {other}")

    g_parsed = parse_boxed(g)
    g_math = _math(g_parsed)
    if g_math is None:
        return Equivalence(False, "the reference did not parse as math and the strings differ")
    p_parsed = parse_boxed(p)
    p_math = _math(p_parsed)
    details: dict[str, Any] = {"gold_parsed": _show(g_math), "pred_parsed": _show(p_math)}

    need = answer_count(g_math)
    if "\\pm" in g or "\\mp" in g:
        need = max(need, 2)
    have = answer_count(p_math) if p_math is not None else 0
    if "\\pm" in p or "\\mp" in p:
        have = max(have, 2)
    if need > 1 and have < need and joined:
        j = reduce_answer(normalize(joined))
        j_parsed = parse_boxed(j)
        j_math = _math(j_parsed)
        if j_math is not None and answer_count(j_math) >= need:
            p, p_parsed, p_math, have = j, j_parsed, j_math, answer_count(j_math)
            details.update(pred_parsed=_show(p_math), used_joined=True)
    if p_math is None:
        why = lenient.as_set(g_math, p, None, _parse_math)
        if why is not None:
            return Equivalence(True, why, {**details, "rule": "as_set"})
        return Equivalence(False, "the prediction did not parse as math", details)
    if need > 1 and have < need:
        return Equivalence(False, f"the reference has {need} answers; the prediction gives {have}", details)

    # math-verify reads "%" and degrees leniently (25% = 25); numeric evaluation would not.
    fast = None if re.search(r"%|\\circ", g + p) else numeric_equal_any(g_math, p_math)
    if fast is not None:
        details["numeric"] = True
        same, reason = fast, f"numeric evaluation: {'equal' if fast else 'not equal'}"
    else:
        same = verify(list(g_parsed), list(p_parsed), timeout_seconds=None)
        reason = "math-verify: equal" if same else "math-verify: not equal"
    if not same:
        why = _lenient(g, g_math, p, p_math, approx=approx, precision=precision)
        if why is not None:
            details["rule"] = why.split(":", 1)[0]
            return Equivalence(True, why, details)
    return Equivalence(same, reason, details)


_LETTER = re.compile(r"\s*(?:\\(?:text|mathrm|mbox)\{\s*)?\(?\s*[A-Za-z]\s*\)?(?:\s*\})?\s*")


def _lenient(g: str, g_math: Any, p: str, p_math: Any, *, approx: bool, precision: bool) -> str | None:
    """The first `lenient` rule that accepts the pair, as its reason (see that module).

    None for text or a single letter on either side: every rule reads values,
    and the letters of a word or a choice are not variables.
    """
    if any(_has_text(s) or _LETTER.fullmatch(s) for s in (g, p)):
        return None

    def parts_equal(gold_part: str, pred_part: str) -> bool:
        return check_equivalence(gold_part, pred_part).equal

    rules = (
        lambda: lenient.approximation(g_math, p, cue=approx or precision, problem_precision=precision),
        lambda: lenient.as_set(g_math, p, p_math, _parse_math),
        lambda: lenient.labelled_parts(g, p, parts_equal),
        lambda: lenient.equations(g_math, p_math),
        lambda: lenient.renamed(g_math, p_math),
        lambda: lenient.degrees(g, g_math, p, p_math),
    )
    for rule in rules:
        why = rule()
        if why is not None:
            return why
    return None
