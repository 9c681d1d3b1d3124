"""Token entries with one alternative each, as an engine's logprobs give them: the traces compare tests build on."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def token_entries(
    ids: list[int], logprob: float, runner_up: Callable[[int], tuple[int, str, float]]
) -> list[dict[str, Any]]:
    """Token `t{i}` for each id at `logprob`, its one alternative `runner_up(i)` = (id, token, logprob)."""
    entries = []
    for i in ids:
        alt_id, alt_token, alt_logprob = runner_up(i)
        alternatives = [
            {"id": i, "token": f"t{i}", "logprob": logprob},
            {"id": alt_id, "token": alt_token, "logprob": alt_logprob},
        ]
        entries.append({"id": i, "token": f"t{i}", "logprob": logprob, "top_logprobs": alternatives})
    return entries
