"""The run manifest is typed and versioned: runs written before it load, migrate and compare as they did.

`fixtures/runs_v1` holds two run folders (and their comparison) written by the
code before the manifest was typed: version 1, no `schema_version`, a `role`.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from evalsuite.cli import main
from evalsuite.compare import SCHEMA_VERSION, compare_runs
from evalsuite.errors import StoreError
from evalsuite.records import GenerationParams
from evalsuite.serialize import to_jsonable
from evalsuite.store import MANIFEST_VERSION, MemoryRun, RunManifest, RunReader, RunStore, fingerprint, open_run
from evalsuite.store.database import STORE_LAYOUT
from evalsuite.store.manifest import MIGRATIONS

V1 = Path(__file__).parent / "fixtures" / "runs_v1"


@pytest.fixture
def v1_runs(tmp_path: Path) -> Path:
    """A copy of the version-1 run folders (opening a store may touch its WAL files; the fixture stays as it is)."""
    shutil.copytree(V1, tmp_path / "runs_v1")
    return tmp_path / "runs_v1"


def _raw(folder: Path) -> dict:
    return json.loads((folder / "manifest.json").read_text())


def test_a_version_1_run_loads_migrated_with_its_fields_and_fingerprint_intact(v1_runs: Path) -> None:
    raw = _raw(v1_runs / "spec")
    assert "schema_version" not in raw and raw["role"] == "candidate"  # the fixture really is version 1
    store = open_run(v1_runs / "spec")
    m = store.manifest
    assert m.schema_version == MANIFEST_VERSION and "role" not in to_jsonable(m)
    assert m.fingerprint_fields is not None
    assert m.fingerprint_fields.as_mapping() == raw["fingerprint_fields"]
    assert fingerprint(m.fingerprint_fields.as_mapping()) == m.fingerprint == raw["fingerprint"]
    assert m.target_config.baseline == "base" and m.fingerprint_fields.params.max_tokens == 64
    assert len(store) == 4
    store.close()
    assert _raw(v1_runs / "spec") == raw  # migrated in memory, never rewritten on disk


def test_a_version_1_pair_compares_as_the_previous_code_compared_it(v1_runs: Path) -> None:
    before = json.loads((V1 / "comparison.json").read_text())
    after = json.loads(compare_runs(v1_runs / "spec", v1_runs / "base", n_resamples=200).to_json())
    for role in ("candidate", "baseline"):
        assert after[role] == {k: v for k, v in before[role].items() if k != "role"}  # the role nothing read is gone
    added = {"holm_family", "speed", "truncation"}  # comparison schema 2 adds these and changes nothing else
    assert after.keys() - before.keys() == added and after["schema_version"] == SCHEMA_VERSION
    # schema 3 adds the baseline's logit resolution to the thresholds (and its evidence to their source);
    # every label and count stays as it was (the runs are identical: no divergence to describe)
    thresholds = after["token"]["thresholds"]
    assert thresholds.pop("resolution")["positions"] > 0
    assert thresholds["source"].startswith(before["token"]["thresholds"]["source"] + "; the baseline's logits")
    thresholds["source"] = before["token"]["thresholds"]["source"]
    # schema 4 judges divergences on the gap between the tokens chosen: the token verdict's largest gap for its
    # largest margin (none in identical runs either way), and whether few control flips widened the threshold
    assert after["token"].pop("max_gap") is None and before["token"].pop("max_margin") is None
    assert thresholds.pop("thin") is False and thresholds.pop("alpha") == 0.01
    # schema 5 opens the headline with the token label, the word the rest of the file already used
    assert after["summary"] == before["summary"].replace("LOSSLESS: ", "IDENTICAL: ", 1)
    assert after["token"]["label"] == before["token"]["label"] == "IDENTICAL"
    before["summary"] = after["summary"]
    for key in before.keys() - {"schema_version", "candidate", "baseline"}:
        assert after[key] == before[key], key


def test_generation_params_serialise_as_the_fingerprint_always_had_them() -> None:
    recorded = _raw(V1 / "base")["fingerprint_fields"]["params"]
    assert to_jsonable(GenerationParams(max_tokens=64)) == recorded


def test_every_older_version_has_a_migration_step() -> None:
    assert sorted(MIGRATIONS) == list(range(1, MANIFEST_VERSION))


def test_a_new_manifest_round_trips_with_its_version_and_without_role(tmp_path: Path) -> None:
    v1 = _raw(V1 / "base")
    store = RunStore.create(tmp_path / "run", v1)
    store.close()
    written = _raw(tmp_path / "run")
    assert written["schema_version"] == MANIFEST_VERSION and "role" not in written
    assert written["store_layout"] == STORE_LAYOUT  # a new run folder is written in today's layout
    added = {"schema_version", "store_layout"}
    assert {k: v for k, v in v1.items() if k != "role"} == {k: v for k, v in written.items() if k not in added}
    assert RunManifest.load(written) == open_run(tmp_path / "run").manifest


@pytest.mark.parametrize("version", [MANIFEST_VERSION + 1, 99])
def test_a_manifest_from_a_newer_evalsuite_is_refused_naming_the_version(
    version: int, v1_runs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = v1_runs / "spec" / "manifest.json"
    path.write_text(json.dumps({**_raw(v1_runs / "spec"), "schema_version": version, "new_part": {}}))
    before = path.read_bytes()
    with pytest.raises(StoreError, match=f"manifest schema {version} by a newer evalsuite"):
        open_run(path.parent)
    assert main(["grade", str(path.parent)]) == 2
    assert f"schema {version}" in capsys.readouterr().err
    assert path.read_bytes() == before


def test_unknown_keys_in_a_current_manifest_are_named(v1_runs: Path) -> None:
    path = v1_runs / "spec" / "manifest.json"
    current = {k: v for k, v in _raw(v1_runs / "spec").items() if k != "role"}
    path.write_text(json.dumps({**current, "schema_version": MANIFEST_VERSION, "colour": "red"}))
    with pytest.raises(StoreError, match=r"key\(s\) colour that manifest schema \d+ does not know"):
        open_run(path.parent)
    path.write_text(json.dumps({**current, "schema_version": MANIFEST_VERSION, "role": "candidate"}))
    with pytest.raises(StoreError, match=r"key\(s\) role that manifest schema"):  # only version 1 carries it
        open_run(path.parent)


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"schema_version": "2"}, "schema_version = '2'"),
        ({"schema_version": 0}, "schema_version = 0"),
        ({"target_config": {"allow_differences": "params"}}, "target_config.allow_differences"),
        ({"fingerprint_fields": {"repeat": "twice"}}, "fingerprint_fields.repeat"),
    ],
)
def test_a_mistyped_manifest_is_a_sentence_naming_the_key(change: dict, words: str, v1_runs: Path) -> None:
    path = v1_runs / "base" / "manifest.json"
    path.write_text(json.dumps({**_raw(v1_runs / "base"), **change}))
    with pytest.raises(StoreError) as err:
        open_run(path.parent)
    assert str(path) in str(err.value) and words in str(err.value)


def test_stored_and_in_memory_runs_are_one_reader(v1_runs: Path) -> None:
    """The same run read from disk and held in memory gives the same comparison through the same calls."""
    stored = {name: open_run(v1_runs / name) for name in ("spec", "base")}
    memory = {
        name: MemoryRun(s.manifest, s.results(), s.grades(), s.samples(), s.sessions()) for name, s in stored.items()
    }
    readers: list[RunReader] = [*stored.values(), *memory.values()]
    for reader in readers:
        lean = reader.results(strings="none", ids=["q0001"])
        assert list(lean) == ["q0001"]
    from_disk = compare_runs(stored["spec"], stored["base"], n_resamples=200).to_json()
    from_memory = compare_runs(memory["spec"], memory["base"], n_resamples=200).to_json()
    assert from_disk == from_memory


def test_run_has_no_role_option(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["run", "base", "--config", str(project), "--role", "baseline"])
    assert exit_.value.code == 2
    assert "--role" in capsys.readouterr().err
