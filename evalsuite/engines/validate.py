"""The schema every parsed response passes before it may become a stored result.

A server that answers 200 has not necessarily answered: `choices: [{}]`, a
`message` that is a string, a token id of 2**64, a NaN logprob or a stream cut
short would otherwise be stored as an (empty, wrong) answer and never asked
again.  `check_response` walks one OpenAI-style body (chat or completions,
any dialect) and raises `Malformed` naming the path and the value it found,
so the retry policy asks again and, when retries run out, the user reads what
the server actually sent.  Parsing (`parse.py`) may then assume the shape.
"""

from __future__ import annotations

import math
from typing import Any

from evalsuite.engines.columns import LOGPROB_SLACK, TOKEN_ID_PREFIX, Columns, gather, legacy_columns
from evalsuite.engines.retry import RequestFailed
from evalsuite.engines.typed import TypedEntries, TypedLists

MAX_TOKEN_ID = 2**31  # ids are stored as int32; anything at or above is not a real vocabulary index
FAILED_FINISH = frozenset({"abort", "aborted", "error", "cancelled", "canceled"})


class Malformed(RequestFailed):
    """A 200 answer that is not a complete, well-formed response (retryable)."""

    def __init__(self, message: str):
        super().__init__("malformed", message)


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _kind(value: Any) -> str:
    names = {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}
    if type(value) in names:
        return names[type(value)]
    return "a number" if isinstance(value, (int, float)) else type(value).__name__


def _fail(path: str, value: Any, expected: str) -> Malformed:
    return Malformed(f"response field {path} is {_show(value)} ({_kind(value)}), expected {expected}")


def _is_int(value: Any) -> bool:
    return type(value) is int


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _finite(value: float) -> bool:
    """math.isfinite, with integers too large for a float counted as not finite (instead of overflowing)."""
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


class ResponseSchema:
    """Checks for one endpoint: its API shape and, when known, its vocabulary size."""

    def __init__(self, *, chat: bool, vocab_size: int | None = None):
        self.chat = chat
        self.vocab_size = vocab_size
        self.id_limit = vocab_size if vocab_size and vocab_size > 0 else MAX_TOKEN_ID

    def check(self, data: Any) -> Columns | None:
        """Raise Malformed unless `data` is a complete response with a well-formed first choice.

        Returns the first choice's token columns, gathered while checking them, so that parsing
        and the text check need not walk the entries again (None: it has no `logprobs.content`).
        """
        if not isinstance(data, dict):
            raise _fail("(body)", data, "a JSON object")
        error = server_error(data)
        if error is not None:
            raise RequestFailed("server", f"the server answered 200 with an error: {error}")
        choices = data.get("choices")
        if not isinstance(choices, list) or not choices:
            failure = _fail("choices", choices, "a non-empty list of choice objects")
            raise Malformed(f"{failure}; the server sent {_show(data)}")
        for i, choice in enumerate(choices):
            if not isinstance(choice, dict):
                raise _fail(f"choices[{i}]", choice, "an object")
        n_tokens, columns = self._choice(choices[0], "choices[0]")
        self._usage(data.get("usage"))
        counted = (data.get("usage") or {}).get("completion_tokens")
        if n_tokens is not None and len(choices) == 1 and type(counted) is int and n_tokens > counted + 1:
            raise Malformed(f"the response returns {n_tokens} tokens but its usage counts {counted} generated tokens")
        for key in ("model", "system_fingerprint"):
            if data.get(key) is not None and not isinstance(data[key], str):
                raise _fail(key, data[key], "a string")
        if data.get("timings") is not None and not isinstance(data["timings"], dict):
            raise _fail("timings", data["timings"], "an object")
        return columns

    def _choice(self, choice: dict[str, Any], path: str) -> tuple[int | None, Columns | None]:
        """Check one choice; returns how many tokens it carries data for (None: no token data) and its columns."""
        if self.chat:
            message = choice.get("message")
            if not isinstance(message, dict):
                raise _fail(f"{path}.message", message, "an object with the assistant's reply")
            for key in ("content", "reasoning_content", "reasoning"):
                if message.get(key) is not None and not isinstance(message[key], str):
                    raise _fail(f"{path}.message.{key}", message[key], "a string")
            said = any(message.get(k) is not None for k in ("reasoning_content", "reasoning", "tool_calls", "refusal"))
            if message.get("content") is None and not said:
                raise _fail(f"{path}.message.content", message.get("content"), "the reply text (a string)")
        elif not isinstance(choice.get("text"), str):
            raise _fail(f"{path}.text", choice.get("text"), "a string")
        finish = choice.get("finish_reason")
        if not isinstance(finish, str) or not finish:
            raise _fail(f"{path}.finish_reason", finish, "a reason the generation ended (incomplete response)")
        if finish.lower() in FAILED_FINISH:
            raise Malformed(f"the server ended the generation with finish_reason {finish!r}: it did not complete")
        logprobs = choice.get("logprobs")
        n_entries = None
        columns = None
        if isinstance(logprobs, TypedEntries):  # a stream's legacy lists, read typed (typed_stream.py)
            n_entries, columns = self._typed(logprobs, f"{path}.logprobs")
        elif logprobs is not None:
            if not isinstance(logprobs, dict):
                raise _fail(f"{path}.logprobs", logprobs, "an object")
            n_entries, columns = self._logprobs(logprobs, f"{path}.logprobs")
        token_ids = choice.get("token_ids")
        if token_ids is not None:
            if not isinstance(token_ids, list):
                raise _fail(f"{path}.token_ids", token_ids, "a list of token ids")
            for j, tid in enumerate(token_ids):
                self._token_id(tid, f"{path}.token_ids[{j}]")
            if n_entries is not None and n_entries != len(token_ids):
                raise Malformed(f"{path} has {len(token_ids)} token_ids but {n_entries} logprob entries")
            n_entries = len(token_ids)
        return n_entries, columns

    def _logprobs(self, logprobs: dict[str, Any], path: str) -> tuple[int | None, Columns | None]:
        content = logprobs.get("content")
        if isinstance(content, TypedEntries):
            return self._typed(content, f"{path}.content")
        if content is not None:
            if not isinstance(content, list):
                raise _fail(f"{path}.content", content, "a list of token entries")
            columns = gather(content, self.id_limit)
            if columns is None:  # the slow walk names what is wrong
                for i, entry in enumerate(content):
                    self._entry(entry, f"{path}.content[{i}]", chosen=True)
            return len(content), columns
        tokens = logprobs.get("tokens")
        if tokens is None:
            return None, None
        typed = isinstance(logprobs, TypedLists)  # typed.py: the lists' value types were checked while decoding
        if not isinstance(tokens, list) or not (typed or set(map(type, tokens)) <= {str}):
            raise _fail(f"{path}.tokens", tokens, "a list of token strings")
        for key in ("token_logprobs", "top_logprobs"):
            column = logprobs.get(key)
            if column is not None and (not isinstance(column, list) or len(column) != len(tokens)):
                raise _fail(f"{path}.{key}", column, f"a list of {len(tokens)} values, one per token")
        columns = legacy_columns(logprobs, self.id_limit, typed=typed)
        if columns is not None:  # the usual case: every value checked at once, the columns kept for parsing
            return len(tokens), columns
        for i, lp in enumerate(logprobs.get("token_logprobs") or ()):
            self._logprob(lp, f"{path}.token_logprobs[{i}]")
        for i, top in enumerate(logprobs.get("top_logprobs") or ()):
            if top is None:
                continue
            if not isinstance(top, dict):
                raise _fail(f"{path}.top_logprobs[{i}]", top, "an object of token -> logprob")
            for token, lp in top.items():
                if lp is None:
                    raise _fail(f"{path}.top_logprobs[{i}][{token!r}]", lp, "a log-probability")
                self._logprob(lp, f"{path}.top_logprobs[{i}][{token!r}]")
        return len(tokens), None

    def _typed(self, entries: TypedEntries, path: str) -> tuple[int, Columns]:
        """Token data read typed (typed.py: their types were checked while decoding): its columns, or Malformed,
        so that the body is read again generically, which names the rule it breaks."""
        columns = entries.columns(self.id_limit)
        if columns is None:
            raise Malformed(f"{path} breaks a rule; read generically, the body names it")
        return len(entries), columns

    def _entry(self, entry: Any, path: str, *, chosen: bool) -> None:
        if not isinstance(entry, dict):
            raise _fail(path, entry, "an object with token and logprob")
        token = entry.get("token")
        if token is not None and not isinstance(token, str):
            raise _fail(f"{path}.token", token, "a string")
        if isinstance(token, str) and token.startswith(TOKEN_ID_PREFIX):
            suffix = token[len(TOKEN_ID_PREFIX) :]
            if not suffix.isdigit() or int(suffix) >= self.id_limit:
                raise _fail(f"{path}.token", token, f"'token_id:N' with N a token id below {self.id_limit}")
        if "id" in entry and entry["id"] is not None:
            self._token_id(entry["id"], f"{path}.id")
        raw = entry.get("bytes")
        if raw is not None and (not isinstance(raw, list) or not _byte_values(raw)):
            raise _fail(f"{path}.bytes", raw, "a list of byte values 0-255")
        self._logprob(entry.get("logprob"), f"{path}.logprob")
        if not chosen:
            return
        top = entry.get("top_logprobs")
        if top is None:
            return
        if not isinstance(top, list):
            raise _fail(f"{path}.top_logprobs", top, "a list of alternative objects")
        for j, alt in enumerate(top):
            self._entry(alt, f"{path}.top_logprobs[{j}]", chosen=False)

    def _token_id(self, value: Any, path: str) -> None:
        if not _is_int(value):
            raise _fail(path, value, "an integer token id")
        if not 0 <= value < self.id_limit:
            where = f"the vocabulary of {self.id_limit} tokens" if self.id_limit != MAX_TOKEN_ID else "[0, 2**31)"
            raise _fail(path, value, f"a token id in {where}")

    @staticmethod
    def _logprob(value: Any, path: str) -> None:
        if value is None:
            return  # missing stays missing (NaN), e.g. accepted draft tokens
        if not _is_number(value) or not _finite(value) or value > LOGPROB_SLACK:
            raise _fail(path, value, "a finite log-probability <= 0")

    @staticmethod
    def _usage(usage: Any) -> None:
        if usage is None:
            return
        if not isinstance(usage, dict):
            raise _fail("usage", usage, "an object of token counts")
        for key, value in usage.items():
            if value is None:
                continue
            if isinstance(value, dict):  # OpenAI's *_tokens_details
                for sub, count in value.items():
                    if count is not None and not (_is_int(count) and count >= 0):
                        raise _fail(f"usage.{key}.{sub}", count, "a non-negative integer")
            elif not (_is_int(value) and value >= 0):
                raise _fail(f"usage.{key}", value, "a non-negative integer")


def _byte_values(values: list[Any]) -> bool:
    """Integers 0-255 (checked by bytes() at C speed; it runs for every token and alternative)."""
    try:
        bytes(values)
    except (TypeError, ValueError):
        return False
    return True


def server_error(data: dict[str, Any]) -> str | None:
    """The server's own words when a body (or a stream event) is an error report, else None."""
    error = data.get("error")
    if error is None and data.get("object") == "error":
        error = data
    if error is None or error is False:
        return None
    if isinstance(error, dict):
        message = error.get("message") or error.get("detail") or error
        code = error.get("code") or error.get("type")
        return f"{message}" + (f" ({code})" if code not in (None, "") else "")
    return str(error)
