"""A run keeps the memory of one response for the next: a block of a response's size is not mapped afresh."""

from __future__ import annotations

import platform
import subprocess
import sys

import pytest
from projects import checkout_env

from evalsuite import heap

ALLOCATE = """
import resource, sys
from evalsuite.heap import keep_freed_memory
if sys.argv[1] == "tuned":
    assert keep_freed_memory()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(50):
    reads = [b"x" * (64 << 10) for _ in range(32)]  # a 2 MiB body in network reads, every page written
    body = b"".join(reads)
    del reads, body  # the response stored: all of it freed
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def _faults(mode: str) -> int:
    env = checkout_env("MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TOP_PAD_", "GLIBC_TUNABLES")
    done = subprocess.run([sys.executable, "-c", ALLOCATE, mode], capture_output=True, text=True, env=env, check=True)
    return int(done.stdout)


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="the tuning is glibc's allocator's")
def test_a_freed_body_sized_block_is_reused_not_mapped_again() -> None:
    untouched, tuned = _faults("default"), _faults("tuned")
    assert untouched > 50 * 512, untouched  # the reads' 512 pages (and more) mapped again every time
    assert tuned < 4 * 1024, (tuned, untouched)  # mapped once, then reused


def test_nothing_is_tuned_where_the_c_library_is_not_glibc(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(platform, "libc_ver", lambda: ("musl", "1.2"))
    assert heap._tune() is False
