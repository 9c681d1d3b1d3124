"""check_comparable: which fingerprint fields refuse a comparison, how a waiver works, and what the refusal says."""

from __future__ import annotations

import pytest

from evalsuite.compare.comparable import check_comparable, field_differences
from evalsuite.errors import NotComparableError
from evalsuite.store.manifest import RunManifest


def _manifest(target: str, **fields: object) -> RunManifest:
    base = {
        "target": target,
        "task": "math500",
        "params": {"max_tokens": 2048, "temperature": 0.0},
        "server": {"model": "qwen", "model_meta": {"n_params": 7}, "build_info": "b1"},
    }
    return RunManifest.load(
        {
            "fingerprint": f"fp-{target}-0123456789abcdef",
            "target": target,
            "task": "math500",
            "fingerprint_fields": {**base, **fields},
        }
    )


BASE = _manifest("base")
QUANT = _manifest(
    "quant",
    params={"max_tokens": 4096, "temperature": 0.0},
    server={"model": "qwen", "model_meta": {"n_params": 7, "ftype": "Q4_0"}, "build_info": "b2"},
)


def _refusal(other: RunManifest, **options: object) -> str:
    with pytest.raises(NotComparableError) as err:
        check_comparable(BASE, other, **options)  # type: ignore[arg-type]
    return str(err.value)


def test_the_refusal_names_each_field_and_the_waivers_to_paste() -> None:
    msg = _refusal(QUANT)
    assert msg.startswith(
        "The candidate run (quant/math500 fp-quant-0123456) and the baseline run (base/math500 fp-base-01234567) "
        "differ in 2 field(s) that change outputs, so their outputs cannot be compared:\n"
        "  - params.max_tokens: baseline 2048, candidate 4096\n"
        "  - server.model_meta.ftype: baseline '<absent>', candidate 'Q4_0'\n"
    )
    assert "Re-run one of them with matching settings, or, if the difference is deliberate, waive the field" in msg
    assert msg.endswith(
        "waive the field with `--allow params.max_tokens --allow server.model_meta` on `evalsuite compare`/`report`, "
        'or allow_differences = ["params.max_tokens", "server.model_meta"] in the candidate target\'s config.'
    )


def test_a_control_is_named_by_its_role_in_the_refusal() -> None:
    msg = _refusal(QUANT, other_name="control")
    assert msg.startswith("The control run (quant/math500")
    assert "  - params.max_tokens: baseline 2048, control 4096\n" in msg


def test_a_waiver_covers_its_field_and_the_fields_below_it_only() -> None:
    diffs = check_comparable(BASE, QUANT, allow=["params", "server.model_meta"])
    assert [d.path for d in diffs] == [
        "params.max_tokens",
        "server.build_info",
        "server.model_meta.ftype",
        "target",
    ]
    msg = _refusal(QUANT, allow=["params.max", "server.model_meta.ftype"])
    assert "differ in 1 field(s)" in msg and "params.max_tokens" in msg


def test_only_the_must_match_fields_refuse() -> None:
    assert [d.path for d in check_comparable(BASE, QUANT, must_match=("task",))] == [
        "params.max_tokens",
        "server.build_info",
        "server.model_meta.ftype",
        "target",
    ]
    assert "differ in 1 field(s)" in _refusal(QUANT, must_match=("server.model_meta",))
    assert check_comparable(BASE, _manifest("spec")) == field_differences({"target": "base"}, {"target": "spec"})


def test_a_manifest_without_fingerprint_fields_cannot_be_checked() -> None:
    bare = RunManifest.load({"fingerprint": "f" * 20, "target": "old", "task": "math500"})
    with pytest.raises(NotComparableError) as err:
        check_comparable(bare, BASE)
    assert str(err.value) == (
        "The baseline run's manifest has no 'fingerprint_fields' mapping, so it cannot be checked for "
        "comparability; it was not written by `evalsuite run`."
    )
    with pytest.raises(NotComparableError, match="The repeat run's manifest has no 'fingerprint_fields' mapping"):
        check_comparable(BASE, bare, other_name="repeat")


def test_field_differences_leaf_by_leaf() -> None:
    assert field_differences({"stop": ("a", "b")}, {"stop": ["a", "b"]}) == []  # a tuple as its JSON list
    diffs = field_differences({"task": "t", "extra": {}}, {"task": "t"})  # an empty mapping is not an absent key
    assert [(d.path, d.baseline, d.other) for d in diffs] == [("extra", {}, "<absent>")]
    diffs = field_differences({"a": {"b": {"c": 1, "d": 2}}}, {"a": {"b": {"c": 1, "d": 3}}})
    assert [str(d) for d in diffs] == ["a.b.d: baseline 2, other 3"]
    # a field recorded as null is not an absent field, on either side
    assert [(d.baseline, d.other) for d in field_differences({"seed": None}, {"top_k": 1})] == [
        (None, "<absent>"),
        ("<absent>", 1),
    ]
    assert [(d.baseline, d.other) for d in field_differences({"top_k": 1}, {"seed": None})] == [
        ("<absent>", None),
        (1, "<absent>"),
    ]
