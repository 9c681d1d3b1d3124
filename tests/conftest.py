"""Shared fixtures: the scripted fake server and a throwaway project folder."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "fixtures"))
sys.path.insert(0, str(ROOT / "tests"))

from fake_server import FakeServer, FakeState  # noqa: E402
from projects import make_project  # noqa: E402


@pytest.fixture
def fake_server() -> Iterator[FakeServer]:
    server = FakeServer(FakeState(tokens=12))
    server.start()
    yield server
    server.stop()


@pytest.fixture
def project(tmp_path: Path, fake_server: FakeServer) -> Path:
    return make_project(tmp_path, fake_server.base_url)
