"""What starting the CLI costs.

Every command imports `evalsuite.cli.commands`, so the heavy libraries only some commands
use (pandas for frames, scipy for statistics, the graders' sympy, datasets and lm-eval) must
wait until a command asks for them: pandas alone was two fifths of a run's start-up CPU.
And OpenBLAS, loaded with numpy, starts a spinning thread per core that the suite's own
process never uses (`evalsuite.blas`), while the servers it starts keep the user's setting.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from evalsuite import blas
from evalsuite.cli import main
from evalsuite.serve.process import ServerCommand, served

HEAVY = ("pandas", "pyarrow", "scipy", "sympy", "math_verify", "datasets", "lm_eval", "torch", "matplotlib")


def _without_blas_setting() -> dict[str, str]:
    """The environment without what sets OpenBLAS's threads (it falls back on GOTO's and OpenMP's)."""
    return {k: v for k, v in os.environ.items() if k not in (blas.VARIABLE, "GOTO_NUM_THREADS", "OMP_NUM_THREADS")}


def test_the_cli_imports_no_heavy_library_before_a_command_needs_it() -> None:
    probe = (
        "import json, sys\n"
        "import evalsuite.cli.commands\n"
        f"print(json.dumps(sorted(m for m in {HEAVY!r} if m in sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == []


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="counts threads through Linux's /proc")
@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="OpenBLAS starts no threads of its own on one core")
def test_the_program_loads_numpy_without_blas_threads(tmp_path: Path) -> None:
    probe = (
        "import os, sys\n"
        "from evalsuite.cli import main\n"
        "sys.argv = ['evalsuite', 'runs']\n"
        "code = main()\n"
        "import numpy\n"
        "print(code, len(os.listdir('/proc/self/task')), os.environ.get('OPENBLAS_NUM_THREADS'))\n"
    )
    env = _without_blas_setting()
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=tmp_path, env=env)
    assert out.stdout.split() == ["2", "1", "1"], out.stderr  # no evalsuite.toml here: exit 2, after the imports
    unguarded = subprocess.run(
        [sys.executable, "-c", "import os, numpy; print(len(os.listdir('/proc/self/task')))"],
        capture_output=True,
        text=True,
        env=env,
    )
    assert int(unguarded.stdout) > 1  # what the setting saves: without it numpy's OpenBLAS starts its threads


def test_the_program_leaves_httpx_its_command_line_client_unloaded(tmp_path: Path) -> None:
    probe = (
        "import sys\n"
        "from evalsuite.cli import main\n"
        "sys.argv = ['evalsuite', 'runs']\n"
        "code = main()\n"
        "imported = 'httpx' in sys.modules\n"
        "import httpx\n"
        "print(code, imported, sys.modules['httpx._main'], httpx.main.__module__)\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=tmp_path)
    assert out.stdout.split() == ["2", "True", "None", "httpx"], out.stderr  # the command imported httpx; its stub main


def test_a_caller_of_main_keeps_its_own_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(blas.VARIABLE, raising=False)
    monkeypatch.chdir(tmp_path)
    assert main(["runs"]) == 2
    assert blas.VARIABLE not in os.environ


def test_the_users_own_setting_stands(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(blas, "_set_here", False)
    monkeypatch.setenv(blas.VARIABLE, "1")
    assert not blas.one_blas_thread()
    assert blas.user_environ()[blas.VARIABLE] == "1"
    monkeypatch.setenv(blas.VARIABLE, "8")
    assert not blas.one_blas_thread() and os.environ[blas.VARIABLE] == "8"


def test_a_started_server_gets_the_environment_the_user_left(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(blas, "_set_here", False)
    monkeypatch.delenv(blas.VARIABLE, raising=False)
    assert blas.one_blas_thread() and os.environ[blas.VARIABLE] == "1"
    monkeypatch.setenv(blas.VARIABLE, "1")  # the same value, now one monkeypatch takes away when the test ends
    dump = tmp_path / "env.json"
    server = (
        "import http.server, json, os, sys\n"
        f"open({str(dump)!r}, 'w').write(json.dumps(dict(os.environ)))\n"
        "http.server.HTTPServer(('127.0.0.1', int(sys.argv[1])), http.server.SimpleHTTPRequestHandler).serve_forever()\n"
    )
    command = ServerCommand(
        "envdump", (sys.executable, "-c", server, "{port}"), env={"MARK": "x"}, cwd=tmp_path, health_path="/"
    )
    with served([command], tmp_path / "logs"):
        seen = json.loads(dump.read_text())
    assert seen["MARK"] == "x" and blas.VARIABLE not in seen
