"""The answer a response states in its last sentences, for responses that box nothing.

"...so the number of divisors is 9.", "Therefore, Hillary has 7 nickels.",
"...is indeed 284. I think that's the final answer.": the last few sentences
are read latest first and the first one that states a value wins: its last
math span(s) with a value (a chain `2 + 3 = 5` gives its end), else what
follows its last verb, else its last number.  Sentences are never cut inside
math, and a text that stops mid-sentence or inside math gives nothing.
"""

from __future__ import annotations

import re

from evalsuite.graders.boxes import boxed_spans
from evalsuite.graders.forms import split_top_level
from evalsuite.graders.prose import (
    MATH_SPAN,
    mark_currency,
    number_words_to_digits,
    reduce_clause,
    strip_filler,
    strip_markers,
)
from evalsuite.graders.restate import restate

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=\S)|\n\s*\n?|(?<=[.!?])\*\*\s+|(?<=\x01)\s*(?=[A-Z])")


def split_sentences(text: str) -> list[str]:
    """Sentences, never cut inside a math span; a display that runs into a capital ("\\]Therefore") ends one."""
    masked = list(text)
    for span in MATH_SPAN.finditer(text):
        display = span.group(0).startswith(("$$", "\\[", "\\begin"))
        masked[span.start() : span.end()] = "\x00" * (span.end() - span.start() - 1) + ("\x01" if display else "\x00")
    cuts = [(m.start(), m.end()) for m in _SENTENCE_END.finditer("".join(masked))]
    out, start = [], 0
    for a, b in cuts:
        out.append(text[start:a])
        start = b
    out.append(text[start:])
    return [s.strip() for s in out if s.strip()]


_VERB = re.compile(
    r"\b(?:is|are|was|were|be|equals?|has|have|had|gets?|gives?|makes?|yields?|comes?\s+to|totals?|"
    r"remains?|needs?|costs?|takes?|earns?|pays?|spends?|saves?|sells?|buys?|owns?|of)\b|(?<![<>!=\\])=|≈|:",
    re.IGNORECASE,
)
_ENDS_SENTENCE = re.compile(r"(?:[.!?)\]}$*]|\\\]|\\\)|\\end\{[a-z]+\*?\})\s*$")
"""A finished response ends a sentence or a math display; one cut mid-sentence does not."""
_ASY = re.compile(r"\[asy\].*?\[/asy\]", re.DOTALL)
"""Asymptote figure code: labels and coordinates, never the answer."""
_SENTENCES_BACK = 3
"""How many sentences from the end `stated_answer` looks at: the answer is stated last, working is not."""


def _cut_inside_math(text: str) -> bool:
    """Whether the text stops inside a math span (an odd `$`, `\\[` or `\\(` left open)."""
    dollars = len(re.findall(r"(?<!\\)\$", text.replace("$$", "")))
    opened = text.count("\\[") + text.count("\\(")
    closed = text.count("\\]") + text.count("\\)")
    return dollars % 2 == 1 or opened > closed


def stated_answer(text: str) -> str | None:
    """The answer stated in prose at the end: "...so the number of divisors is 9.".

    Looks at the last few sentences, latest first, and takes the first that
    states something: a math span, else what follows its last verb ("Hillary
    has 7 nickels" -> 7), else its last number.  A sentence with no number
    ("I think that's the final answer.") is passed over.  Never use it on a
    response cut by max_tokens: there the last number is noise, which is why
    `run_pipeline` skips it for truncated responses.
    """
    body = restate(mark_currency(strip_markers(_ASY.sub("", text)))).strip()
    if not body or _cut_inside_math(body) or not _ENDS_SENTENCE.search(body):
        return None
    sentences = split_sentences(body)
    for sentence in reversed(sentences[-_SENTENCES_BACK:]):
        sentence = number_words_to_digits(sentence.strip().rstrip("*").strip())
        if "?" in sentence[-2:] or not re.search(r"\d|\$|\\\(|\\\[", sentence):
            continue
        answer = asserted_value(sentence) or _sentence_answer(sentence)
        if answer:
            return answer
    return None


_PLAIN_NUMBER = re.compile(r"(?<![\w.])-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?![\d])")
_VALUE = re.compile(r"\d|\\(?:frac|dfrac|sqrt|pi|infty|begin)\b|[π√∞]")
_WORD_SPAN = re.compile(r"\\text\{\s*[A-Za-z][A-Za-z ]*\}")
_LIST_GAP = re.compile(r"^\s*(?:,\s*(?:and\s+)?|and\s+|&\s*)$")
_NOUN_GAP = re.compile(r"^\s*[A-Za-z]+(?:\s+[A-Za-z]+)?\s*(?:,\s*(?:and\s+)?|and\s+)$")
_EQUALS = re.compile(r"(?<![<>!\\])=(?!=)|\\equiv\b")
_MODULUS = re.compile(r"\s*\\pmod\s*(?:\{[^{}]*\}|\w+)|\s*\(\s*\\(?:bmod|mod)\s*[^()]*\)")
_NAME = re.compile(r"\s*(?:[A-Za-z]|\\[A-Za-z]+)(?:_\{?\w+\}?)?\s*")


def _chain_tail(content: str) -> str:
    """The value a chain of equalities ends in: "2 + 3 = 5" -> "5", "\\angle B = 120^\\circ" -> "120^\\circ".

    A single `name = value` ("x = 5") is kept whole: the comparison reads it.
    """
    content = re.sub(r"[\s.;:,]+$", "", _MODULUS.sub("", content.strip()))
    pieces = [p for p in _EQUALS.split(content)]
    if len(pieces) == 1 or any("{" in p and p.count("{") != p.count("}") for p in pieces):
        return content
    if len(pieces) == 2 and _NAME.fullmatch(pieces[0]):
        return content
    return pieces[-1].strip()


def _kind(content: str) -> str:
    """ "named" (`x = 5`), "chain" (`2 + 3 = 5`) or "value": only spans of one kind, not chains, form a list."""
    pieces = _EQUALS.split(content)
    if len(pieces) == 1:
        return "value"
    return "named" if len(pieces) == 2 and _NAME.fullmatch(pieces[0]) is not None else "chain"


def _span_answer(sentence: str) -> str:
    """The last valued math span(s) of a sentence, as an answer; "" when it has none."""
    every = list(MATH_SPAN.finditer(sentence))
    # Spans with a value; a bare name ("values of $x$") is not an answer, a word in \\text{} only if nothing else is.
    spans = [s for s in every if _VALUE.search(_content(s))] or [s for s in every if _WORD_SPAN.fullmatch(_content(s))]
    if not spans:
        return ""
    run = [spans[-1]]
    for prev in reversed(spans[:-1]):
        gap = sentence[prev.end() : run[0].start()]
        kinds = {_kind(_content(prev)), _kind(_content(run[0]))}
        if not (_LIST_GAP.match(gap) or _NOUN_GAP.match(gap)) or len(kinds) > 1 or "chain" in kinds:
            break
        run.insert(0, prev)
    return ", ".join(_chain_tail(unbox(_content(s))) for s in run)


# Verbs that assert a value ("the remainder is 4", "Hillary has 7 nickels"), unlike "of" or "=".
_ASSERT_VERB = re.compile(
    r"\b(?:is|are|was|were|be|equals?|has|have|had|gets?|gives?|makes?|yields?|comes?\s+to|totals?|"
    r"remains?|needs?|costs?|takes?|earns?|pays?|spends?|saves?|sells?|buys?|owns?)\b",
    re.IGNORECASE,
)
_ASIDE = re.compile(
    r"(?:^|,|;)\s*(?:which|who|since|because|as|where|when|if|while|although|though)\b[^,;]*$", re.IGNORECASE
)
"""A verb in an aside ("..., which is 3 more than 9", "since 7 is prime") asserts no answer."""
_ADVERBIAL = re.compile(r"\b(?:because|since|although|though|while|if|unless)\b[^,;]*$", re.IGNORECASE)
_STARTS_VALUE = re.compile(r"^\s*(?:\\\$|[-−])?\s*(?:\d|\.\d|\x00)")
_DESCRIBES_ANSWER = re.compile(
    r"^\s*(?:(?:the|our|my|its|an?)\s+(?:[a-z-]+\s+){0,3}?(?:answer|solution|result)\b"
    r"|(?:the|our|my)\s+(?:correct|right|final|desired|required|requested|true|wanted)\s+(?:[a-z-]+\s+){0,2}?"
    r"(?:number|value|count|total|amount|sum|quantity)\b|(?:correct|right)\b)",
    re.IGNORECASE,
)
_SUBJECT_START = re.compile(r"[,;:]|\b(?:that|so|then|thus|hence|therefore|and|because|since)\b", re.IGNORECASE)
"""Where the subject of a verb starts at the latest: after a comma, "that", "so"..."""
_PREDICATE_END = re.compile(r"\.(?=\s|$)|[;!?\n]|,\s*(?:which|since|because|as|so|but|where|while)\b")
_SUBJECT_NUMBER = re.compile(r"(?:\\\$)?-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?\s*$")


def _masked(sentence: str) -> str:
    """The sentence with every math span blanked to NULs, so words inside math are never read as verbs."""
    out = list(sentence)
    for span in MATH_SPAN.finditer(sentence):
        out[span.start() : span.end()] = "\x00" * (span.end() - span.start())
    return "".join(out)


def asserted_value(sentence: str) -> str:
    """The value the sentence asserts as its answer, or "" to leave the choice to `_sentence_answer`.

    The last verb of the main clause decides: the value right after it ("the
    units digit of $18^6$ is 4" -> 4, not `18^6`), or the value before it
    when what follows only says this is the answer ("1940 is the correct
    number" -> 1940).  Verbs in asides ("..., which is 3 more", "since 7 is
    prime") are passed over.  Nothing is decided when the verb's subject is
    itself a value ("$40$ daps are equal to 70 yaps") or math after the
    clause states a value of its own ("is $360^\\circ$, so $x = 180^\\circ$").
    """
    masked = _masked(sentence)
    verbs = [v for v in _ASSERT_VERB.finditer(masked) if not _in_aside(masked[: v.start()])]
    if not verbs:
        return ""
    verb = verbs[-1]
    before, after = masked[: verb.start()], masked[verb.end() :]
    if _DESCRIBES_ANSWER.match(after.replace("**", "")):
        return _subject_value(sentence[: verb.start()], before)
    subject = _SUBJECT_START.split(before)[-1]
    if not _STARTS_VALUE.match(strip_filler(after.strip())) or _STARTS_VALUE.match(subject):
        return ""
    end = _PREDICATE_END.search(after)
    if end and any(_VALUE.search(_content(m)) for m in MATH_SPAN.finditer(sentence, verb.end() + end.start())):
        return ""
    return _predicate_value(sentence[verb.end() : verb.end() + end.start()] if end else sentence[verb.end() :])


def _in_aside(before: str) -> bool:
    return _ASIDE.search(before) is not None or _ADVERBIAL.search(before) is not None


def _predicate_value(clause: str) -> str:
    """The value a predicate clause starts with: its math span(s), else its reduced words."""
    answer = _span_answer(clause)
    if answer:
        return answer
    reduced = reduce_clause(clause)
    if not re.search(r"\d", reduced):
        return ""
    return ", ".join(_chain_tail(p) for p in split_top_level(reduced))


def _subject_value(subject: str, masked: str) -> str:
    """The value a subject ends with ("So 1940", "I think $\\frac{3}{8}$"), if it opens its clause."""
    stripped = masked.rstrip()
    if stripped.endswith("\x00"):
        spans = [s for s in MATH_SPAN.finditer(subject) if s.end() == len(stripped)]
        start, value = (spans[0].start(), _chain_tail(unbox(_content(spans[0])))) if spans else (0, "")
    else:
        m = _SUBJECT_NUMBER.search(stripped)
        start, value = (m.start(), m.group(0).strip().replace(",", "")) if m else (0, "")
    lead = re.split(r"[,;:]", masked[:start])[-1]
    if not value or re.search(r"\d|\x00", lead):
        return ""
    return value


def _sentence_answer(sentence: str) -> str:
    """The answer a sentence states: its last valued math span(s), else the words after its last verb."""
    spanned = _span_answer(sentence)
    if spanned:
        return spanned
    verbs = list(_VERB.finditer(sentence))
    for verb in reversed(verbs):
        found = reduce_clause(sentence[verb.end() :])
        if found and re.search(r"\d", found):
            return found
    numbers = _PLAIN_NUMBER.findall(sentence)
    return numbers[-1].replace(",", "") if numbers else ""


def _content(span: re.Match[str]) -> str:
    """A span's inside; for an align-style display, its last row without the alignment marks."""
    content = next(g for g in span.groups() if g is not None).strip()
    if span.group(0).startswith("\\begin"):
        rows = [r for r in re.split(r"\\\\", content) if r.strip()]
        content = rows[-1].replace("&", "").strip() if rows else content
    return content


def unbox(answer: str) -> str:
    """The content of the last box in `answer`, or `answer` itself."""
    spans = boxed_spans(answer)
    return spans[-1][2] if spans else answer
