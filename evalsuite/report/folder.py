"""Where reports go: `reports/<target>/<timestamp>/`, never overwriting an earlier report."""

from __future__ import annotations

import time
from pathlib import Path

from evalsuite.errors import writing
from evalsuite.folders import folder_name


def report_folder(reports_dir: Path, target: str, *, now: float | None = None) -> Path:
    """A new folder `reports_dir/<target>/<UTC timestamp>/` (a suffix is added if that second is taken)."""
    name = folder_name(target)
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(time.time() if now is None else now))
    base = Path(reports_dir) / name
    folder, i = base / stamp, 1
    while folder.exists():
        i += 1
        folder = base / f"{stamp}-{i}"
    with writing(base, "create a report folder in"):  # a full disk or a folder that may not be written: exit 4
        folder.mkdir(parents=True)
    return folder
