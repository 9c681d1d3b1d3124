"""Competition-style math problems written from templates, for training data only.

MATH-500's problems are LaTeX (`$\\frac{a}{b}$`, `\\pmod`, `\\dbinom`) across
seven subjects, and a model answers them in a different register than GSM8K's
word problems.  MATH's own training split is not among the suite's local
data, and MATH-500 is evaluated, so these problems stand in: the same
subjects and notation, numbers drawn from a seeded generator, none of them
a MATH problem.  Only the *questions* matter; the training data are the
target model's own answers to them.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable

Template = Callable[[random.Random], tuple[str, str]]
"""Draws one problem: (subject, problem text)."""


def _nz(r: random.Random, lo: int, hi: int) -> int:
    return r.choice([v for v in range(lo, hi + 1) if v != 0])


def _poly(a: int, b: int, c: int) -> str:
    """`a x^2 + b x + c` as MATH writes it (no `1x`, no `+ -`)."""
    out = "x^2" if a == 1 else ("-x^2" if a == -1 else f"{a}x^2")
    for coef, var in ((b, "x"), (c, "")):
        if coef:
            mag = abs(coef)
            body = var if (mag == 1 and var) else f"{mag}{var}"
            out += f" {'+' if coef > 0 else '-'} {body}"
    return out


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


TEMPLATES: tuple[Template, ...] = (
    lambda r: ("Algebra", f"Solve for $x$: ${r.randint(2, 9)}x + {r.randint(1, 30)} = {r.randint(31, 90)}$."),
    lambda r: (
        "Algebra",
        f"If $f(x) = \\frac{{{r.randint(1, 9)}x-{r.randint(1, 9)}}}{{x-{r.randint(1, 5)}}}$, what is the value of "
        f"$f({-r.randint(1, 4)})$? Express your answer as a common fraction.",
    ),
    lambda r: (
        "Algebra",
        f"What is the slope of the line passing through $({r.randint(-9, 9)}, {r.randint(-9, 9)})$ and "
        f"$({r.randint(10, 19)}, {r.randint(-9, 9)})$? Express your answer as a common fraction.",
    ),
    lambda r: ("Algebra", f"Expand the product $(x+{r.randint(1, 12)})(x-{r.randint(1, 12)})$."),
    lambda r: (
        "Algebra",
        f"What is the sum of all values of $x$ that satisfy $x^2 = {r.randint(2, 15)}x - {r.randint(1, 30)}$?",
    ),
    lambda r: (
        "Algebra",
        f"Evaluate $\\left\\lceil\\sqrt{{{r.randint(2, 150)}}}\\,\\right\\rceil + "
        f"\\left\\lfloor\\frac{{{r.randint(10, 99)}}}{{{r.randint(2, 9)}}}\\right\\rfloor$.",
    ),
    lambda r: (
        "Algebra",
        f"Consider the arithmetic sequence ${(a := r.randint(1, 20))}, {a + (d := r.randint(2, 9))}, {a + 2 * d}, "
        f"\\ldots$. What is the {_ordinal(r.randint(10, 40))} term of the sequence?",
    ),
    lambda r: (
        "Intermediate Algebra",
        f"Find all roots of the polynomial ${_poly(1, -(p := r.randint(1, 9)) - (q := r.randint(1, 9)), p * q)} = 0$. "
        "Enter all the roots, separated by commas.",
    ),
    lambda r: (
        "Intermediate Algebra",
        f"Let $a$ and $b$ be the roots of ${_poly(_nz(r, 1, 5), _nz(r, -12, 12), _nz(r, -12, 12))} = 0.$ "
        "Compute $a^2 + b^2.$",
    ),
    lambda r: (
        "Intermediate Algebra",
        f"Compute: ${r.randint(1, 5)}-{r.randint(6, 9)}+{r.randint(10, 14)}- \\dots +{r.randint(90, 199)}$.",
    ),
    lambda r: (
        "Intermediate Algebra",
        f"Find the minimum value of \\[x^2 + {2 * r.randint(1, 9)}x + {r.randint(1, 90)}\\]over all real numbers $x.$",
    ),
    lambda r: (
        "Intermediate Algebra",
        f"Let $z = {r.randint(1, 9)} + {r.randint(1, 9)}i$. Compute $|z^{r.randint(2, 4)}|$.",
    ),
    lambda r: ("Number Theory", f"How many positive whole-number divisors does {r.randint(24, 999)} have?"),
    lambda r: (
        "Number Theory",
        f"What is the remainder when ${r.randint(100, 9999)}$ is divided by ${r.randint(3, 13)}$?",
    ),
    lambda r: (
        "Number Theory",
        f"If $n \\equiv {r.randint(1, 6)} \\pmod{{{(m := r.choice([7, 9, 11, 13]))}}}$, then find the remainder when "
        f"$(n + {r.randint(1, 5)})(n + {r.randint(6, 9)})$ is divided by {m}.",
    ),
    lambda r: (
        "Number Theory",
        f"What is the greatest common divisor of ${r.randint(12, 999)}$ and ${r.randint(12, 999)}$?",
    ),
    lambda r: (
        "Number Theory",
        f"Express $0.\\overline{{{r.randint(10, 99)}}}$ as a common fraction in lowest terms.",
    ),
    lambda r: (
        "Number Theory",
        f"The base ${(b := r.choice([2, 3, 5, 7]))}$ number ${r.randint(1, b - 1)}{''.join(str(r.randint(0, b - 1)) for _ in range(4))}_{b}$ "
        "is equal to what number in base ten?",
    ),
    lambda r: (
        "Counting & Probability",
        f"Compute $\\dbinom{{{(n := r.randint(6, 20))}}}{{{r.randint(2, n - 2)}}}$.",
    ),
    lambda r: (
        "Counting & Probability",
        f"In how many ways can ${r.randint(4, 9)}$ people sit around a round table? "
        "(Two seatings are considered the same if one is a rotation of the other.)",
    ),
    lambda r: (
        "Counting & Probability",
        f"Two fair {r.choice([4, 6, 8])}-sided dice are rolled. What is the probability that the sum of the numbers "
        f"rolled is {r.randint(3, 9)}? Express your answer as a common fraction.",
    ),
    lambda r: (
        "Counting & Probability",
        f"A committee of ${r.randint(2, 4)}$ people is chosen from a club of ${r.randint(6, 12)}$ boys and "
        f"${r.randint(6, 12)}$ girls. In how many ways can the committee be chosen if it must contain exactly one girl?",
    ),
    lambda r: (
        "Geometry",
        f"A right triangle has legs of length ${r.randint(3, 20)}$ and ${r.randint(3, 20)}$ units. What is the length "
        "of the hypotenuse, in units? Express your answer in simplest radical form.",
    ),
    lambda r: (
        "Geometry",
        f"The area of a circle is ${r.randint(2, 30) ** 2}\\pi$ square centimeters. What is the circumference of the "
        "circle, in centimeters? Express your answer in terms of $\\pi$.",
    ),
    lambda r: (
        "Geometry",
        f"In triangle $ABC$, $\\angle A = {r.randint(20, 80)}^\\circ$ and $\\angle B = {r.randint(20, 80)}^\\circ$. "
        "What is the number of degrees in the measure of $\\angle C$?",
    ),
    lambda r: (
        "Geometry",
        f"A cylinder has radius ${r.randint(2, 9)}$ cm and volume ${r.randint(2, 30) * 9}\\pi$ cubic cm. "
        "What is the height of the cylinder, in centimeters?",
    ),
    lambda r: (
        "Precalculus",
        f"Convert the point $({r.randint(-6, 6)},{r.randint(-6, 6)})$ in rectangular coordinates to polar "
        "coordinates.  Enter your answer in the form $(r,\\theta),$ where $r > 0$ and $0 \\le \\theta < 2 \\pi.$",
    ),
    lambda r: (
        "Precalculus",
        f"Compute $\\{r.choice(['sin', 'cos', 'tan'])} {r.choice([0, 30, 45, 60, 90, 120, 135, 150, 180, 210, 270, 300, 330])}^\\circ$.",
    ),
    lambda r: (
        "Precalculus",
        f"Compute $\\begin{{pmatrix}} {r.randint(-9, 9)} \\\\ {r.randint(-9, 9)} \\end{{pmatrix}} + "
        f"{r.randint(2, 5)} \\begin{{pmatrix}} {r.randint(-9, 9)} \\\\ {r.randint(-9, 9)} \\end{{pmatrix}}$.",
    ),
    lambda r: (
        "Precalculus",
        f"Find the determinant of the matrix \\[\\begin{{pmatrix}} {r.randint(-9, 9)} & {r.randint(-9, 9)} \\\\ "
        f"{r.randint(-9, 9)} & {r.randint(-9, 9)} \\end{{pmatrix}}.\\]",
    ),
    lambda r: ("Prealgebra", f"Simplify $\\sqrt{{{r.randint(2, 30) * r.choice([4, 9, 16, 25])}}}$."),
    lambda r: (
        "Prealgebra",
        f"What is ${r.randint(5, 95)}\\%$ of ${r.randint(2, 80) * 10}$?",
    ),
    lambda r: (
        "Prealgebra",
        f"Simplify $\\frac{{{r.randint(2, 30)}}}{{{r.randint(31, 99)}}} \\cdot \\frac{{{r.randint(2, 30)}}}"
        f"{{{r.randint(2, 30)}}}$.",
    ),
    lambda r: (
        "Prealgebra",
        f"What is the least common multiple of ${r.randint(4, 40)}$, ${r.randint(4, 40)}$ and ${r.randint(4, 40)}$?",
    ),
    lambda r: (
        "Prealgebra",
        f"The perimeter of a rectangle is ${2 * r.randint(10, 60)}$ inches and its length is ${r.randint(2, 9)}$ inches "
        "longer than its width. What is the area of the rectangle, in square inches?",
    ),
)


def math_problems(count: int, seed: int = 0, exclude: frozenset[str] = frozenset()) -> list[dict[str, object]]:
    """`count` distinct problems, none in `exclude`, cycling through the templates, as math500 rows.

    A template that keeps drawing repeats is retired, so a count beyond what the
    templates can write raises instead of looping.
    """
    rng = random.Random(seed)
    seen: set[str] = set(exclude)
    live = list(TEMPLATES)
    misses: Counter[Template] = Counter()
    rows: list[dict[str, object]] = []
    turn = 0
    while len(rows) < count:
        if not live:
            raise ValueError(f"the templates cannot write {count} distinct problems (wrote {len(rows)})")
        template = live[turn % len(live)]
        subject, problem = template(rng)
        turn += 1
        if problem in seen:
            misses[template] += 1
            if misses[template] >= 50:
                live.remove(template)
            continue
        seen.add(problem)
        rows.append(
            {
                "problem": problem,
                "answer": "",
                "unique_id": f"written-{seed}-{len(rows)}",
                "subject": subject,
                "level": 0,
            }
        )
    return rows
