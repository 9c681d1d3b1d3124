"""Reading an answer written in words: "definitely \\(8000\\)", "9 customers", "three boxes".

Models often state the final answer in a sentence instead of a box.  The
extraction steps find that sentence; this module reduces what follows the
verb to the mathematical answer:

- reasoning blocks (`<think>...</think>`) are not part of the answer;
- filler words before the answer ("definitely", "indeed", "exactly") go;
- a math span in the clause (`$...$`, `\\(...\\)`) is the answer;
- spelled-out numbers are read ("twenty-five" -> 25);
- words after the mathematical part (units, nouns: "12π inches per second")
  go, and parts separated by commas or "and" are kept as a list, so
  "40 chickens, 60 cows and 10 pigs" becomes "40, 60, 10".

Everything here is a pure string function, so a grade can be recomputed.
"""

from __future__ import annotations

import re

_THINK_OPEN = re.compile(r"<think(?:ing)?>|<\|begin_of_thought\|>", re.IGNORECASE)
_THINK_CLOSE = re.compile(r"</think(?:ing)?>|<\|end_of_thought\|>", re.IGNORECASE)
_MARKER = re.compile(r"<\|[A-Za-z_]+\|>|<｜[^｜<>]{1,40}｜>|</s>|<eos>|<(?:start|end)_of_turn>")
"""Chat-template and format markers (`<|end_of_solution|>`, `<|im_end|>`, `</s>`, `<end_of_turn>`):
markup around a response, never part of its answer."""
_CURRENCY_OPEN = re.compile(r"(?<![\\$])\$(?=-?\d)(?!\$)")
_DOLLAR = re.compile(r"(?<![\\$])\$(?!\$)")


def strip_thinking(text: str) -> str:
    """The text outside reasoning blocks.

    A closed `<think>...</think>` block is removed; text before a lone
    `</think>` (the template opened the block) is reasoning; an unclosed
    `<think>` (the response was cut inside its reasoning) leaves only what
    came before it, usually nothing.
    """
    closes = list(_THINK_CLOSE.finditer(text))
    if closes:
        text = text[closes[-1].end() :]
    opened = _THINK_OPEN.search(text)
    if opened is not None:
        text = text[: opened.start()]
    return text


def strip_markers(text: str) -> str:
    """The text without chat-template markers, so a response that ends in `<|im_end|>` reads as finished."""
    stripped = _MARKER.sub("", text)
    return stripped.rstrip() if stripped != text else text


def mark_currency(text: str) -> str:
    """`text` with every dollar sign that is money escaped (`\\$`), so it opens no math span.

    A `$` before a number opens math only when the next unescaped `$`
    closes it the way TeX is written: no space before it and no digit after
    it.  So in "$93 - $15 = $78" and "$5 and $6" every dollar is money, while
    `$5$` and `$x = 3$` stay math (the rule pandoc uses for `$` math).
    """
    if "$" not in text:
        return text
    dollars = [m.start() for m in _DOLLAR.finditer(text)]
    money: list[int] = []
    k = 0
    while k < len(dollars):
        at = dollars[k]
        close = dollars[k + 1] if k + 1 < len(dollars) else None
        closes = (
            close is not None
            and not text[close - 1].isspace()
            and not text[close + 1 : close + 2].isdigit()
            and "\n\n" not in text[at:close]
        )
        if _CURRENCY_OPEN.match(text, at) and not closes:
            money.append(at)
            k += 1
        else:
            k += 2
    for at in reversed(money):
        text = text[:at] + "\\" + text[at:]
    return text


def clean_response(text: str) -> str:
    """The part of a response that can hold its answer: reasoning blocks and template markers removed."""
    return strip_markers(strip_thinking(text))


_ONES = {
    "zero": 0,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
    "thirteen": 13,
    "fourteen": 14,
    "fifteen": 15,
    "sixteen": 16,
    "seventeen": 17,
    "eighteen": 18,
    "nineteen": 19,
}
_TENS = {"twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90}
_SCALES = {"hundred": 100, "thousand": 1000, "million": 1_000_000}
_NUMBER_WORD = "|".join(sorted([*_ONES, *_TENS, *_SCALES], key=len, reverse=True))
# Not after a determiner: "each one", "no one", "the one", "which one" are not numbers.
_NOT_AFTER = "".join(rf"(?<!\b{w} )" for w in ("each", "every", "no", "any", "some", "the", "this", "that", "which"))
_NUMBER_PHRASE = re.compile(
    rf"{_NOT_AFTER}\b(?:{_NUMBER_WORD})(?:(?:[\s-]+|\s+and\s+)(?:{_NUMBER_WORD}))*\b(?!-)", re.IGNORECASE
)


def _phrase_value(words: list[str]) -> int | None:
    total, current = 0, 0
    for word in words:
        if word in _ONES:
            current += _ONES[word]
        elif word in _TENS:
            current += _TENS[word]
        elif word == "hundred":
            current = max(current, 1) * 100
        elif word in _SCALES:
            total += max(current, 1) * _SCALES[word]
            current = 0
        else:
            return None
    return total + current


def number_words_to_digits(text: str) -> str:
    """Spelled-out numbers as digits: "twenty-five boxes" -> "25 boxes", "one hundred and two" -> "102"."""

    def replace(m: re.Match[str]) -> str:
        words = [w for w in re.split(r"[\s-]+", m.group(0).lower()) if w and w != "and"]
        value = _phrase_value(words)
        return m.group(0) if value is None else str(value)

    return _NUMBER_PHRASE.sub(replace, text)


_FILLER = re.compile(
    r"^(?:(?:definitely|indeed|exactly|precisely|simply|just|actually|clearly|certainly|really|"
    r"therefore|thus|hence|so|then|now|still|also|equal\s+to|equals|given\s+by|that|about|"
    r"approximately|roughly|around|nearly|a\s+total\s+of|in\s+total|total(?:ly)?|only|"
    r"the\s+(?:number|value|answer|result)\s+(?:is|of)|the|an?(?=\s+[^=\s])|is|are|was|be)\b\s*|[:=≈~,]\s*)+",
    re.IGNORECASE,
)
_APPROX = re.compile(
    r"\bapprox(?:imately|imate|\.)?|\b(?:about|around|roughly|nearly)\s+(?=[$\\\d(])|≈|\\approx|\\sim\b", re.IGNORECASE
)
_CLAUSE_END = re.compile(
    r"(?:\.(?=\s|$)|[;!?\n]|\s[—–]\s|\s\((?!\s*-?\d)|\b(?:since|because|as|which|where|when|if|so that|but|"
    r"for|from|by|using|after|given|we|this|that's|it's)\b)",
    re.IGNORECASE,
)
MATH_SPAN = re.compile(
    r"(?<!\\)\$\$(.+?)(?<!\\)\$\$|(?<!\\)\$(.+?)(?<!\\)\$|\\\((.+?)\\\)|\\\[(.+?)\\\]"
    r"|\\begin\{(?:align|equation|gather|eqnarray|multline)\*?\}((?:(?!\\begin\{).)+?)"
    r"\\end\{(?:align|equation|gather|eqnarray|multline)\*?\}",
    re.DOTALL,
)
"""A math span: `$...$`, `$$...$$`, `\\(...\\)`, `\\[...\\]` or an align/equation display
(an escaped `\\$` is a dollar sign, not a delimiter)."""
SPAN_GAP = re.compile(r"^[\s,;]*(?:(?:and|or|&)\s*)?[\s,;]*$", re.IGNORECASE)
"""Text between two math spans that makes them one list: commas, "and", "or"."""

# Words a mathematical answer may contain; any other word of two or more
# letters ends it ("9 customers").
_MATH_WORDS = {
    "sqrt",
    "pi",
    "sin",
    "cos",
    "tan",
    "cot",
    "sec",
    "csc",
    "log",
    "ln",
    "exp",
    "arcsin",
    "arccos",
    "arctan",
    "infty",
    "infinity",
    "mod",
    "frac",
    "cdot",
    "times",
    "div",
    "pm",
    "mp",
    "circ",
    "deg",
}
_TOKEN = re.compile(
    r"\\(?:begin|end|text|mathrm|mbox|operatorname)\s*\{[^{}]*\}|\\[A-Za-z]+|\\.|[A-Za-z]+|\d+(?:[.,]\d+)*|\S|\s+"
)
_OPERATOR = set("+-*/^=<>(,[{\\_|≤≥≠±×÷·−")


def strip_filler(text: str) -> str:
    """`text` without the filler words that may precede an answer ("indeed", "exactly", "the")."""
    return _FILLER.sub("", text)


_WORD_ANSWER = re.compile(
    r"^\s*(?:\*\*)?\s*([A-Za-z][A-Za-z'-]*(?: [A-Za-z][A-Za-z'-]*){0,3})\s*(?:\*\*)?\s*(?:[.!]|$)"
)
_NOT_AN_ANSWER = re.compile(
    r"^(?:not|clear|obvious|simple|below|above|as|follows|shown|given|this|that|these|there|here|it|unclear|"
    r"straightforward|easy|hard|difficult|interesting)\b",
    re.IGNORECASE,
)


def word_answer(clause: str) -> str | None:
    """The answer in `clause` when it is a word or a few ("east.", "**odd**", "Tuesday"), as `\\text{...}`.

    Only a clause of at most four words that ends the sentence counts, and
    not words that point elsewhere ("clear", "below", "as follows").
    """
    m = _WORD_ANSWER.match(strip_filler(clause.strip().replace("**", "")))
    if m is None or _NOT_AN_ANSWER.match(m.group(1)):
        return None
    return f"\\text{{{m.group(1)}}}"


def approximate_cue(text: str) -> bool:
    """Whether the text marks its number as an approximation ("approximately", "≈", "\\approx")."""
    return _APPROX.search(text) is not None


def math_head(part: str) -> str:
    """The leading mathematical expression of `part`, without the words after it.

    "12π inches per second" -> "12π", "9 customers" -> "9", "2x + 3 dollars"
    -> "2x + 3".  A lone letter stays when it is written against a number or
    an operator ("2x", "x = 3"), so "12 m" loses its unit but "12m" keeps it.
    """
    out: list[str] = []
    spaced = False
    for m in _TOKEN.finditer(part):
        tok = m.group(0)
        if tok.isspace():
            spaced = True
            continue
        word = tok.isalpha()
        if word and len(tok) >= 2 and tok.lower() not in _MATH_WORDS:
            break
        if word and len(tok) == 1 and out:
            prev = out[-1].strip()
            joins = not spaced or prev[-1:] in _OPERATOR or prev.startswith("\\")
            if not joins:
                break
        out.append((" " if spaced and out else "") + tok)
        spaced = False
    head = "".join(out).strip()
    return re.sub(r"[\s,.;:=+*/^(\[{-]+$", "", head).strip()


def reduce_clause(text: str) -> str:
    """The mathematical answer in the clause that starts `text` (see the module docstring)."""
    text = text.strip().replace("**", "")
    text = _FILLER.sub("", text)
    spans = list(MATH_SPAN.finditer(text))
    if spans and spans[0].start() == 0 or spans and not _CLAUSE_END.search(text[: spans[0].start()]):
        run = [spans[0]]
        for nxt in spans[1:]:
            if not SPAN_GAP.match(text[run[-1].end() : nxt.start()]):
                gap = text[run[-1].end() : nxt.start()]
                if _CLAUSE_END.search(gap) or not re.fullmatch(r"[\sA-Za-z,]*", gap):
                    break
            run.append(nxt)
        contents = [next(g for g in s.groups() if g is not None).strip() for s in run]
        return ", ".join(c for c in contents if c)
    end = _CLAUSE_END.search(text)
    clause = number_words_to_digits(text[: end.start()] if end else text)
    parts = [math_head(_FILLER.sub("", p)) for p in re.split(r",\s*(?:and|or)\s+|,\s+|;|\s+(?:and|or|&)\s+", clause)]
    parts = [p for p in parts if p]
    if not parts:
        return ""
    if len(parts) > 1 and not all(re.search(r"\d", p) for p in parts):
        return parts[0]
    return ", ".join(parts)
