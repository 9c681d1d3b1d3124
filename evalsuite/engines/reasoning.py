"""Split a thinking model's reasoning from its final answer, whichever way the server delivers it.

Servers either split it themselves (llama.cpp `--reasoning-format`, vLLM and
SGLang reasoning parsers: `reasoning_content`, or `reasoning` in newer vLLM)
or leave it inline as `<think>...</think>` in the text.  Chat templates of
several thinking models put the opening tag into the prompt, so the generated
text may start inside the reasoning and only show the closing tag.  Either
way the result is the same three things: the reasoning, the answer, and
whether the generation ended before the reasoning did.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_OPEN = re.compile(r"^\s*<(think|thinking)>", re.IGNORECASE)
_CLOSE = re.compile(r"</(think|thinking)>", re.IGNORECASE)


@dataclass(frozen=True)
class Split:
    """What one response generated, taken apart."""

    text: str  # everything generated, reasoning first
    reasoning: str | None  # None when the model produced no reasoning
    answer: str | None  # None when the whole text is the answer
    cut: bool  # the generation ended inside the reasoning


def split_inline(text: str) -> Split:
    """Reasoning in `<think>` tags inside the text (tags kept in `text`, dropped from both parts)."""
    close = _CLOSE.search(text)
    opened = _OPEN.match(text)
    if close is not None and (opened is None or opened.end() <= close.start()):
        start = opened.end() if opened is not None else 0
        return Split(text, text[start : close.start()], text[close.end() :], cut=False)
    if opened is not None:  # never closed: all of it was reasoning
        return Split(text, text[opened.end() :], "", cut=True)
    return Split(text, None, None, cut=False)


def split_message(content: str | None, reasoning: str | None) -> Split:
    """A chat message as servers send it: content, plus the reasoning they parsed out (if any).

    Servers that parse reasoning but keep the tags in the content (llama.cpp's
    `deepseek-legacy`), or that missed them, still get the inline split.
    """
    content = content or ""
    inline = split_inline(content)
    if not reasoning:
        return inline
    if inline.reasoning is not None:
        if inline.reasoning.strip() == reasoning.strip():  # deepseek-legacy: the tagged reasoning stays in the content
            return inline
        return Split(reasoning + content, reasoning + inline.reasoning, inline.answer, inline.cut)
    return Split(reasoning + content, reasoning, content, cut=not content.strip())
