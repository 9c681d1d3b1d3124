"""One file from PyPI through pip (the rig's only network access), or a local copy named by a variable."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from evalsuite.rig.errors import RigError


def pip_fetch(
    package: str,
    version: str,
    dest: Path,
    *,
    form: Literal["sdist", "wheel"],
    env_var: str,
    what: str,
    progress: Callable[[str], None],
) -> Path:
    """`$env_var` if set (offline machines, CI caches), else `pip download --no-deps` of that one file.

    `what` says what is downloaded, for the progress line ("source distribution (about 75 MB)").
    """
    preset = os.environ.get(env_var)
    if preset:
        path = Path(preset).expanduser()
        if not path.is_file():
            raise RigError(f"{env_var} points at {path}, which is not a file.")
        return path
    progress(f"Downloading the {package}=={version} {what} with pip.")
    only = ["--no-binary", ":all:"] if form == "sdist" else ["--only-binary", ":all:"]
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", *only, f"{package}=={version}", "-d", str(dest)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    stem = f"{package.replace('-', '_')}-{version}"
    found = sorted(dest.glob(f"{stem}.tar.gz" if form == "sdist" else f"{stem}-*.whl"))
    if proc.returncode != 0 or not found:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
        raise RigError(
            f"pip could not download {package}=={version} (exit {proc.returncode}). Without network access, "
            f"download the {form} elsewhere and set {env_var} to its path.\n{tail}"
        )
    return found[0]
