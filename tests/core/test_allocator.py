"""The ingesting process keeps freed memory for the next response instead of faulting it in again."""

from __future__ import annotations

import platform
import subprocess
import sys

import pytest

SCRIPT = """
import resource, sys
from evalsuite.allocator import keep_freed_memory
if sys.argv[1] == "keep":
    assert keep_freed_memory()
def faults_for_one_response():
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    body = bytearray(48 << 20)  # a large body, written through: every page touched
    del body
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
faults_for_one_response()
print(faults_for_one_response())
"""


def _faults(mode: str) -> int:
    out = subprocess.run([sys.executable, "-c", SCRIPT, mode], capture_output=True, text=True, check=True)
    return int(out.stdout)


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="the thresholds are glibc's")
def test_a_second_response_of_the_same_size_reuses_the_memory_of_the_first() -> None:
    pages = (48 << 20) // 4096
    assert _faults("default") > pages // 2  # glibc hands such a block back to the kernel when it is freed
    assert _faults("keep") < pages // 20
