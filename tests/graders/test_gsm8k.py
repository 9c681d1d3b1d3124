"""GSM8K graders: exact numeric match, and lm-evaluation-harness's gsm8k scoring."""

from __future__ import annotations

import pytest
from grader_helpers import item

from evalsuite.errors import ConfigError
from evalsuite.graders.gsm8k import (
    GSM8KGrader,
    LMEvalGSM8KGrader,
    reference_number,
)

REF = "She sells 16 - 3 - 4 = <<16-3-4=9>>9 eggs.\nShe makes 9 * 2 = $<<9*2=18>>18.\n#### 1,018"


@pytest.mark.parametrize(
    ("response", "status", "extracted", "step"),
    [
        ("... so she makes $1018.\n#### 1018", "correct", "1018", "hash_line"),
        ("#### $1,018.00", "correct", "1018", "hash_line"),
        ("#### 1018.", "correct", "1018", "hash_line"),
        ("The answer is 1,018 dollars.", "correct", "1018", "final_answer_is"),
        ("Total: \\boxed{1018}", "correct", "1018", "last_boxed"),
        ("She made 1018 dollars, then 3 more", "incorrect", "3", "last_number"),
        ("#### 1017", "incorrect", "1017", "hash_line"),
        ("#### -1018", "incorrect", "-1018", "hash_line"),
    ],
)
def test_numeric_match(response: str, status: str, extracted: str, step: str) -> None:
    grader = GSM8KGrader(extraction=["hash_line", "last_boxed", "final_answer_is", "last_number"])
    [grade] = grader.grade_batch([item(REF, response)])
    assert (grade.status, grade.extracted, grade.details["step"]) == (status, extracted, step), grade.reason
    assert grade.details["gold"] == "1018"


def test_no_number_and_no_reference() -> None:
    grader = GSM8KGrader()
    grades = grader.grade_batch(
        [item(REF, "I cannot tell."), item("no final line here", "#### 3"), item("-7", "#### -7")]
    )
    assert grades[0].status == "incorrect" and grades[0].reason == "no '#### N' line and no number found"
    assert grades[1].status == "ungraded" and "no '#### N' line" in grades[1].reason
    assert grades[2].status == "correct"  # a bare-number reference is accepted
    assert reference_number("#### 12\n#### 13") == 13


def test_gsm8k_grader_rejects_math_only_steps_and_options() -> None:
    with pytest.raises(ConfigError, match="unknown extraction step 'lmeval'"):
        GSM8KGrader(extraction=["lmeval"])
    with pytest.raises(ConfigError, match="unknown option 'tolerance'"):
        GSM8KGrader(tolerance=0.1)


# Expected values worked out by hand from lm-eval 0.4.13's gsm8k.yaml (regex
# filters, take_first, exact_match with ignore_case and regexes_to_ignore).
LMEVAL_CASES = [
    # response, strict-match extraction, strict correct, flexible extraction, flexible correct
    ("So 1018.\n#### 1018", "1018", True, "1018", True),
    ("#### 1,018", "1,018", True, "1,018", True),
    ("#### 1018.", "1018.", True, "1018.", True),
    ("#### $1018", "[invalid]", False, "$1018", True),  # strict's regex has no "$"
    ("The answer is 1018.", "[invalid]", False, "1018.", True),
    ("1018 eggs, and 5 left over", "[invalid]", False, "5", False),  # flexible takes the last number
    ("#### 1018\nQuestion: next one? 7", "1018", True, "1018", True),  # cut at "Question:"
    ("#### 1018.00", "1018.00", False, "1018.00", False),  # no numeric normalisation
    ("", "[invalid]", False, "[invalid]", False),
]


@pytest.mark.parametrize(("response", "strict", "strict_ok", "flex", "flex_ok"), LMEVAL_CASES)
def test_lmeval_scoring(response: str, strict: str, strict_ok: bool, flex: str, flex_ok: bool) -> None:
    pytest.importorskip("lm_eval")
    [grade] = LMEvalGSM8KGrader().grade_batch([item(REF, response)])
    assert grade.details["strict-match"] == {"extracted": strict, "correct": strict_ok}
    assert grade.details["flexible-extract"] == {"extracted": flex, "correct": flex_ok}
    assert grade.status == ("correct" if strict_ok else "incorrect")  # strict-match is listed first
    assert grade.extracted == (None if strict == "[invalid]" else strict)


def test_lmeval_primary_filter_and_until_option() -> None:
    pytest.importorskip("lm_eval")
    grader = LMEvalGSM8KGrader(extraction=["flexible-extract"], until=[])
    [grade] = grader.grade_batch([item(REF, "#### 1018\nQuestion: next one? 7")])
    assert grade.status == "incorrect" and grade.extracted == "7"  # nothing cut, so the last number is 7
    assert "strict-match" not in grade.details
    with pytest.raises(ConfigError, match="unknown extraction step 'strict'"):
        LMEvalGSM8KGrader(extraction=["strict"])


def test_numbers_inside_a_leftover_reasoning_block_are_not_the_answer() -> None:
    grader = GSM8KGrader(extraction=["hash_line", "last_boxed", "final_answer_is", "last_number"])
    after = "<think>Maybe #### 1017? No: 16 - 3 - 4 = 9 eggs, 9 * 2 = 18.</think>\nShe makes $1018.\n#### 1018"
    cut = "<think>16 - 3 - 4 = 9 eggs, so #### 1018 is likely, but let me check the"
    grades = grader.grade_batch([item(REF, after), item(REF, cut, truncated=True)])
    assert (grades[0].status, grades[0].details["step"]) == ("correct", "hash_line")
    assert grades[1].status == "incorrect" and grades[1].extracted is None  # cut inside the reasoning: no answer


def test_gsm8k_lmeval_is_the_lmeval_adapters_gsm8k_scoring_per_sample() -> None:
    """One implementation of lm-eval's scoring: the task file's grader and lm-eval's gsm8k task agree."""
    pytest.importorskip("lm_eval")
    from evalsuite.graders import GradeInput
    from evalsuite.lmeval.grader import LMEvalGrader
    from evalsuite.lmeval.select import LMEvalOptions
    from evalsuite.records import Sample

    options = LMEvalOptions(task="gsm8k", num_fewshot=0)
    adapter = LMEvalGrader(lmeval=options.model_dump(), identity={})
    responses = [c[0].split("Question:")[0] for c in LMEVAL_CASES] + ["-5 and -3.5", "$ 12", "1.2.3, 4,5", "##### 12"]
    sample = Sample("s", "gsm8k", (), {"question": "q", "answer": REF}, {"lmeval_task": "gsm8k"})
    theirs = adapter.grade_batch([GradeInput(sample, r) for r in responses])
    ours = LMEvalGSM8KGrader().grade_batch([item(REF, r) for r in responses])
    for response, a, b in zip(responses, ours, theirs):
        for name in ("strict-match", "flexible-extract"):
            got = b.details["lmeval"][name]
            assert a.details[name] == {"extracted": got["filtered"], "correct": got["exact_match"] == 1.0}, response
        assert a.status == b.status, response
