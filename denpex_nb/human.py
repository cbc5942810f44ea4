"""Text for people: rank lists as ranges, missing values as an empty cell or a word.

Why one module: a 1024-rank job must read the same way in a finding's summary, the terminal
output of ``denpex-nb diagnose``, the HTML report and the notebooks. Every layer writes rank
lists and table cells through these few functions (the JSON keeps the full lists), so "ranks
0–216, 218–255" and an empty cell instead of ``None``/``<NA>``/``NaN``/``NaT`` are decided here
once. It imports nothing (not even pandas), so the foundation stays light.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

#: the dash between the ends of a range (an en dash, as in print)
DASH = "\u2013"


def rank_ranges(ranks: Iterable) -> str:
    """``0–216, 218–255`` for a collection of ranks (sorted, de-duplicated); ``""`` for none.

    Two neighbours stay a list (``3, 4``): a range reads better only from three on.
    """
    values = sorted({int(r) for r in ranks if not is_missing(r)})
    parts: list[str] = []
    i = 0
    while i < len(values):
        j = i
        while j + 1 < len(values) and values[j + 1] == values[j] + 1:
            j += 1
        if j - i >= 2:
            parts.append(f"{values[i]}{DASH}{values[j]}")
        else:
            parts.extend(str(v) for v in values[i : j + 1])
        i = j + 1
    return ", ".join(parts)


def fmt_ranks(ranks: Iterable, *, none: str = "no rank") -> str:
    """``rank 3``, ``ranks 0–216, 218–255`` (with the word), or ``none`` for an empty list."""
    values = sorted({int(r) for r in ranks if not is_missing(r)})
    if not values:
        return none
    return ("rank " if len(values) == 1 else "ranks ") + rank_ranges(values)


def count_ranks(ranks: Iterable) -> str:
    """``3 ranks (0–2)``, ``1 rank (7)``: a count and the ranges, for headers and table rows."""
    values = sorted({int(r) for r in ranks if not is_missing(r)})
    n = len(values)
    return f"{n} rank{'' if n == 1 else 's'}" + (f" ({rank_ranges(values)})" if values else "")


def is_missing(value) -> bool:
    """True for None, NaN, pandas' ``NA`` and ``NaT`` (without importing pandas)."""
    if value is None:
        return True
    if isinstance(value, float):
        return math.isnan(value)
    if isinstance(value, (str, bytes, list, tuple, dict)):
        return False
    try:
        return bool(value != value)  # NaN, NaT
    except (TypeError, ValueError):  # pandas NA refuses bool()
        return type(value).__name__ in ("NAType", "NaTType")


def cell(value, missing: str = "") -> str:
    """A table cell as text: ``missing`` (default empty) for a missing value, ``3`` for ``3.0``."""
    if is_missing(value):
        return missing
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        try:
            return cell(value.item(), missing)
        except (ValueError, TypeError):
            pass
    return str(value)
