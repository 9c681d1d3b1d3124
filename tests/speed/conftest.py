"""Speed tests reuse the stored-run builders of tests/report; rig tests get the built rig."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "report"))


@pytest.fixture(scope="session")
def rig_assets():  # type: ignore[no-untyped-def]
    """The built llama-server and the rig's models (built on first use, then cached machine-wide)."""
    from evalsuite.rig.assets import ensure_assets

    return ensure_assets(progress=lambda msg: print(f"[rig] {msg}", flush=True), include_learned=False)
