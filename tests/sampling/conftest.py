"""The rig fixture for the sampling tests (the same session-wide build as tests/rig uses, cached)."""

from __future__ import annotations

import pytest

from evalsuite.rig.assets import RigAssets, ensure_assets


@pytest.fixture(scope="session")
def rig_assets() -> RigAssets:
    """The built llama-server and the rig models (built on first use, then reused from the cache)."""
    return ensure_assets(progress=lambda msg: print(f"[rig] {msg}", flush=True))
