"""A value restated in the same breath is read as its restatement: "150/200, which simplifies to 3/4" is 3/4.

A response often states a value and then the form it ends on: "the ratio
is indeed 150/200, which simplifies to 3/4", "$\\frac{6}{36}$, i.e.
$\\frac{1}{6}$", "1/4, or 25%".  The readers of prose take the first value
of a clause, so `restate` rewrites such a pair to its second value before
they read it.  Three kinds of connective, by how surely the second value is
the answer:

- a simplification ("which simplifies to", "which reduces to", "or in
  lowest terms"): the second value, whatever words (units) follow it;
- a restatement ("i.e.", "that is", "or equivalently", "which can be
  written as"): the second value when it ends its clause;
- an equality or an alternative ("which is", "which equals", "which is
  the same as", "or"): the
  second value only when both are plain numbers of the same value, because
  "12, which is 3 more than 9", "2, or 3" and "$x = 2$, or $x = -2$" state
  something else.

When both values are plain numbers of different values ("150/200, which
simplifies to 3/5"), the sentence states two answers, and both are kept.
An approximate restatement ("which is about 0.33") never replaces a value.
"""

from __future__ import annotations

import re
from fractions import Fraction

from evalsuite.graders.plain_numbers import plain_rational

_PLAIN = r"(?:\\\$)?-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:\s*/\s*\d+)?(?:\s*\\?%)?(?!\w|\.\d)"
_INLINE = r"(?<![\\$])\$(?!\$)[^$]+?(?<![\\$])\$(?!\$)|\\\(.+?\\\)"
_VALUE = rf"(?:{_INLINE}|(?<![\w.,/^*]){_PLAIN})"
_SIMPLIFIES = (
    r"(?:which|that|this)\s+(?:then\s+|further\s+|(?:can|could)\s+be\s+|we\s+can\s+)?"
    r"(?:simplif(?:ies|y|ied)|reduc(?:es|e|ed))(?:\s+further)?\s+(?:down\s+)?to"
    r"|(?:simplif(?:ying|ied)|reduc(?:ing|ed))(?:\s+further)?\s+(?:down\s+)?to"
    r"|(?:or|which\s+is|which),?\s+in\s+(?:simplest|lowest)\s+(?:form|terms),?(?:\s+is)?"
)
_RESTATES = (
    r"i\.\s?e\.,?|that\s+is,?|or\s+equivalently,?|equivalently,?|in\s+other\s+words,?|or\s+simply"
    r"|which\s+is\s+equivalent\s+to|which\s+(?:can\s+be\s+|we\s+can\s+)?(?:written|write|expressed|express)\s+as"
)
_EQUALS = r"which\s+(?:is(?:\s+equal\s+to|\s+the\s+same\s+as)?|equals)|or"
_CLAUSE_END = r"(?=\s*(?:[.;!?](?:\s|$)|[,)\n]|$))"
_PAIR = re.compile(
    rf"(?P<first>{_VALUE})\s*(?P<sep>,\s*|(?P<open>\(\s*))?"
    rf"(?:(?P<simplifies>{_SIMPLIFIES})|(?P<restates>{_RESTATES})|(?P<equals>{_EQUALS}))\s+"
    rf"(?P<second>{_VALUE})(?(open)\s*\)|(?(simplifies)|{_CLAUSE_END}))",
    re.IGNORECASE,
)
_PERCENT = re.compile(r"\s*\\?%$")
_BEFORE_OPERATOR = re.compile(r"(?:[-+*/^×·÷]|\\(?:cdot|times|div))\s*$")


def _number(value: str) -> Fraction | None:
    """The value of a plain number as stated ("150/200", "$\\frac{1}{4}$", "25%", "\\$1,200"), else None."""
    s = re.sub(r"^\$|\$$|^\\\(|\\\)$|\\\$", "", value.strip()).strip()
    percent = _PERCENT.search(s)
    found = plain_rational(s[: percent.start()] if percent else s)
    if found is None:
        return None
    return found[0] / 100 if percent else found[0]


def _rewrite(m: re.Match[str]) -> str:
    first, second = m.group("first"), m.group("second")
    if m.group("restates") is not None and m.group("sep") is None:
        return m.group(0)  # "12 that is 5" is not "12, that is, 5"
    a, b = _number(first), _number(second)
    decided = a is not None and b is not None
    if m.group("equals") is not None and not (decided and a == b):
        return m.group(0)
    if decided and a != b:
        return f"{first} and {second}"
    return second


def restate(text: str) -> str:
    """`text` with every value that is restated replaced by its restatement (see the module docstring).

    A value right after an operator (`2 + 150/200, which ...`) is part of a
    larger expression and is left alone.  A restatement restated again
    ("150/200, which simplifies to 15/20, which reduces to 3/4") ends on its
    last value: every rewrite shortens the text, so this ends.
    """
    while True:
        out, at = [], 0
        for m in _PAIR.finditer(text):
            if _BEFORE_OPERATOR.search(text[: m.start()]):
                continue
            out.append(text[at : m.start()] + _rewrite(m))
            at = m.end()
        rewritten = "".join(out) + text[at:]
        if rewritten == text:
            return text
        text = rewritten
