"""lm-eval tests: skip cleanly without the lmeval extra; never reach the hub."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

pytest.importorskip("lm_eval", reason="the lmeval extra is not installed (pip install 'evalsuite[lmeval]')")
