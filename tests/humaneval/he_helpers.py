"""Helpers for the HumanEval tests: paths, the shared data folder and how a model's answer is wrapped."""

from __future__ import annotations

from projects import ROOT, shared_data_dir

__all__ = ["ROOT", "fenced", "shared_data_dir"]


def fenced(code: str) -> str:
    return f"Here is the function.\n```python\n{code}\n```\nIt passes the examples."
