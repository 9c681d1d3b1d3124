"""An answer that leaves a function or a power unevaluated is not the value a problem asks to compute.

sympy finds `\\cos \\frac{2\\pi}{15} \\cdots` equal to `\\frac{1}{16}`; where the
problem says "Simplify", "Compute", "Evaluate" or asks to find an expression
that applies a function, such an answer restates the problem.  The near misses
are the forms that stay answers: the reference's own kind of function, values
such as `\\sqrt{2}`, `\\pi` and `2^{1/3}`, an expression answer, and a problem
that asks for no form.
"""

from __future__ import annotations

import logging

import pytest
from grader_helpers import item

from evalsuite.graders.equiv import _parse_math, check_equivalence
from evalsuite.graders.math import MathGrader
from evalsuite.graders.normal_form import asked_forms
from evalsuite.graders.unevaluated import closed, unevaluated

logging.getLogger("math_verify").setLevel(logging.ERROR)

TRIG = "a trigonometric function left to evaluate"
LOG = "a logarithm left to evaluate"
EXP = "an exponential left to evaluate"
POWER = "a power left to evaluate"
ROOT = "a root left to evaluate"

SIMPLIFY_COSINES = (
    "Simplify\n\\[\\cos \\left( \\frac{2 \\pi}{15} \\right) \\cos \\left (\\frac {4 \\pi}{15} \\right) "
    "\\cos \\left( \\frac{8 \\pi}{15} \\right) \\cos \\left( \\frac {16 \\pi}{15} \\right).\\]"
)
COMPUTE_ARCSIN = "Compute $\\arcsin \\left( -\\frac{1}{2} \\right).$  Express your answer in radians."
EVALUATE_LOG = "Evaluate $\\log_2 \\sqrt{2}$."
FIND_SINES = "Find $\\sin 20^\\circ \\sin 40^\\circ \\sin 80^\\circ.$"
VALUE_OF = "What is the value of $\\frac{3}{4} \\cdot \\frac{1}{12}$?"
SIMPLIFY_EXPRESSION = "Simplify $\\frac{\\sec x}{\\sin x} - \\frac{\\sin x}{\\cos x}.$"
COMPUTE_COMPOSITION = "Let $f(x) = 2^x$. Compute $\\log_2 f(x) + x$ as an expression in $x$."
DIAGONAL = "A square has side 1. What is the length of its diagonal?"
COSINES = "\\cos \\frac{2\\pi}{15} \\cos \\frac{4\\pi}{15} \\cos \\frac{8\\pi}{15} \\cos \\frac{16\\pi}{15}"


@pytest.mark.parametrize(
    ("problem", "forms"),
    [
        (SIMPLIFY_COSINES, {"simplest"}),
        (COMPUTE_ARCSIN, {"evaluated"}),
        (EVALUATE_LOG, {"evaluated"}),
        ("Calculate the sum of the first ten odd numbers.", {"evaluated"}),
        (FIND_SINES, {"evaluated"}),  # the expression to find applies a function
        ("What is $\\dbinom{8}{4}$?", {"evaluated"}),
        (VALUE_OF, {"evaluated"}),
        # asking for something that is not an expression's value: no form
        ("Find the number of ways to seat 5 people.", set()),
        ("Find $x$ if $\\sin x = 1$ and $0 < x < \\pi$.", set()),  # the expression to find is a variable
        (DIAGONAL, set()),
        ("Since $n$ is odd, how many values of $n$ are there?", set()),  # "since" is not a sine
    ],
)
def test_the_problem_asks_for_a_value(problem: str, forms: set[str]) -> None:
    assert asked_forms(problem) == forms


@pytest.mark.parametrize(
    ("answer", "left"),
    [
        ("\\sin 30^\\circ", {TRIG}),
        ("\\cos^2 x + \\sin^2 x", {TRIG}),
        ("\\tan^{-1} 1", {TRIG}),
        ("\\operatorname{arccot} 2", {TRIG}),
        ("sin(30)", {TRIG}),
        ("\\log_2 8", {LOG}),
        ("\\ln(e^2)", {LOG, EXP}),
        ("e^{\\ln 3}", {LOG, EXP}),
        ("\\exp(2)", {EXP}),
        ("5!", {"a factorial left to evaluate"}),
        ("\\frac{10!}{3!\\,7!}", {"a factorial left to evaluate"}),
        ("\\dbinom{8}{4}", {"a binomial coefficient left to evaluate"}),
        ("\\lfloor 2.5 \\rfloor", {"a floor or ceiling left to evaluate"}),
        ("\\gcd(12, 18)", {"a gcd or lcm left to evaluate"}),
        ("\\sum_{k=1}^{4} k", {"a sum, product, limit or integral left to evaluate"}),
        ("2^{10}", {POWER}),
        ("2^{-4}", {POWER}),
        ("3^{5}", {POWER}),
        ("10^{3}", {POWER}),
        ("2 \\cdot 3^{2}", {POWER}),
        ("3 \\times 10^{2} \\cdot 2^{3}", {POWER}),  # scientific notation, then a power
        ("8^{1/3}", {POWER}),
        ("4^{\\frac{3}{2}}", {POWER}),
        ("27^{-1/3}", {POWER}),
        ("\\sqrt{16}", {ROOT}),
        ("\\sqrt[3]{27}", {ROOT}),
        # values, not work left undone
        ("\\sqrt{2}", set()),
        ("\\sqrt{18}", set()),  # not in simplest form, but a value: "simplest" refuses it, not this rule
        ("1.5 \\times 10^{3}", set()),  # scientific notation
        ("x^2", set()),
        ("2^{1/3}", set()),  # an irrational power is a value, as \\sqrt[3]{2} is
        ("2^{\\frac{1}{3}}", set()),
        ("\\frac{\\pi}{4}", set()),
        ("10,\\!000", set()),  # a thin space, not a factorial
        ("(-\\infty, 3]", set()),
        ("\\left( 1, \\frac{1}{2} \\right)", set()),
        ("30 \\text{ sec}", set()),  # a unit, not a secant
        ("5 \\neq 4", set()),
    ],
)
def test_what_is_left_to_evaluate(answer: str, left: set[str]) -> None:
    assert unevaluated(answer) == left


@pytest.mark.parametrize(
    ("gold", "pred", "problem", "equal"),
    [
        # the function or power is left undone where the problem asks for the value
        ("\\frac{1}{16}", COSINES, SIMPLIFY_COSINES, False),
        ("-\\frac{\\pi}{6}", "\\arcsin(-\\frac{1}{2})", COMPUTE_ARCSIN, False),
        ("\\frac{1}{2}", "\\log_2 \\sqrt{2}", EVALUATE_LOG, False),
        ("\\frac{1}{2}", "\\log_4 2", EVALUATE_LOG, False),
        ("5", "\\log_2 32", "Find $\\log_2 8 + \\log_2 4$.", False),
        ("3", "e^{\\ln 3}", "Simplify $e^{\\ln 3}$.", False),
        ("2", "8^{1/3}", "Simplify $\\sqrt[3]{8}$.", False),
        ("4", "8^{\\frac{2}{3}}", "Compute $8^{2/3}$.", False),
        ("70", "\\dbinom{8}{4}", "Compute $\\dbinom{8}{4}$.", False),
        ("1024", "2^{10}", "Compute $2^{10}$.", False),
        ("4", "\\sqrt{16}", "Evaluate $\\sqrt{16}$.", False),
        ("120", "5!", "Evaluate $5!$.", False),
        ("1", "\\sin^2 x + \\cos^2 x", "Simplify $\\sin^2 x + \\cos^2 x$.", False),
        # the reference's own kind of function, and values, stay answers
        ("\\frac{1}{16}", "\\frac{1}{16}", SIMPLIFY_COSINES, True),
        ("\\frac{1}{16}", "0.0625", SIMPLIFY_COSINES, True),
        ("-\\frac{\\pi}{6}", "-\\frac{\\pi}{6}", COMPUTE_ARCSIN, True),
        ("\\log_2 3", "\\frac{\\ln 3}{\\ln 2}", "Simplify $\\log_4 9$.", True),
        ("\\log_2 3", "\\log_2 3", "Compute $\\log_4 9$.", True),
        ("\\cot x", "\\frac{\\cos x}{\\sin x}", SIMPLIFY_EXPRESSION, True),
        ("\\arctan 2", "\\tan^{-1} 2", "Compute the angle in radians.", True),
        ("\\sqrt[3]{2}", "2^{1/3}", "Simplify $\\sqrt[3]{16} / 2$.", True),
        ("3\\sqrt{2}", "3\\sqrt{2}", "Compute the length.", True),
        ("e^2", "e^{2}", "Compute $e \\cdot e$.", True),
        ("10000", "10{,}000", "Compute $100^2$.", True),
        ("1500", "1.5 \\times 10^{3}", "Compute $30 \\cdot 50$.", True),
        ("2^{100}", "2^{100}", "Compute $4^{50}$.", True),
        # "compute" asks for a number: an expression answer is judged by its value
        ("2x", "\\log_2 (2^x) + x", COMPUTE_COMPOSITION, True),
        # a value that is not in the asked form for another reason is not this rule's
        ("\\frac{1}{16}", "\\frac{2}{32}", VALUE_OF, True),
        # no value asked for: the value is what counts
        ("\\sqrt{2}", "2\\sin\\frac{\\pi}{4}", DIAGONAL, True),
        # wrong values stay wrong, and say so
        ("\\frac{1}{16}", "\\cos \\frac{2\\pi}{15}", SIMPLIFY_COSINES, False),
        ("-\\frac{\\pi}{6}", "\\frac{\\pi}{6}", COMPUTE_ARCSIN, False),
    ],
)
def test_a_value_left_unevaluated_is_not_the_answer(gold: str, pred: str, problem: str, equal: bool) -> None:
    equivalence = check_equivalence(gold, pred, forms=asked_forms(problem))
    assert equivalence.equal is equal, equivalence.reason


def test_only_a_value_without_variables_is_closed() -> None:
    assert closed(_parse_math("\\frac{1}{16}"))
    assert closed(_parse_math("\\left( 1, \\frac{1}{2} \\right)"))
    assert not closed(_parse_math("2x + 1"))
    assert not closed(None)  # an answer that did not parse


def test_the_reason_names_what_is_left_to_evaluate() -> None:
    got = check_equivalence("\\frac{1}{16}", COSINES, forms=asked_forms(SIMPLIFY_COSINES))
    assert got.reason == f"equal value, but not in the form the problem asks for: {TRIG}"
    assert got.details["form"] == TRIG
    wrong = check_equivalence("\\frac{1}{16}", "\\cos \\frac{2\\pi}{15}", forms=asked_forms(SIMPLIFY_COSINES))
    assert "form" not in wrong.details


def test_the_grader_refuses_a_problem_restated() -> None:
    grades = MathGrader().grade_batch(
        [
            item("\\frac{1}{16}", f"Multiplying out, the product is $\\boxed{{{COSINES}}}$.", problem=SIMPLIFY_COSINES),
            item("\\frac{1}{16}", "The product is $\\boxed{\\frac{1}{16}}$.", problem=SIMPLIFY_COSINES),
        ],
        workers=1,
    )
    assert [g.status for g in grades] == ["incorrect", "correct"]
    assert grades[0].details["form"] == TRIG
