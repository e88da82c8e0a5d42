"""Order-preserving keys, packed in one C call (`key_packing.c` says how)."""

def pack(*parts: str | int) -> bytes:
    """Pack strings and non-negative integers (below 2**64) into one sortable key."""
