"""`pip install evalsuite` in a fresh virtualenv, in an empty folder: `init`, then `eval` on packaged tasks.

The wheel is built from a copy of the checkout (so the build leaves nothing
behind in it) and installed with --no-deps --no-index into a new
virtualenv.  The dependencies come from the virtualenv running the tests,
through a `.pth` line: a virtualenv created from another virtualenv's
python gets the base interpreter as its "system", so --system-site-packages
would not see them.  A path line in a `.pth` file also runs none of the
`.pth` files it points at, so the checkout's editable install stays
inactive and `import evalsuite` can only find the wheel's copy.

The config is exactly what `evalsuite init` writes, with only the three
base_url lines pointed at scripted servers (fixtures/fake_server.py).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_server import FakeServer, FakeState

ROOT = Path(__file__).resolve().parents[2]
NOT_SOURCES = shutil.ignore_patterns(
    ".git", ".venv", "runs", "reports", "build", "*.egg-info", "__pycache__", ".*_cache", ".hypothesis"
)


def _run(argv: list[str], cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A fresh virtualenv with the wheel built from this checkout installed; yields its bin folder."""
    if not (ROOT / "pyproject.toml").is_file():
        pytest.skip("needs the source tree to build a wheel from")
    base = tmp_path_factory.mktemp("install")
    source = base / "src"
    shutil.copytree(ROOT, source, symlinks=True, ignore=NOT_SOURCES)
    wheels = base / "wheels"
    build = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q"]
    done = _run([*build, "-w", str(wheels), str(source)], base, timeout=300)
    assert done.returncode == 0, f"building the wheel failed:\n{done.stdout}\n{done.stderr}"
    [wheel] = wheels.glob("evalsuite-*.whl")

    venv = base / "venv"
    done = _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], base)
    assert done.returncode == 0, done.stderr
    python = venv / "bin" / "python"
    purelib = _run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], base)
    deps = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    Path(purelib.stdout.strip(), "_test_dependencies.pth").write_text("\n".join(sorted(deps)) + "\n")
    install = [str(python), "-m", "pip", "install", "--no-deps", "--no-index", "--ignore-installed", "-q"]
    done = _run([*install, str(wheel)], base, timeout=300)
    assert done.returncode == 0, f"installing the wheel failed:\n{done.stdout}\n{done.stderr}"
    yield venv / "bin"


def test_the_wheel_carries_the_packaged_files_once_and_no_test_scaffolding(installed: Path) -> None:
    [wheel] = installed.parent.parent.glob("wheels/evalsuite-*.whl")
    listed = zipfile.ZipFile(wheel).namelist()
    names = set(listed)
    assert len(listed) == len(names)  # no file packed twice
    data = {n for n in names if n.startswith("evalsuite/package-data/")}
    tasks = sorted(Path(n).name for n in names if n.endswith(".yaml") and "/tasks/" in n)
    assert tasks == sorted(p.name for p in (ROOT / "tasks").glob("*.yaml"))  # each task spec once, in one place
    assert {"gsm8k.jsonl", "math500.jsonl", "livecodebench.jsonl", "humaneval.jsonl"} <= {Path(n).name for n in data}
    assert "evalsuite/package-data/fixtures/models/rig-learned.gguf" in names
    assert not [n for n in data if n.endswith(".py")]  # the fake servers stay in the repository
    assert not [n for n in names if n.startswith(("tests/", "fixtures/", "tasks/", "bench/", "rigbuild/"))]
    # no model training: torch appears only in the converter that runs inside vLLM's own environment
    torch = {n for n in names if n.endswith(".py") and b"import torch" in zipfile.ZipFile(wheel).read(n)}
    assert torch <= {"evalsuite/rig/vllm/convert.py"}
    assert {"evalsuite/cli/init_config.toml", "evalsuite/report/templates/report.html.j2"} <= names


@pytest.fixture
def servers() -> Iterator[list[FakeServer]]:
    started = [FakeServer(FakeState(tokens=12)) for _ in range(3)]
    for server in started:
        server.start()
    yield started
    for server in started:
        server.stop()


def test_init_then_eval_on_packaged_tasks_in_an_empty_folder(
    installed: Path, servers: list[FakeServer], tmp_path: Path
) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    where = _run([str(installed / "python"), "-c", "import evalsuite; print(evalsuite.__file__)"], empty)
    assert Path(where.stdout.strip()).is_relative_to(installed.parent), where.stdout + where.stderr

    done = _run([str(installed / "evalsuite"), "targets"], empty)
    assert done.returncode == 2 and "evalsuite init" in done.stderr

    done = _run([str(installed / "evalsuite"), "init"], empty)
    assert done.returncode == 0, done.stderr
    config = empty / "evalsuite.toml"
    text = config.read_text()
    urls = re.findall(r'^base_url = "(http://127\.0\.0\.1:\d+/v1)"', text, flags=re.M)
    assert len(urls) == 3
    for url, server in zip(urls, servers):
        text = text.replace(f'base_url = "{url}"', f'base_url = "{server.base_url}"')
    config.write_text(text)

    command = [str(installed / "evalsuite"), "eval", "speculative", "--data", "fixture", "--limit", "2", "-q"]
    done = _run([*command, "--task", "gsm8k"], empty, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "IDENTICAL: 2/2 token-identical" in done.stdout, done.stdout
    [report] = (empty / "reports" / "speculative").glob("*/report.md")
    assert "gsm8k" in report.read_text() and "IDENTICAL: " in report.read_text()
    assert (report.parent / "report.html").is_file()
    for target in ("baseline", "control", "speculative"):
        assert len(list((empty / "runs" / target / "gsm8k").glob("*/manifest.json"))) == 1
    assert sorted(p.name for p in empty.iterdir()) == ["evalsuite.toml", "reports", "runs"]


@pytest.mark.rig
def test_the_installed_package_serves_its_packaged_rig_models(installed: Path, tmp_path: Path) -> None:
    """The rig targets `init` documents, uncommented as they stand, run from the wheel's own model files."""
    empty = tmp_path / "empty"
    empty.mkdir()
    assert _run([str(installed / "evalsuite"), "init"], empty).returncode == 0
    config = empty / "evalsuite.toml"
    text = config.read_text()
    start = text.index("# [targets.rig-baseline]")
    config.write_text(text[:start] + "\n".join(line.removeprefix("# ") for line in text[start:].splitlines()))

    command = [str(installed / "evalsuite"), "eval", "rig-dflash", "--task", "gsm8k", "--data", "fixture"]
    done = _run([*command, "--limit", "2", "-q"], empty, timeout=600)
    assert done.returncode in (0, 1), done.stdout + done.stderr  # 1: a verdict, not a failure to run
    assert "token-identical" in done.stdout, done.stdout
    [manifest] = (empty / "runs" / "rig-dflash" / "gsm8k").glob("*/manifest.json")
    assert str(installed.parent) in manifest.read_text()  # served from the installed package's model file
