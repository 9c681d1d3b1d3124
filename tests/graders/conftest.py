"""Fixtures for the grader tests."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from grader_helpers import shared_data


@pytest.fixture(scope="session")
def data_file() -> Callable[[str], Path]:
    """Path to a file under shared/data, or skip the test when it is not there."""

    def find(relative: str) -> Path:
        path = shared_data() / relative
        if not path.exists():
            pytest.skip(f"{path} is not available (set EVALSUITE_SHARED_DATA to the shared data folder)")
        return path

    return find
