"""Does the returned text say what the returned tokens say?

The token diff trusts the tokens and the grader trusts the text; a server
whose two disagree would be judged lossless on one and scored on the other.
Where the tokens carry their text (bytes, or readable token strings), their
concatenation must spell the returned text (reasoning included).  What servers
legitimately leave out of the text is not counted: whitespace they trim,
`<think>` tags and special-token markup they strip, and, after a stop, the
stop string or end-of-turn token that ended the generation.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from evalsuite.engines.columns import TOKEN_ID_PREFIX, Columns
from evalsuite.engines.validate import Malformed

_MARKUP = re.compile(r"</?think>|<\|[^|<>\s]{0,40}\|>|</s>|<s>|<eos>|<bos>|<end_of_turn>|<start_of_turn>")


def _normal(text: str) -> str:
    """The text without markup and whitespace.  `str.split` drops what the regex `\\s` matches (Unicode's
    whitespace) at a quarter of `re.sub`'s cost, which a thinking model's split-off reasoning pays on every
    answer: its text (reasoning and answer, tags dropped) never equals what the tokens spell."""
    return "".join(_MARKUP.sub("", text).split())


def token_text(entries: Sequence[dict[str, Any]]) -> str | None:
    """The text the tokens spell, or None when some token carries no text (ids only)."""
    parts: list[bytes] = []
    for entry in entries:
        raw = entry.get("bytes")
        token = entry.get("token")
        if isinstance(token, str) and token.startswith(TOKEN_ID_PREFIX):
            return None  # vLLM's ids-as-tokens: its bytes may spell "token_id:N" itself, not the token
        if isinstance(raw, list):
            parts.append(bytes(raw))
        elif isinstance(token, str):
            parts.append(token.encode("utf-8", "surrogatepass"))
        else:
            return None
    return b"".join(parts).decode("utf-8", "replace")


def check_agreement(
    text: str,
    entries: Sequence[dict[str, Any]] | Columns,
    *,
    finish_reason: str | None,
    stop: Sequence[str] = (),
) -> None:
    """Raise Malformed when the tokens' own text contradicts the returned text.

    `entries` are `logprobs.content`-shaped dicts, or their columns when the schema check gathered them.
    """
    if not len(entries):
        return
    spelled = entries.text() if isinstance(entries, Columns) else token_text(entries)
    if spelled is None or spelled == text:  # the usual case: equal text needs no normalising
        return
    said, tokens = _normal(text), _normal(spelled)
    if "\ufffd" in tokens and "\ufffd" not in said:
        # token strings of split multi-byte characters: compare what both spell in ASCII
        said, tokens = _ascii(said), _ascii(tokens)
    if said == tokens:
        return
    if finish_reason == "stop" and tokens.startswith(said) and _stop_tail(tokens[len(said) :], stop):
        return
    if finish_reason == "stop" and stop and said.startswith(tokens):
        longest = max(len(_normal(s)) for s in stop) + 8
        if len(said) - len(tokens) <= longest:
            return  # the server dropped the stop string's tokens and a few characters around it
    at = next((i for i, (a, b) in enumerate(zip(said, tokens)) if a != b), min(len(said), len(tokens)))
    raise Malformed(
        f"the returned text does not match its {len(entries)} returned tokens "
        f"(from character {at} of the text without spaces: text {said[at : at + 40]!r}, "
        f"tokens {tokens[at : at + 40]!r})"
    )


def _ascii(text: str) -> str:
    return "".join(ch for ch in text if ord(ch) < 128)


def _stop_tail(tail: str, stop: Sequence[str]) -> bool:
    """Tokens past the text are fine only when they are what stopped the generation."""
    if not tail:
        return True
    marks = [_normal(s) for s in stop]
    return any(mark and tail.startswith(mark) for mark in marks)
