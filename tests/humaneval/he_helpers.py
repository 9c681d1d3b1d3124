"""Helpers for the HumanEval tests: paths, the shared data folder and how a model's answer is wrapped."""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def shared_data_dir() -> Path:
    """../shared/data beside the checkout (override: EVALSUITE_SHARED_DATA)."""
    return Path(os.environ.get("EVALSUITE_SHARED_DATA", ROOT.parent / "shared" / "data"))


def fenced(code: str) -> str:
    return f"Here is the function.\n```python\n{code}\n```\nIt passes the examples."
