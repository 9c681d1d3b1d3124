"""The memory of servers the suite starts: their processes' peak resident memory, and GPU memory by nvidia-smi."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from evalsuite.serve.memory import MemoryWatch, process_tree

HOLD = (
    "import sys; block = bytearray({mib} << 20); block[::4096] = b'x' * len(block[::4096]); "
    "print('ready', flush=True); sys.stdin.read()"
)


def _start(argv: list[str]) -> subprocess.Popen[str]:
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"  # the memory is held now
    return proc


def _end(proc: subprocess.Popen[str]) -> None:
    assert proc.stdin is not None
    proc.stdin.close()
    proc.wait(timeout=60)


def test_a_one_process_server_reports_its_high_water_mark() -> None:
    proc = _start([sys.executable, "-c", HOLD.format(mib=96)])
    watch = MemoryWatch(proc.pid, interval_s=3600).start()  # one reading at start, the rest on demand
    try:
        peak = watch.stop()
    finally:
        _end(proc)
    assert peak.rss_mb is not None and peak.rss_mb >= 96
    assert peak.gpu_mb is None and peak.readings >= 1


def test_a_server_of_several_processes_counts_them_all(tmp_path: Path) -> None:
    """vLLM's engine runs in a child process: the child's memory is the server's too."""
    child = HOLD.format(mib=64)
    parent = (
        f"import subprocess, sys; c = subprocess.Popen([sys.executable, '-c', {child!r}], stdin=sys.stdin); c.wait()"
    )
    proc = _start([sys.executable, "-c", parent])
    watch = MemoryWatch(proc.pid, interval_s=3600)
    try:
        tree = process_tree(proc.pid)
        assert len(tree) == 2 and tree[0] == proc.pid
        watch.read()
        peak = watch.peak()
    finally:
        _end(proc)
    assert peak.rss_mb is not None and peak.rss_mb >= 64 + 5  # the child's block and the parent's interpreter


def test_gpu_memory_comes_from_nvidia_smi_for_the_servers_own_processes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    proc = _start([sys.executable, "-c", HOLD.format(mib=1)])
    smi = tmp_path / "nvidia-smi"
    smi.write_text(f"#!/bin/sh\necho '{proc.pid}, 1536'\necho '1, 999'\n")  # another process's memory is not counted
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    try:
        peak = MemoryWatch(proc.pid, interval_s=3600).start().stop()
    finally:
        _end(proc)
    assert peak.gpu_mb == 1536 and "nvidia-smi" in peak.how


def test_a_gone_process_is_not_measured() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait(timeout=60)
    peak = MemoryWatch(proc.pid).peak()
    assert peak.rss_mb is None and peak.readings == 0
