"""The scale benchmark runs end to end at a tiny size (as `make bench` runs it at its default size)."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from projects import ROOT, checkout_env


@pytest.mark.parametrize(("every", "ids"), [("25", "1"), ("1", "1"), ("25", "0"), ("1", "chosen")])
def test_the_scale_benchmark_measures_store_compare_and_report(every: str, ids: str) -> None:
    env = checkout_env("SCALE_STORE_DIR")
    env["SCALE_STORE"], env["SCALE_STORE_DIVERGE"], env["SCALE_STORE_IDS"] = "8x300", every, ids
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "scale_store.py")], capture_output=True, text=True, timeout=600, env=env
    )
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    for line in ("bytes/token", "compare (4 arms):", "report (md + html + json", "verdict: "):
        assert line in out, out
    per_token = float(re.search(r"store: ([\d.]+) bytes/token", out).group(1))  # type: ignore[union-attr]
    assert 4 < per_token < 100, out  # at least the ids' 4 bytes; below the old layout's 106
    rss = [int(m) for m in re.findall(r"peak RSS (?:of compare \+ report )?(\d+) MiB", out)]
    assert len(rss) == 3 and all(50 < r < 1024 for r in rss), out
    assert ("0/8 token-identical" in out) == (every == "1"), out  # an engine diverging everywhere, read as such
    assert ("tokens without ids" in out) == (ids == "0"), out
    assert ("ids for the chosen tokens only" in out) == (ids == "chosen"), out


def test_the_scale_benchmark_refuses_an_unknown_id_shape_by_name() -> None:
    env = checkout_env("SCALE_STORE_DIR")
    env["SCALE_STORE"], env["SCALE_STORE_IDS"] = "8x300", "some"
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "scale_store.py")], capture_output=True, text=True, timeout=600, env=env
    )
    assert done.returncode != 0 and "SCALE_STORE_IDS must be one of 1, 0, chosen, not 'some'" in done.stderr
