"""Private-test decoding refuses anything but plain strings, lists and dicts; releases and date windows."""

from __future__ import annotations

import base64
import json
import os
import pickle
import zlib
from pathlib import Path

import pytest
from lcb_helpers import ROOT

from evalsuite.errors import DatasetError
from evalsuite.tasks import livecodebench as lcb
from evalsuite.tasks.data import load_rows
from evalsuite.tasks.schema import TaskSpec

TESTS = [{"input": "1 2\n", "output": "3\n", "testtype": "stdin"}]


def _wrap(payload: bytes) -> str:
    return base64.b64encode(zlib.compress(payload)).decode()


def test_roundtrip_of_upstream_encoding() -> None:
    encoded = lcb.encode_private_tests(TESTS)
    assert lcb.decode_private_tests(encoded) == TESTS
    # The upstream layout: base64(zlib(pickle(json string))).
    assert pickle.loads(zlib.decompress(base64.b64decode(encoded))) == json.dumps(TESTS)


class _Boom:
    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (os.system, ("touch /tmp/evalsuite-pickle-pwned",))


@pytest.mark.parametrize(
    "payload",
    [
        pickle.dumps(_Boom()),
        pickle.dumps(_Boom(), protocol=0),
        pickle.dumps([1, 2]),
        pickle.dumps((b"x",)),
        pickle.dumps({"a": 1.5}),
        pickle.dumps(None),
    ],
    ids=["reduce", "reduce-proto0", "ints", "tuple-bytes", "float", "none"],
)
def test_refuses_anything_but_plain_values(payload: bytes) -> None:
    with pytest.raises(DatasetError):
        lcb.decode_private_tests(_wrap(payload))
    assert not Path("/tmp/evalsuite-pickle-pwned").exists()


def test_plain_lists_and_dicts_without_json_are_accepted() -> None:
    assert lcb.decode_private_tests(_wrap(pickle.dumps(TESTS))) == TESTS


def test_garbage_and_bombs_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(DatasetError, match="base64"):
        lcb.decode_private_tests("not base64 !!")
    with pytest.raises(DatasetError, match="base64"):
        lcb.decode_private_tests(base64.b64encode(b"not zlib").decode())
    monkeypatch.setattr(lcb, "MAX_DECODED_BYTES", 1000)
    with pytest.raises(DatasetError, match="more than 1000 bytes"):
        lcb.decode_private_tests(_wrap(pickle.dumps("x" * 10_000)))
    with pytest.raises(DatasetError, match="missing output"):
        lcb.decode_private_tests(lcb.encode_private_tests([{"input": "1"}]))


def test_release_files() -> None:
    assert lcb.release_files("release_v1") == ["test.jsonl"]
    assert lcb.release_files("release_v5")[-1] == "test5.jsonl" and len(lcb.release_files("release_v5")) == 5
    assert lcb.release_files("v6") == ["test6.jsonl"]
    assert len(lcb.release_files("release_latest")) == 6
    with pytest.raises(DatasetError, match="release_v7"):
        lcb.release_files("release_v7")


def test_date_window_and_identity(lcb_spec: TaskSpec) -> None:
    options = {"version_tag": "release_v5", "start_date": "2024-08-01", "end_date": "2024-08-31"}
    spec = lcb_spec.model_copy(update={"dataset": lcb_spec.dataset.model_copy(update={"options": options})})
    rows, identity = load_rows(spec, "fixture", root=ROOT)
    assert rows and all("2024-08-01" <= r["contest_date"][:10] <= "2024-08-31" for r in rows)
    all_rows, all_identity = load_rows(lcb_spec, "fixture", root=ROOT)
    assert len(rows) < len(all_rows)
    assert identity.location != all_identity.location and "start_date=2024-08-01" in identity.location
    assert rows[0]["reference"]["fn_name"] in (None, "checkTwoChessboards", "getFinalState", "countGoodIntegers")


def test_bad_options_are_named() -> None:
    with pytest.raises(DatasetError, match="version_tagg"):
        lcb.prepare_rows([], {"version_tagg": "release_v5"})
    with pytest.raises(DatasetError, match="start_date"):
        lcb.prepare_rows([{"contest_date": "2024-01-01T00:00:00"}], {"start_date": "last week"})


@pytest.mark.parametrize(
    "revision", ["main", "release_v5", "v5", "6e4ed1a", "6E4ED1A2A79AF7D8630A6B768EC859CB5AF4D3BE"]
)
def test_hub_revision_must_be_a_commit(revision: str) -> None:
    """A branch or tag moves, so the rows behind one name could change between runs: refused before any download."""
    with pytest.raises(DatasetError, match="pin dataset.hf.revision"):
        lcb.load_hf(lcb.HUB_REPO, revision, {"version_tag": "release_v1"})
    assert lcb.pinned_revision(lcb.HUB_REPO, "0" * 40) == "0" * 40
