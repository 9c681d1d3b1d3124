"""Where reports go: `reports/<target>/<timestamp>/`, never overwriting an earlier report."""

from __future__ import annotations

import re
import time
from pathlib import Path

from evalsuite.errors import writing

_UNSAFE = re.compile(r"[^A-Za-z0-9._+-]+")


def report_folder(reports_dir: Path, target: str, *, now: float | None = None) -> Path:
    """A new folder `reports_dir/<target>/<UTC timestamp>/` (a suffix is added if that second is taken)."""
    name = _UNSAFE.sub("_", target).strip("._") or "target"
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(time.time() if now is None else now))
    base = Path(reports_dir) / name
    folder, i = base / stamp, 1
    while folder.exists():
        i += 1
        folder = base / f"{stamp}-{i}"
    with writing(base, "create a report folder in"):  # a full disk or a folder that may not be written: exit 4
        folder.mkdir(parents=True)
    return folder
