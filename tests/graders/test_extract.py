"""Extraction steps on the shapes real responses take."""

from __future__ import annotations

from decimal import Decimal

import pytest

from evalsuite.errors import ConfigError
from evalsuite.graders.extract import (
    boxed_spans,
    final_answer_is,
    hash_line,
    last_boxed,
    last_number,
    miss_reason,
    parse_number,
    resolve_steps,
    run_pipeline,
)


def test_last_boxed_handles_nesting_fbox_and_escaped_braces() -> None:
    text = r"first \boxed{1} then \fbox{\frac{1}{\sqrt{2}}} and \boxed{\{1, 2\} \cup \{3\}}"
    assert [s[2] for s in boxed_spans(text)] == ["1", r"\frac{1}{\sqrt{2}}", r"\{1, 2\} \cup \{3\}"]
    found = last_boxed(text)
    assert found is not None and found.answer == r"\{1, 2\} \cup \{3\}" and found.count == 3


def test_last_boxed_ignores_an_unclosed_box_and_reads_the_braceless_form() -> None:
    assert last_boxed(r"\boxed{3} so far, then \boxed{\frac{1}{") is not None
    assert last_boxed(r"\boxed{3} so far, then \boxed{\frac{1}{").answer == "3"  # type: ignore[union-attr]
    assert last_boxed(r"The answer is $\boxed 7$.").answer == "7"  # type: ignore[union-attr]
    assert last_boxed("no box here") is None


def test_last_boxed_joins_adjacent_boxes_only() -> None:
    joined = last_boxed(r"so $x = \boxed{1}$ and $x = \boxed{-2}$")
    assert joined is not None and joined.answer == "-2" and joined.joined is None  # "x =" sits between them
    adjacent = last_boxed(r"The solutions are $\boxed{1}$, $\boxed{-2}$ and $\boxed{3}$.")
    assert adjacent is not None and adjacent.joined == "1, -2, 3"
    separate = last_boxed(r"We get \boxed{2}. Checking the other case gives \boxed{5}.")
    assert separate is not None and separate.joined is None


@pytest.mark.parametrize(
    ("text", "answer"),
    [
        ("Therefore, the final answer is $\\frac{3}{4}$. I hope it is correct.", "\\frac{3}{4}"),
        ("**Final Answer:** 42.", "42"),
        ("The answer is: \\(2\\sqrt{3}\\)", "2\\sqrt{3}"),
        ("the answer is 12 apples.\nThen more text", "12"),
        ("Final answer: \\boxed{7} (checked)", "7"),
        ("Some working.\nAnswer: $-3$", "-3"),
        ("The answer is 4. Then \\boxed{5}", "4"),
    ],
)
def test_final_answer_is_variants(text: str, answer: str) -> None:
    found = final_answer_is(text)
    assert found is not None and found.answer == answer


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("$1,234.50", Decimal("1234.50")),
        ("-7.", Decimal("-7")),
        ("about 18 dollars", Decimal("18")),
        ("1,2,3", Decimal("1")),
        ("x-5", Decimal("5")),
        (".5", Decimal("0.5")),
        ("none", None),
    ],
)
def test_parse_number(text: str, value: Decimal | None) -> None:
    assert parse_number(text) == value


def test_hash_line_takes_the_last_line_and_normalises_the_number() -> None:
    text = "#### 3 is a guess\nWorking...\n#### $1,000.00."
    found = hash_line(text)
    assert found is not None and found.answer == "1000"
    assert hash_line("#### none") is None


def test_last_number_skips_trailing_period_and_keeps_sign() -> None:
    found = last_number("She has 5 apples, then loses 8: she owes -3.")
    assert found is not None and found.answer == "-3"


def test_pipeline_order_and_miss_reason() -> None:
    text = "The answer is 4. \\boxed{5}"
    assert run_pipeline(["last_boxed", "final_answer_is"], text).step == "last_boxed"  # type: ignore[union-attr]
    assert run_pipeline(["final_answer_is", "last_boxed"], text).answer == "4"  # type: ignore[union-attr]
    assert run_pipeline(["last_boxed"], "nothing") is None
    assert miss_reason(["last_boxed", "final_answer_is"]) == "no \\boxed{} and no 'final answer is' found"


def test_unknown_step_is_a_config_error_naming_it() -> None:
    with pytest.raises(ConfigError, match="unknown extraction step 'last_boxd'.*last_boxed"):
        resolve_steps(["last_boxd"], "math")
    with pytest.raises(ConfigError, match="at least one"):
        resolve_steps([], "math")
