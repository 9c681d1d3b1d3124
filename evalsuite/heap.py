"""glibc's allocator told to keep the memory a run frees for the next response, not to give it back each time.

Each long answer's body (a megabyte a 2k-token answer) and the buffers it is read into are freed once the
response is stored, and the next response needs as much again.  By default glibc gives such memory back to the
kernel (a large block is unmapped when freed, the heap's free top is trimmed past a small threshold), so every
response maps its pages afresh: a page fault a page, 600-700 a 2k-token answer, a few microseconds each on a
virtual machine, about a tenth of the client's CPU.  Serving blocks up to 32 MiB from the heap and trimming
it only past 256 MiB keeps those pages mapped; the process holds at most that much freed memory.  The
interpreter's own small-object arenas are mapped apart and are not affected.

A comparison and a report read long outputs one sample at a time in the same way: each sample's arrays
(a 16k-token trace's top-k logprobs as float64 are 640 KiB) were mapped afresh, and page faults were
most of the baseline's resolution tally and a quarter of a comparison's time.

Elsewhere (another C library, another system) nothing is changed.
"""

from __future__ import annotations

import ctypes
import platform
import sys

M_TRIM_THRESHOLD, M_TOP_PAD, M_MMAP_THRESHOLD = -1, -2, -3  # glibc's <malloc.h>
SETTINGS = ((M_MMAP_THRESHOLD, 32 << 20), (M_TRIM_THRESHOLD, 256 << 20), (M_TOP_PAD, 16 << 20))

_kept: bool | None = None


def keep_freed_memory() -> bool:
    """Tune glibc's allocator once a process (see the module); whether it is tuned (False: not glibc)."""
    global _kept
    if _kept is None:
        _kept = _tune()
    return _kept


def _tune() -> bool:
    if not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc":
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    accepted = [mallopt(option, value) for option, value in SETTINGS]  # each tried, whatever the others gave
    return all(ok == 1 for ok in accepted)
