"""Numbers as people write them: two decimals, halves rounded up, computed in decimal.

Binary floats put 0.35 x 0.5 just under 0.175, so rounding them would give 0.17; a character's
confidence or a rumour's grown number is worked out as the decimals it reads as.
"""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal

_HUNDREDTHS = Decimal("0.01")


def decimal(number: float) -> Decimal:
    """The decimal a float reads as (`0.35`, not its binary expansion)."""
    return Decimal(repr(number))


def hundredths(exact: Decimal) -> float:
    """`exact` to two decimals, halves up; never -0.0 (a model's feeling of -0.004 was kept and
    served as `-0.0`, which no rule writes)."""
    return float(exact.quantize(_HUNDREDTHS, rounding=ROUND_HALF_UP)) + 0.0
