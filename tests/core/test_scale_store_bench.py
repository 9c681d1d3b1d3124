"""The scale benchmark runs end to end at a tiny size (as `make bench` runs it at its default size)."""

from __future__ import annotations

import os
import subprocess
import sys

from projects import ROOT


def test_the_scale_benchmark_measures_store_compare_and_report() -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    env.pop("SCALE_STORE_DIR", None)
    env["SCALE_STORE"] = "8x300"
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "scale_store.py")], capture_output=True, text=True, timeout=600, env=env
    )
    assert done.returncode == 0, done.stdout + done.stderr
    for line in ("bytes/token", "compare (4 arms):", "report (md + html + json", "verdict: "):
        assert line in done.stdout, done.stdout
