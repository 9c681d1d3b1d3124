"""The gate on real llama-server outputs: the H200 recordings as stored runs.

The recordings (../shared/data/recordings) hold a draft-model target whose
12 divergences all sit at near-ties (gaps 0.002 to 0.037 nats) and a
fake-acceptance target that is lossy by construction.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from stored_runs import recording_store, recordings_dir
from test_gate import gate

needs_recordings = pytest.mark.skipif(
    not (recordings_dir() / "base_f16.json.gz").exists(), reason=f"recordings not found under {recordings_dir()}"
)


@needs_recordings
def test_draft_passes_under_numerical_and_synthetic_fails_readably(tmp_path: Path) -> None:
    base = recording_store(tmp_path, "base_f16").folder
    control = recording_store(tmp_path, "spec_f16_self").folder
    draft = recording_store(tmp_path, "spec_f16_draftq4").folder
    synth = recording_store(tmp_path, "synth_f16").folder
    ok = gate(tmp_path, "--evalsuite-run", draft, "--evalsuite-baseline", base, "--evalsuite-control", control)
    assert ok.returncode == 0 and "24 passed" in ok.stdout, ok.stdout + ok.stderr
    strict = gate(tmp_path, "--evalsuite-run", draft, "--evalsuite-baseline", base, "--evalsuite-policy", "strict")
    assert "12 failed, 12 passed" in strict.stdout
    bad = gate(tmp_path, "--evalsuite-run", synth, "--evalsuite-baseline", base, "--evalsuite-control", control, "-rf")
    assert bad.returncode == 1
    failed = [line for line in bad.stdout.splitlines() if line.startswith("FAILED evalsuite::gsm8k::gsm8k-test-")]
    assert len(failed) >= 20
    assert (
        "LOSSY: confident divergence: the candidate chose a token" in bad.stdout
        and "below the baseline's own" in bad.stdout
    )
    assert "baseline alternatives at" in bad.stdout and ">>" in bad.stdout
