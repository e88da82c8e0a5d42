"""The change feed's records, built in one call each (`change_records.c` says how)."""

def record(
    position: tuple[bytes, bytes],
    shape: tuple[bytes, bytes, tuple[bytes, ...]],
    one: str,
    other: str,
    values: tuple[str | int | float | bool | bytes | None, ...],
    /,
) -> bytes: ...
