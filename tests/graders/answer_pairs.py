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
    problem: str = ""


PROSE_PAIRS: list[Pair] = [
    # no box: the answer stated in the last sentences
    Pair("9", "Each exponent can be 0, 1 or 2, so the number of divisors is 9.", True, "prose: 'is N.'"),
    Pair(
        "7",
        "Checking: 7 nickels and 5 dimes make 85 cents. Therefore, Hillary has 7 nickels.",
        True,
        "prose: noun after the number",
    ),
    Pair(
        "284",
        "Adding the proper divisors gives 284, so the sum is indeed 284. I think that's the final answer.",
        True,
        "prose: closing remark after the answer",
    ),
    Pair(
        "284",
        "Adding the proper divisors gives 248, so the sum is indeed 248. I think that's the final answer.",
        False,
        "prose: wrong number",
    ),
    Pair(
        r"\frac{5}{12}",
        r"There are 36 outcomes and 15 favourable ones, so the probability is $\frac{15}{36} = \frac{5}{12}$.",
        True,
        "prose: math span with working",
    ),
    Pair("12", "She buys twelve boxes in all.", True, "prose: number word"),
    Pair(
        "30",
        "So far the total is 12 + 18 = 30 and then we still need to add the",
        False,
        "prose: cut mid-sentence is not read",
    ),
    Pair(
        "4", "The integers are 1, 2, 3 and 4; hmm, let me recount the cases where", False, "prose: no answer sentence"
    ),
    # "the answer is" followed by words
    Pair("8000", r"The final answer is definitely \(8000\) since $20^3 = 8000$.", True, "answer-is: filler word"),
    Pair("9", "The answer is 9 customers.", True, "answer-is: noun after the number"),
    Pair("28", "So the answer is 28 different pizzas.", True, "answer-is: adjective and noun"),
    Pair(r"12\pi", "The final answer is 12π inches per second.", True, "answer-is: unit after pi"),
    Pair("6", "The answer is indeed 6.", True, "answer-is: indeed"),
    Pair("3", "The answer is three boxes of crayons.", True, "answer-is: number word"),
    Pair("5", "The answer is three boxes of crayons.", False, "answer-is: number word, wrong"),
]

WORDY_PAIRS: list[Pair] = [
    # words inside the box
    Pair("12", r"She is in \boxed{12^{\mathrm{th}} \text{ grade}}.", True, "box: ordinal and word"),
    Pair("3", r"\boxed{3\text{rd}}", True, "box: ordinal suffix"),
    Pair("15", r"\boxed{15 \text{ cm}^2}", True, "box: unit with exponent"),
    Pair("15", r"\boxed{16 \text{ cm}^2}", False, "box: unit, wrong number"),
    Pair("42", r"\boxed{42 \text{ students}}", True, "box: noun"),
    Pair(r"\frac{3}{2}", r"\boxed{\frac{3}{2} \text{ hours}}", True, "box: fraction with unit"),
    # several parts with words between them: every part must match
    Pair("40, 60, 10", r"\boxed{40 \text{ chickens}, 60 \text{ cows}, 10 \text{ pigs}}", True, "parts: words between"),
    Pair(
        "40, 60, 10",
        r"\boxed{40 \text{ chickens}, 50 \text{ cows}, 20 \text{ pigs}}",
        False,
        "parts: first number right, others wrong",
    ),
    Pair("40", r"\boxed{40 \text{ chickens and } 50 \text{ cows}}", False, "parts: extra part"),
    Pair("3, 5", r"The final answer is 3 red and 5 blue marbles.", True, "parts: prose with nouns"),
]

HARD_PAIRS: list[Pair] = [
    # decimals for exact values, only when approximation is asked for or stated
    Pair(r"\frac{14}{3}", r"So the length is $\frac{14}{3} \approx \boxed{4.67}$.", True, "approx: stated"),
    Pair(r"\frac{14}{3}", r"\boxed{4.68}", False, "approx: stated nowhere, wrong digits"),
    Pair(r"\frac{14}{3}", r"So the length is approximately $\boxed{4.68}$.", False, "approx: badly rounded"),
    Pair(r"2\sqrt{2}", r"\boxed{2.8}", True, "approx: precision asked", "Express your answer to the nearest tenth."),
    Pair(
        r"2\sqrt{2}",
        r"\boxed{2.9}",
        False,
        "approx: precision asked, wrong",
        "Express your answer to the nearest tenth.",
    ),
    Pair(r"\pi", r"It is about $\boxed{3.1}$.", False, "approx: too few digits unasked"),
    # inequalities and set-builder notation against intervals
    Pair(r"(3, \infty)", r"\boxed{x > 3}", True, "sets: inequality"),
    Pair(r"(3, \infty)", r"\boxed{x \geq 3}", False, "sets: inequality, closed end"),
    Pair(r"[-2, 7]", r"\boxed{-2 \le x \le 7}", True, "sets: double inequality"),
    Pair(r"(-\infty, 2) \cup (3, \infty)", r"\boxed{x < 2 \text{ or } x > 3}", True, "sets: two inequalities"),
    Pair(r"(-\infty, 2) \cup (3, \infty)", r"\boxed{x < 2 \text{ or } x > 4}", False, "sets: two inequalities, wrong"),
    Pair(r"(5, \infty)", r"\boxed{\{x \mid x > 5\}}", True, "sets: set-builder"),
    Pair(r"(5, \infty)", r"\boxed{\{x \mid x < 5\}}", False, "sets: set-builder, wrong side"),
    # labelled parts
    Pair("-2, -2", r"\boxed{a = -2, b = -2}", True, "labels: two equal parts"),
    Pair("(3, -1)", r"\boxed{x = 3, y = -1}", True, "labels: ordered pair"),
    Pair("(3, -1)", r"\boxed{x = -1, y = 3}", False, "labels: swapped values"),
    # equations against expressions, and scaled equations
    Pair(r"x^2 - 4x + 3", r"\boxed{f(x) = x^2 - 4x + 3}", True, "equations: function definition"),
    Pair(r"y = -2x", r"\boxed{2x + y = 0}", True, "equations: rearranged"),
    Pair(r"2x - y + 3z = 4", r"\boxed{-4x + 2y - 6z + 8 = 0}", True, "equations: scaled plane"),
    Pair(r"2x - y + 3z = 4", r"\boxed{2x - y + 3z = -4}", False, "equations: other constant"),
    # renamed variables
    Pair(r"f(x) = 3x - 1", r"\boxed{f(t) = 3t - 1}", True, "rename: function argument"),
    Pair(r"2k + 2", r"\boxed{2n + 2}", True, "rename: expression"),
    Pair(r"2k + 2", r"\boxed{2n + 4}", False, "rename: different expression"),
    Pair(r"x - y", r"\boxed{y - x}", False, "rename: two variables are not swapped"),
    # degrees and radians
    Pair(r"\frac{\pi}{3}", r"\boxed{60^\circ}", True, "angles: degrees for radians"),
    Pair(r"150^\circ", r"\boxed{\frac{5\pi}{6}}", True, "angles: radians for degrees"),
    Pair(r"150^\circ", r"\boxed{\frac{5\pi}{3}}", False, "angles: wrong radians"),
    Pair(r"\frac{\pi}{3}", r"\boxed{60}", False, "angles: no degree mark"),
    # expressions sympy is slow to simplify are decided numerically
    Pair(
        "0",
        r"\boxed{\omega^{2024} + \omega^{2025} + \omega^{2026} - \omega^{2024}(1 + \omega + \omega^2)}",
        True,
        "numeric: powers of omega",
    ),
    Pair("1", r"\boxed{\omega^{1997} + \omega^{-1997}}", False, "numeric: omega expression is not constant"),
]

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
    Pair(
        r"\begin{pmatrix} 1 \\ 2 \end{pmatrix}",
        r"\boxed{\begin{pmatrix}2\\1\end{pmatrix}}",
        False,
        "vector entries swapped",
    ),
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
    Pair(r"2", r"I could not finish this problem.", False, "no recognisable final answer"),
    Pair(r"\frac{1}{2}", r"Hence $x = \boxed{\frac{1}{", False, "truncated inside the box"),
    Pair(r"\emptyset", r"\boxed{\varnothing}", True, "empty set spelled varnothing"),
    *PROSE_PAIRS,
    *WORDY_PAIRS,
    *HARD_PAIRS,
]
