"""LiveCodeBench `code_generation_lite` rows: hub files per release, date windows, test decoding.

The hub dataset is a loading script over JSON Lines files (`test.jsonl`,
`test2.jsonl`, ...), one per release; `release_vN` is the first N files and
`vN` the N-th alone.  We download those files directly (pinned revision), so
no loading script runs.

Private tests are stored upstream as base64(zlib(pickle(json-string))).
Unpickling untrusted bytes can run code, so `decode_private_tests` first
checks every pickle opcode against a list that can only build strings, lists
and dicts, and its unpickler refuses every global.

This module is the `livecodebench` task adapter (see evalsuite/tasks/adapters.py):
`prepare_rows` filters by contest date and adds the `reference` field;
`code_tests` turns a reference into the code grader's `CodeTests`.  Tests
stay encoded in the reference and are decoded when graded, so a full release
never sits decoded in memory.
"""

from __future__ import annotations

import base64
import binascii
import io
import json
import pickle
import pickletools
import zlib
from collections.abc import Mapping
from datetime import date, datetime
from typing import Any

from evalsuite.errors import DatasetError
from evalsuite.sandbox.cases import CodeTests

ADAPTER = "livecodebench"  # this adapter's entry-point name, written into every reference
HUB_REPO = "livecodebench/code_generation_lite"
_FILES = ["test.jsonl", "test2.jsonl", "test3.jsonl", "test4.jsonl", "test5.jsonl", "test6.jsonl"]
MAX_DECODED_BYTES = 1 << 30

# Opcodes that can only build str / list / dict values (plus framing and the memo).
_SAFE_OPCODES = frozenset(
    {
        "PROTO",
        "FRAME",
        "STOP",
        "MARK",
        "MEMOIZE",
        "PUT",
        "BINPUT",
        "LONG_BINPUT",
        "GET",
        "BINGET",
        "LONG_BINGET",
        "SHORT_BINUNICODE",
        "BINUNICODE",
        "BINUNICODE8",
        "UNICODE",
        "STRING",
        "BINSTRING",
        "SHORT_BINSTRING",
        "EMPTY_LIST",
        "APPEND",
        "APPENDS",
        "LIST",
        "EMPTY_DICT",
        "DICT",
        "SETITEM",
        "SETITEMS",
    }
)


def release_files(version_tag: str) -> list[str]:
    """Hub files of a release: `release_v3` -> test.jsonl..test3.jsonl; `v3` -> test3.jsonl; `release_latest` -> all."""
    if version_tag == "release_latest":
        return list(_FILES)
    for prefix, cumulative in (("release_v", True), ("v", False)):
        if version_tag.startswith(prefix) and version_tag[len(prefix) :].isdigit():
            n = int(version_tag[len(prefix) :])
            if 1 <= n <= len(_FILES):
                return _FILES[:n] if cumulative else [_FILES[n - 1]]
    known = ", ".join([f"release_v{i}" for i in range(1, len(_FILES) + 1)] + ["release_latest", "v1..v6"])
    raise DatasetError(f"Unknown LiveCodeBench version_tag '{version_tag}' (known: {known}).")


class _StrictUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"refused global {module}.{name}")

    def persistent_load(self, pid: Any) -> Any:
        raise pickle.UnpicklingError("refused persistent id")


def _check_plain(value: Any, where: str) -> None:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            continue
        if isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        else:
            raise DatasetError(f"{where}: private tests hold a {type(item).__name__}; only strings, lists and dicts.")


def safe_unpickle(data: bytes, where: str = "private_test_cases") -> Any:
    """Unpickle `data` only if it can build nothing but strings, lists and dicts."""
    try:
        for opcode, _, _ in pickletools.genops(data):
            if opcode.name not in _SAFE_OPCODES:
                raise DatasetError(f"{where}: refused pickle opcode {opcode.name}; only strings, lists and dicts.")
        value = _StrictUnpickler(io.BytesIO(data)).load()
    except (pickle.UnpicklingError, ValueError, EOFError) as exc:
        raise DatasetError(f"{where}: not a valid pickle of plain values ({exc}).") from None
    _check_plain(value, where)
    return value


def decode_private_tests(encoded: str, where: str = "private_test_cases") -> list[dict[str, str]]:
    """base64 -> zlib -> restricted unpickle -> JSON list of {input, output, testtype}."""
    if not encoded:
        return []
    try:
        raw = base64.b64decode(encoded.encode("ascii"), validate=True)
        inflater = zlib.decompressobj()
        data = inflater.decompress(raw, MAX_DECODED_BYTES)
        if inflater.unconsumed_tail:
            raise DatasetError(f"{where}: decodes to more than {MAX_DECODED_BYTES} bytes; refusing.")
    except (binascii.Error, zlib.error, UnicodeEncodeError) as exc:
        raise DatasetError(f"{where}: not base64 of zlib data ({exc}).") from None
    value = safe_unpickle(data, where)
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise DatasetError(f"{where}: the unpickled text is not JSON ({exc.msg}).") from None
    return _tests(value, where)


def encode_private_tests(tests: list[dict[str, str]]) -> str:
    """The upstream encoding of a test list (used to build fixture rows)."""
    return base64.b64encode(zlib.compress(pickle.dumps(json.dumps(tests)))).decode("ascii")


def _tests(value: Any, where: str) -> list[dict[str, str]]:
    if not isinstance(value, list) or not all(isinstance(t, dict) for t in value):
        raise DatasetError(f"{where}: expected a list of test objects, got {type(value).__name__}.")
    for i, test in enumerate(value):
        missing = {"input", "output"} - set(test)
        if missing:
            raise DatasetError(f"{where}, test {i}: missing {', '.join(sorted(missing))}.")
    return value


def tests_of(reference: Mapping[str, Any], where: str = "reference") -> list[dict[str, str]]:
    """Public then private tests of a reference built by `prepare_rows`."""
    try:
        public = json.loads(reference.get("public_test_cases") or "[]")
    except json.JSONDecodeError as exc:
        raise DatasetError(f"{where}: public_test_cases is not JSON ({exc.msg}).") from None
    tests = _tests(public, f"{where}.public_test_cases")
    return tests + decode_private_tests(reference.get("private_test_cases") or "", f"{where}.private_test_cases")


def code_tests(reference: Mapping[str, Any], where: str = "reference") -> CodeTests:
    """The adapter hook for the code grader: public then private tests, functional when `fn_name` is set."""
    return CodeTests.from_mappings(tests_of(reference, where), reference.get("fn_name") or None, where)


def _day(value: Any, what: str) -> date | None:
    if value in (None, ""):
        return None
    if isinstance(value, datetime):
        return value.date()
    if isinstance(value, date):
        return value
    try:
        return datetime.fromisoformat(str(value)).date()
    except ValueError:
        raise DatasetError(f"LiveCodeBench option {what} = {value!r} is not a date (use YYYY-MM-DD).") from None


def prepare_rows(rows: list[dict[str, Any]], options: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Keep rows whose contest_date is in [start_date, end_date]; add `reference` and `fn_name`."""
    unknown = set(options) - {"version_tag", "start_date", "end_date"}
    if unknown:
        raise DatasetError(f"Unknown LiveCodeBench dataset option(s): {', '.join(sorted(unknown))}.")
    start, end = _day(options.get("start_date"), "start_date"), _day(options.get("end_date"), "end_date")
    out = []
    for index, row in enumerate(rows):
        where = f"LiveCodeBench row {index + 1} ({row.get('question_id', '?')})"
        day = _day(row.get("contest_date"), f"{where} contest_date")
        if (start and (day is None or day < start)) or (end and (day is None or day > end)):
            continue
        try:
            metadata = json.loads(row.get("metadata") or "{}")
        except (json.JSONDecodeError, TypeError):
            raise DatasetError(f"{where}: metadata is not a JSON object.") from None
        fn_name = metadata.get("func_name") if isinstance(metadata, dict) else None
        prepared = dict(row)
        prepared["fn_name"] = fn_name or ""
        prepared["reference"] = {
            "adapter": ADAPTER,
            "public_test_cases": row.get("public_test_cases") or "[]",
            "private_test_cases": row.get("private_test_cases") or "",
            "fn_name": fn_name,
        }
        out.append(prepared)
    return out


def pinned_revision(path: str, revision: str) -> str:
    """`revision` when it is a full commit id; a branch or tag (`main`, `v5`) moves, so two runs could score
    different problems under one name: refused with the fix."""
    if len(revision) == 40 and all(c in "0123456789abcdef" for c in revision):
        return revision
    raise DatasetError(
        f"The hub revision of {path} is {revision!r}, which can move; LiveCodeBench rows change between "
        "commits, so pin dataset.hf.revision to a 40-character commit id (the dataset's 'History' page "
        "lists them), or use --data local / --data fixture."
    )


def load_hf(path: str, revision: str, options: Mapping[str, Any]) -> tuple[list[dict[str, Any]], str]:
    """Rows of one release downloaded from the hub at a pinned commit, and a location naming the files."""
    from huggingface_hub import hf_hub_download

    revision = pinned_revision(path, revision)
    version = str(options.get("version_tag") or "release_latest")
    rows: list[dict[str, Any]] = []
    for name in release_files(version):
        try:
            local = hf_hub_download(path, name, repo_type="dataset", revision=revision)
        except Exception as exc:  # the hub client raises many types; the user needs one sentence
            raise DatasetError(
                f"Could not download {name} of {path} (revision {revision}) for {version}: {exc}. "
                "Offline? Use --data local --data-path FILE or --data fixture."
            ) from None
        with open(local, encoding="utf-8") as fh:
            rows.extend(json.loads(line) for line in fh if line.strip())
    return rows, f"{path}:{version}"
