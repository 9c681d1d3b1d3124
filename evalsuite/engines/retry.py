"""Bounded, classified retries.

A failure is either retryable (connection dropped, timeout, 429, 5xx, a
garbled, incomplete or oversized body, an error inside a 200) or fatal (any other 4xx: wrong model name, bad key, bad
request).  Fatal failures stop the run with the server's own message; they
are never scored as a wrong answer.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal, TypeVar

T = TypeVar("T")

FailureKind = Literal["connection", "timeout", "rate_limit", "server", "malformed", "incomplete", "too_large", "fatal"]


class RequestFailed(Exception):
    """One attempt failed; `kind` says whether trying again can help."""

    def __init__(self, kind: FailureKind, message: str, *, status: int | None = None, retry_after: float | None = None):
        super().__init__(message)
        self.kind = kind
        self.status = status
        self.retry_after = retry_after

    @property
    def retryable(self) -> bool:
        return self.kind != "fatal"


class RetriesExhausted(Exception):
    """Every allowed attempt failed with a retryable error."""

    def __init__(self, attempts: int, last: RequestFailed):
        super().__init__(f"gave up after {attempts} attempts; last error ({last.kind}): {last}")
        self.attempts = attempts
        self.last = last


@dataclass(frozen=True)
class RetryPolicy:
    max_retries: int = 5
    base_s: float = 0.5
    cap_s: float = 30.0
    retry_after_cap_s: float = 120.0

    def delay(self, attempt: int, failure: RequestFailed) -> float:
        """Exponential backoff with full jitter; a server's Retry-After wins when it is longer."""
        backoff = random.uniform(0, min(self.cap_s, self.base_s * 2**attempt))
        if failure.retry_after is not None:
            return min(max(backoff, failure.retry_after), self.retry_after_cap_s)
        return backoff


def parse_retry_after(value: str | None) -> float | None:
    """Seconds from a Retry-After header (delta-seconds form; HTTP dates are rare from inference servers)."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None


async def with_retries(
    attempt: Callable[[], Awaitable[T]],
    policy: RetryPolicy,
    *,
    on_retry: Callable[[int, RequestFailed], None] | None = None,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> tuple[T, int]:
    """Run `attempt` until it succeeds; returns (result, attempts used).  Fatal errors propagate at once."""
    tries = 0
    while True:
        tries += 1
        try:
            return await attempt(), tries
        except RequestFailed as failure:
            if not failure.retryable:
                raise
            if tries > policy.max_retries:
                raise RetriesExhausted(tries, failure) from failure
            if on_retry is not None:
                on_retry(tries, failure)
            await sleep(policy.delay(tries - 1, failure))
