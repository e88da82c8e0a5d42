"""Large short-lived buffers, as the worker makes a few of per batch, reuse the pages the ones
before freed once the allocator's thresholds are raised, instead of faulting new ones in."""

from __future__ import annotations

import platform
import resource

import pytest

from streams.allocator import keep_large_buffers

BUFFER = 2 << 20  # a produce request's size, about
PAGE = 4096


def pages_faulted_by_a_batch() -> int:
    """Minor page faults while six 2 MB buffers are written, held together, then freed (as a
    produce request's copies are)."""
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    held = [b"x" * BUFFER for _ in range(6)]
    del held
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's mallopt")
def test_batches_of_large_buffers_fault_no_new_pages_in_once_raised() -> None:
    assert keep_large_buffers()
    pages_faulted_by_a_batch()  # the heap grows once
    faulted = [pages_faulted_by_a_batch() for _ in range(5)]
    assert max(faulted) < BUFFER // PAGE  # glibc's defaults: all 6 x 512 pages, every batch
