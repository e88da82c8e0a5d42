"""The C allocator's thresholds, raised for the worker's large, short-lived buffers.

Every batch the worker takes in makes buffers of a megabyte or two: the changelog's record
batches, the produce requests (aiokafka copies each some eight times while encoding it), the
fetched records. glibc serves each from a fresh `mmap` and unmaps it when freed, or trims the
heap top once that much is free: every new buffer then has its pages faulted in and zeroed by
the kernel again. That cost ten times the copying itself (a 1.7 MB produce request: 2.8 ms of
CPU, 2.4 of them in the kernel, against 0.26 ms with these thresholds). Raised, the freed pages
stay in the heap for the next batch; at most `TRIM_THRESHOLD` of free heap is kept.
"""

from __future__ import annotations

import ctypes
import sys

MMAP_THRESHOLD = 8 << 20
"""Allocations from this size on still get their own `mmap` (above any batch or request)."""
TRIM_THRESHOLD = 32 << 20
"""Free memory at the heap's top beyond this goes back to the system."""
# glibc's `mallopt` parameters (malloc.h) that set the two thresholds.
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3


def keep_large_buffers() -> bool:
    """Raise glibc's thresholds for this process; False where the C library has no `mallopt`
    that takes them (not Linux, not glibc: nothing changes)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(
        mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD)
    )
