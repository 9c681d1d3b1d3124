"""The soak benchmark's short mode passes its own checks (as `make bench` and CI run it)."""

from __future__ import annotations

import subprocess
import sys

from projects import ROOT, checkout_env
from small_disk import mount_namespace


def test_the_short_soak_keeps_every_sample_once_within_the_retry_policy_with_flat_memory() -> None:
    """Where no disk can fill, the bench passes only when told to skip that episode, and says it did."""
    env = checkout_env("SOAK", "SOAK_SKIP_DISK")
    if mount_namespace() is None:
        env["SOAK_SKIP_DISK"] = "1"
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "soak.py")], capture_output=True, text=True, timeout=600, env=env
    )
    verdict = "PASS" if mount_namespace() is not None else "PASS; disk-full episode not measured"
    assert done.returncode == 0 and done.stdout.rstrip().endswith(verdict), done.stdout + done.stderr
    assert "samples stored once each: 2,000/2,000; as the server sent them: 2,000" in done.stdout
