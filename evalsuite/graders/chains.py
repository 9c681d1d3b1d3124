"""An equality chain of values answers with its last member: `\\frac{34}{100} = \\frac{17}{50}` is 17/50.

A response that boxes its last step (`\\boxed{\\frac{34}{100} = \\frac{17}{50}}`,
`\\boxed{2 + 3 = 5}`) states the value and then the form it ends on, so the
form the problem asks for is judged on the last member.  Only a true chain
of values counts: every member evaluates to a number without variables and
all agree.  An equation (`x = 5`, `y = 2x + 3`) keeps its meaning, and a
false chain (`2 + 2 = 5`, `\\frac{14}{3} = 4.67`) is left to the comparison
as written.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from evalsuite.graders.forms import split_top_level
from evalsuite.graders.numeric import constant_value, same_value

_NAME = re.compile(r"(?:[A-Za-z]|\\[A-Za-z]+)(?:_\{?\w+\}?)?")
"""A name a chain may start with (`P = \\frac{34}{100} = \\frac{17}{50}`): kept, so the answer stays `P = ...`."""


def chain_end(answer: str, parse: Callable[[str], Any]) -> str | None:
    """The last member of `answer` when it is a chain `a = b = c` of equal values without variables, else None.

    A chain that starts with a name (`x = \\frac{34}{100} = \\frac{17}{50}`)
    keeps it: `x = \\frac{17}{50}`.
    """
    if "=" not in answer:
        return None
    members = split_top_level(answer, "=")
    name = members.pop(0) if _NAME.fullmatch(members[0]) else None
    if len(members) < 2 or not all(members):
        return None
    values = [constant_value(parse(member)) for member in members]
    first = values[0]
    if first is None or any(value is None or not same_value(value, first) for value in values[1:]):
        return None
    return f"{name} = {members[-1]}" if name else members[-1]
