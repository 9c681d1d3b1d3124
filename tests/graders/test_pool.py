"""Worker pool: results in order, and a hang, a crash or an exception costs one item only."""

from __future__ import annotations

import math
import os
import time

import pytest

from evalsuite.graders.pool import Failure, run_isolated


def test_results_come_back_in_order_with_exceptions_as_failures() -> None:
    out = run_isolated(math.sqrt, [4.0, -1.0, 9.0, 16.0, 25.0], workers=2, timeout_s=60)
    assert out[0] == 2.0 and out[2:] == [3.0, 4.0, 5.0]
    assert isinstance(out[1], Failure) and out[1].message == "grader error: ValueError: math domain error"


def test_a_hanging_item_is_stopped_and_the_rest_still_run() -> None:
    out = run_isolated(time.sleep, [0.01, 600, 0.01, 0.01], workers=2, timeout_s=3)
    assert out[0] is None and out[2] is None and out[3] is None  # time.sleep returns None
    assert isinstance(out[1], Failure) and "timed out after 3 s" in out[1].message


def test_a_worker_that_dies_costs_only_its_item() -> None:
    out = run_isolated(os._exit, [3, 4], workers=1, timeout_s=60)
    assert out == [
        Failure("the grading worker exited unexpectedly (exit code 3)"),
        Failure("the grading worker exited unexpectedly (exit code 4)"),
    ]


def test_functions_that_cannot_be_imported_by_name_are_refused() -> None:
    with pytest.raises(ValueError, match="module-level function"):
        run_isolated(lambda x: x, [1])
    assert run_isolated(math.sqrt, []) == []
