"""The C allocator of a process that ingests responses: freed memory kept for the next response.

Every response is read into buffers of its own size (a 2k-token answer with top-5 logprobs is about
1 MB of JSON, copied a few times on its way in), freed once it is stored.  glibc returns such blocks
to the kernel (`mmap` and `munmap` above a threshold, heap trimming below), so the next response
faults the same amount of memory back in page by page: some 800 page faults per 2k-token response,
about a seventh of the client's CPU per token, almost all of it kernel time.  Raising the thresholds
keeps freed blocks in the heap for reuse; the process's peak memory is unchanged, it is just not
given back between responses.
"""

from __future__ import annotations

import ctypes
import functools

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters (malloc.h)
MMAP_THRESHOLD = 64 << 20
"""Blocks below this come from the heap, whose freed memory is reused (a 32k-token body is about 14 MB)."""
TRIM_THRESHOLD = 256 << 20
"""Free memory at the heap's top is given back to the kernel only beyond this."""


@functools.cache
def keep_freed_memory() -> bool:
    """Tell glibc's allocator to keep freed blocks for reuse (once per process); False where it is not glibc."""
    try:
        mallopt = ctypes.CDLL(None).mallopt  # the C library the interpreter runs on
    except (OSError, AttributeError):  # no mallopt (macOS): that allocator keeps its own policy
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))
