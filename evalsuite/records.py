"""Plain records passed between the stages (task -> generate -> store -> grade -> diff).

Every stage takes and returns these; none of them knows about HTTP, SQLite or
reports.  Token-level data is kept column-wise in numpy arrays because the diff
has to walk millions of tokens quickly.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import chain
from typing import Any, Literal

import numpy as np

TokenLevel = Literal["ids", "strings", "text"]
"""How much token detail an engine gave: ids (best), token strings, or text only."""


@dataclass(frozen=True)
class Sample:
    """One dataset item, ready to be prompted.

    `id` is stable across dataset revisions where the source has a stable key
    (MATH-500 `unique_id`); `strata` are the fields results are broken down by.
    """

    id: str
    task: str
    messages: tuple[dict[str, str], ...]
    reference: Any
    strata: dict[str, str] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def prompt_text(self) -> str:
        """The prompt flattened for completions-style APIs."""
        return "\n\n".join(m["content"] for m in self.messages)


@dataclass(frozen=True)
class GenerationParams:
    """Everything sent to the engine that changes its output (its JSON form is part of the run fingerprint)."""

    max_tokens: int = 8192
    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int | None = 1
    seed: int = 42
    n: int = 1
    top_logprobs: int = 5
    stop: tuple[str, ...] = ()


@dataclass
class TokenTrace:
    """Per-token data of one completion, column-wise.

    Missing values: id -1, logprob NaN, top_* padded with -1 / NaN / "".  A
    speculative llama-server returns accepted draft tokens with logprob 0.0 and
    no alternatives; `has_top[i]` is False there so a diff never mistakes them
    for confident tokens.
    """

    ids: np.ndarray  # int64 [n], -1 when the engine gave no id
    pieces: list[str]  # decoded token strings ([] when loaded without strings: ids suffice)
    raw: list[bytes | None]  # exact token bytes when the engine gave them
    logprobs: np.ndarray  # float32 [n]
    top_ids: np.ndarray  # int64 [n, k]
    top_logprobs: np.ndarray  # float32 [n, k]
    top_pieces: list[list[str]]  # [n][<=k]

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def has_ids(self) -> bool:
        return len(self.ids) > 0 and bool((self.ids >= 0).all())

    @property
    def has_top(self) -> np.ndarray:
        return ~np.isnan(self.top_logprobs[:, 0]) if self.top_logprobs.size else np.zeros(len(self), bool)

    @property
    def level(self) -> TokenLevel:
        return "ids" if self.has_ids else "strings"

    @property
    def has_pieces(self) -> bool:
        """Whether the tokens' strings were given (and read): what tells tokens apart without ids."""
        return bool(self.pieces)

    @property
    def exact_bytes(self) -> bool:
        """Whether every token came with its exact bytes: then they, not the decoded pieces, say which it is."""
        return len(self.raw) == len(self.ids) and None not in self.raw

    @property
    def streamed(self) -> bool:
        """Whether the tokens' strings are held joined, as one stream: `joined` is then free, and the lists are made
        only when asked for."""
        return False

    def joined(self, exact: bool) -> tuple[bytes, np.ndarray]:
        """The tokens as one byte string and where each ends in it: their exact bytes (`exact`), else their
        pieces (see `joined_pieces`).  Equal tokens join equal, so outputs are compared in C, not token by token."""
        return joined_bytes(self.raw) if exact else joined_pieces(self.pieces)  # type: ignore[arg-type]

    def text_of(self, start: int, stop: int) -> str:
        """The pieces of tokens `start` to `stop` (a slice's bounds, clipped to the trace) joined: a window's text."""
        return "".join(self.pieces[start:stop])

    def top_names(self) -> list[str] | None:
        """Every alternative's string, row after row, when every row holds k of them (else None)."""
        n, k = self.top_ids.shape
        rows = self.top_pieces
        if not n or not k or len(rows) != n or set(map(len, rows)) != {k}:
            return None
        return list(chain.from_iterable(rows))

    def named_at(self, position: int, names: list[str]) -> TokenTrace:
        """This trace with the alternatives' strings of one token only (`names`), every other row left empty:
        what is read of a long output where a diff or a report looks at one token's alternatives."""
        rows = one_row_named(len(self), position, names)
        return TokenTrace(self.ids, self.pieces, self.raw, self.logprobs, self.top_ids, self.top_logprobs, rows)


def one_row_named(length: int, position: int, names: list[str]) -> list[list[str]]:
    """`length` rows of alternatives' strings, `names` at `position` and every other row one shared empty list."""
    rows: list[list[str]] = [[]] * length
    rows[position] = names
    return rows


def joined_bytes(chunks: list[bytes]) -> tuple[bytes, np.ndarray]:
    """Byte strings joined, and where each ends (int64)."""
    return b"".join(chunks), np.cumsum(np.fromiter(map(len, chunks), np.int64, len(chunks)))


def joined_pieces(pieces: list[str]) -> tuple[bytes, np.ndarray]:
    """Strings joined as their `piece_bytes`, so that no two lists of strings join the same; and where each
    string's bytes end (int64)."""
    return joined_bytes(piece_bytes(pieces))


def piece_bytes(pieces: list[str]) -> list[bytes]:
    """Each string as UTF-8, a lone surrogate (half of a character a tokenizer split) as its own three bytes."""
    try:
        return list(map(str.encode, pieces))
    except UnicodeEncodeError:
        return [p.encode("utf-8", "surrogatepass") for p in pieces]


@dataclass
class Completion:
    """What one request produced, with enough detail to diff, grade and time it.

    `text` is everything generated (a thinking model's reasoning included), in
    the order it was generated: text diffs and token checks see all of it.
    `reasoning` and `answer` split it for thinking models: the grade stage
    reads `answer_text` only, so numbers in the reasoning are never taken for
    the answer.  `reasoning_cut` marks a generation that ended inside its
    reasoning (it never reached an answer).
    """

    text: str
    finish_reason: str | None
    tokens: TokenTrace | None = None
    usage: dict[str, int] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    latency_s: float = 0.0
    ttft_s: float | None = None
    engine_extra: dict[str, Any] = field(default_factory=dict)
    reasoning: str | None = None  # None: no reasoning was produced (or the run predates the split)
    answer: str | None = None  # None: the whole text is the answer
    reasoning_cut: bool = False

    @property
    def answer_text(self) -> str:
        """The final answer, what graders read: the text after the reasoning, or all of it when there is none."""
        return self.text if self.answer is None else self.answer

    @property
    def truncated_in_reasoning(self) -> bool:
        """Cut off by the token limit before the reasoning ended: truncated, and reported apart."""
        return self.reasoning_cut and self.truncated

    @property
    def token_level(self) -> TokenLevel:
        return self.tokens.level if self.tokens is not None and len(self.tokens) else "text"

    @property
    def truncated(self) -> bool:
        return self.finish_reason == "length"

    @property
    def completion_tokens(self) -> int | None:
        if "completion_tokens" in self.usage:
            return int(self.usage["completion_tokens"])
        return len(self.tokens) if self.tokens is not None else None


@dataclass(frozen=True)
class SampleResult:
    """A stored (sample, completion) pair: the unit the run store keeps."""

    sample_id: str
    task: str
    strata: dict[str, str]
    completion: Completion
    attempts: int = 1
    finished_at: float = 0.0


GradeStatus = Literal["correct", "incorrect", "ungraded"]


@dataclass(frozen=True)
class Grade:
    """A grader's judgement of one completion, with the evidence for it.

    `ungraded` is explicit (a timeout, a missing reference) so it is never
    silently counted as wrong.
    """

    sample_id: str
    status: GradeStatus
    extracted: str | None
    reason: str
    score: float = 0.0
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def correct(self) -> bool:
        return self.status == "correct"
