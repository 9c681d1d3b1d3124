"""Verdicts with one-sentence reasons: token level, accuracy level, and the combined summary line."""

from evalsuite.verdict.accuracy import AccuracyLabel, AccuracyVerdict, accuracy_verdict
from evalsuite.verdict.summary import summary_line
from evalsuite.verdict.token import RateCheck, TokenLabel, TokenVerdict, rate_check, token_verdict

__all__ = [
    "AccuracyLabel",
    "AccuracyVerdict",
    "RateCheck",
    "TokenLabel",
    "TokenVerdict",
    "accuracy_verdict",
    "rate_check",
    "summary_line",
    "token_verdict",
]
