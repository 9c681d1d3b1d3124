"""Shared fixtures (the scripted fake server, a throwaway project folder) and the rig tests' cost by module."""

from __future__ import annotations

import sys
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "fixtures"))
sys.path.insert(0, str(ROOT / "tests"))

from fake_server import FakeServer, FakeState  # noqa: E402
from projects import make_project  # noqa: E402

# Property tests judge what a function returns, never how fast: hypothesis's 200 ms deadline per example
# fails them on a loaded machine (a 473 ms example under two CPU burners), so it is off for the whole suite.
settings.register_profile("evalsuite", deadline=None)
settings.load_profile("evalsuite")


@pytest.fixture
def fake_server() -> Iterator[FakeServer]:
    server = FakeServer(FakeState(tokens=12))
    server.start()
    yield server
    server.stop()


@pytest.fixture
def project(tmp_path: Path, fake_server: FakeServer) -> Path:
    return make_project(tmp_path, fake_server.base_url)


class RigCosts:
    """Wall time of the rig tests by module, printed at the end of the session (`make test`'s rig budget).

    A module's cost is its tests' setup, call and teardown, so the servers its module-scoped fixtures start
    count there; the session-scoped fixtures (the llama-server build and the models, servers shared between
    modules) are counted apart, by name, since they are paid once for whichever module asks first.
    """

    def __init__(self) -> None:
        self.modules: dict[str, float] = defaultdict(float)
        self.tests: Counter[str] = Counter()
        self.shared: dict[str, float] = defaultdict(float)
        self._depth = 0
        self._shared_in_setup = 0.0

    @pytest.hookimpl(hookwrapper=True)
    def pytest_fixture_setup(self, fixturedef: pytest.FixtureDef[Any]) -> Iterator[None]:
        if fixturedef.scope != "session":
            yield
            return
        self._depth += 1
        started = time.perf_counter()
        try:
            yield
        finally:
            self._depth -= 1
            if self._depth == 0:  # the outermost: what it needed is inside its time
                spent = time.perf_counter() - started
                self.shared[fixturedef.argname] += spent
                self._shared_in_setup += spent

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if "rig" not in report.keywords:
            return
        module = report.nodeid.split("::")[0]
        spent = report.duration
        if report.when == "setup":
            spent -= self._shared_in_setup
            self._shared_in_setup = 0.0
            self.tests[module] += 1
        self.modules[module] += max(0.0, spent)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if not self.modules:
            return
        write = terminalreporter.write_line
        total = sum(self.modules.values()) + sum(self.shared.values())
        write(f"rig tests: {total / 60:.1f} min in all, by module (setup, tests and teardown):")
        for module, spent in sorted(self.modules.items(), key=lambda item: -item[1]):
            write(f"  {spent:7.1f} s  {module} ({self.tests[module]} tests)")
        for name, spent in sorted(self.shared.items(), key=lambda item: -item[1]):
            if spent >= 0.1:  # not the plugins' own trivial ones
                write(f"  {spent:7.1f} s  session fixture {name}, shared by the modules")


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(RigCosts(), "rig-costs")
