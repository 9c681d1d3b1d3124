"""Hand-written (reference, response, expected) cases across MATH-500's answer shapes.

Each row is a reference answer as MATH writes it, a model response, whether
a careful human grader would accept it, and what the row checks.  Rows are
data so the same table drives the grader test and the comparison with naive
string matching and with math-verify called directly.
"""

from __future__ import annotations

from typing import NamedTuple


class Pair(NamedTuple):
    gold: str
    response: str
    correct: bool
    shape: str


PAIRS: list[Pair] = [
    # fractions and decimals
    Pair(r"\frac{1}{2}", r"So the answer is $\boxed{0.5}$.", True, "fraction vs decimal"),
    Pair(r"\frac{1}{2}", r"$\boxed{\dfrac12}$", True, "dfrac without braces"),
    Pair(r"\frac{14}{3}", r"\boxed{14/3}", True, "slash fraction"),
    Pair(r"\frac{14}{3}", r"\boxed{4.67}", False, "rounded decimal is not exact"),
    Pair(r"-\frac{\pi}{6}", r"\boxed{-\pi/6}", True, "negative fraction of pi"),
    # roots
    Pair(r"3\sqrt{2}", r"\boxed{\sqrt{18}}", True, "unsimplified root"),
    Pair(r"11\sqrt2", r"\boxed{11\sqrt{2}}", True, "root without braces"),
    Pair(r"\sqrt{2}", r"\boxed{1.414}", False, "decimal approximation of a root"),
    Pair(r"\frac{\sqrt{3}}{2}", r"\boxed{\frac{1}{2}\sqrt{3}}", True, "root rearranged"),
    # intervals, unions and tuples
    Pair(r"(-\infty, 3]", r"\boxed{(-\infty,3]}", True, "interval spacing"),
    Pair(r"(-\infty, 3]", r"\boxed{(-\infty,3)}", False, "interval endpoint closed vs open"),
    Pair(r"(0,9) \cup (9,36)", r"\boxed{(0, 9) \cup (9, 36)}", True, "union of intervals"),
    Pair(r"(0,9) \cup (9,36)", r"\boxed{(0,36)}", False, "union vs merged interval"),
    Pair(r"\left( 3, \frac{\pi}{2} \right)", r"\boxed{(3, \pi/2)}", True, "tuple with left/right delimiters"),
    Pair(r"\left( 3, \frac{\pi}{2} \right)", r"\boxed{\left(\frac{\pi}{2}, 3\right)}", False, "tuple order matters"),
    # degrees
    Pair(r"90^\circ", r"\boxed{90}", True, "degrees dropped"),
    Pair(r"90^\circ", r"\boxed{90°}", True, "unicode degree sign"),
    Pair(r"30^\circ", r"\boxed{60^\circ}", False, "different angle"),
    # text answers
    Pair(r"\text{Evelyn}", r"\boxed{\text{Evelyn}}", True, "word answer"),
    Pair(r"\text{Evelyn}", r"\boxed{Evelyn}", True, "word answer without text macro"),
    Pair(r"\text{Navin}", r"\boxed{\text{Nivan}}", False, "anagram is a different name"),
    Pair(r"\text{even}", r"\boxed{\text{odd}}", False, "different word"),
    # multiple choice
    Pair(r"\text{(C)}", r"\boxed{C}", True, "choice letter bare"),
    Pair(r"\text{(C)}", r"\boxed{\textbf{(C)}}", True, "choice letter in textbf"),
    Pair(r"\text{(C)}", r"\boxed{(D)}", False, "different choice"),
    # matrices
    Pair(r"\begin{pmatrix} 1 \\ 2 \end{pmatrix}", r"\boxed{\begin{pmatrix}1\\2\end{pmatrix}}", True, "column vector"),
    Pair(r"\begin{pmatrix} 1 \\ 2 \end{pmatrix}", r"\boxed{\begin{pmatrix}2\\1\end{pmatrix}}", False, "vector entries swapped"),
    # thousands separators and money
    Pair(r"10,000", r"\boxed{10000}", True, "thousands comma"),
    Pair(r"\$32,\!348", r"\boxed{32348}", True, "dollars with thin-space separator"),
    Pair(r"\$32,\!348", r"\boxed{\$32,348}", True, "dollars both sides"),
    Pair(r"\$18.90", r"\boxed{18.9}", True, "trailing zero cents"),
    Pair(r"864 \mbox{ inches}^2", r"\boxed{864}", True, "units dropped"),
    # equations
    Pair(r"y = 2x + 3", r"\boxed{y=2x+3}", True, "line equation"),
    Pair(r"y = 2x + 3", r"\boxed{2x+3}", True, "right-hand side only"),
    Pair(r"y = 2x + 3", r"\boxed{y = 3x + 2}", False, "different line"),
    Pair(r"x^2+7x+10", r"\boxed{(x+5)(x+2)}", True, "factored polynomial"),
    # complex numbers
    Pair(r"6 - 5i", r"\boxed{6-5i}", True, "complex number"),
    Pair(r"6 - 5i", r"\boxed{6+5i}", False, "complex conjugate"),
    # several answers and plus-minus
    Pair(r"1, -2", r"\boxed{-2, 1}", True, "all solutions, other order"),
    Pair(r"1, -2", r"\boxed{1}", False, "only one of two solutions"),
    Pair(r"1, -2", r"The roots are $\boxed{1}$ and $\boxed{-2}$.", True, "solutions boxed separately"),
    Pair(r"3, 5, 7", r"\boxed{3, 5}", False, "two of three solutions"),
    Pair(r"2 \pm \sqrt{3}", r"\boxed{2+\sqrt{3}}", False, "one sign of a plus-minus"),
    Pair(r"2 \pm \sqrt{3}", r"\boxed{2 + \sqrt{3}, 2 - \sqrt{3}}", True, "plus-minus written out"),
    Pair(r"\pm 2", r"\boxed{x = 2}", False, "one sign as an equation"),
    # extraction
    Pair(r"4", r"First guess \boxed{3}. Checking again, the count is \boxed{4}.", True, "last box wins"),
    Pair(r"2", r"Therefore, the final answer is $2$. I hope it is correct.", True, "'final answer is' fallback"),
    Pair(r"2", r"so we get 2", False, "no recognisable final answer"),
    Pair(r"\frac{1}{2}", r"Hence $x = \boxed{\frac{1}{", False, "truncated inside the box"),
    Pair(r"\emptyset", r"\boxed{\varnothing}", True, "empty set spelled varnothing"),
]
