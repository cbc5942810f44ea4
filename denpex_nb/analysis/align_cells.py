"""The per-cell view :func:`.align.align` compares: one cell per (group, seq), one row per rank in it.

Two ways to the same :class:`Cells`:

* :func:`.align.cells_by_sort` sorts the rows by a packed (group, seq, rank) key, keeps the best row of each
  (cell, rank) (one with a size, then a completed one, then the first) and reduces each cell's run
  of the sorted rows with ``reduceat``; any input.
* :func:`cells_by_table` when every (cell, rank) holds one row and the group, seq and rank numbers
  are dense enough to index tables (a load of Flight Recorder dumps: 1024 ranks x 2000 seqs): cell
  numbers come from a table over (group, seq), each cell's reductions from unbuffered ``ufunc.at``
  over the rows as they are. Nothing is sorted or gathered through 2M rows (the sort, the gather of
  the fields and the run reductions were ~0.25 s of ``align`` on 1024 dumps x 2000 entries); only
  the rows of the few cells that diverge are looked up and ordered. With one row per (cell, rank)
  there is no best row to choose, so both ways give the same numbers, ranks and rows.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

_I64_MAX, _I64_MIN = np.iinfo(np.int64).max, np.iinfo(np.int64).min


@dataclass
class Cells:
    """Cells in (group, seq) order and what :func:`.align.align` compares per cell.

    ``dt_*``/``shape_*``: the lowest and highest code present (a cell with none has min > max);
    ``size_*``: likewise for the size key (NaN: unknown). ``cov``: first and last seq per (group,
    rank) (columns g, r, min, max), groups ascending, ranks in the order they first appear walking
    the cells in order. ``present(cells)``: the ranks of each given cell, ascending. ``take(idx)``:
    for positions in the cells' rows laid end to end (cell by cell, ranks ascending), the rows'
    positions in the events frame, their completed flag (any row of the (cell, rank)), local-size
    flag and size key."""

    g: np.ndarray
    s: np.ndarray
    counts: np.ndarray
    op_min: np.ndarray
    op_max: np.ndarray
    size_min: np.ndarray
    size_max: np.ndarray
    dt_min: np.ndarray
    dt_max: np.ndarray
    shape_min: np.ndarray
    shape_max: np.ndarray
    bad_any: np.ndarray
    cov: pd.DataFrame
    present: Callable[[np.ndarray], dict[int, list[int]]]
    take: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]


def cells_by_table(g, s, r, opc, size, dt, shape, bad, done) -> Cells | None:
    """:class:`Cells` without sorting the rows; None when it cannot (a (cell, rank) with two rows,
    negative or sparse numbers): then :func:`.align.cells_by_sort`. Arguments: per row, the group code,
    seq, rank, op code, size key (float, NaN unknown), dtype and shape codes (-1: none),
    local-size flag and completed flag."""
    n = len(g)
    limit = 2 * n + (1 << 16)  # tables no bigger than twice the rows
    if not n:
        return None
    g_lo, g_hi, r_lo, r_hi = int(g.min()), int(g.max()), int(r.min()), int(r.max())
    if g_lo < 0 or r_lo < 0 or g_hi >= limit or r_hi >= limit:
        return None
    s_lo = int(s.min())
    span = int(s.max()) - s_lo + 1
    gu, gi = (np.array([g_lo]), None) if g_lo == g_hi else _dense(g)
    ru, ri = _dense(r)
    n_cells_max, n_ranks = len(gu) * span, len(ru)
    if n_cells_max > limit:
        return None
    key = s - s_lo if gi is None else gi * span + (s - s_lo)
    used = np.bincount(key, minlength=n_cells_max) > 0
    keys = np.flatnonzero(used)
    cell = key if len(keys) == n_cells_max else (np.cumsum(used) - 1)[key]  # every key used: its own cell
    del key, used
    c = len(keys)
    if c * n_ranks > limit or not _one_row_each(cell, ri, c, n_ranks):
        return None  # a (cell, rank) with several rows: the best one is chosen by sorting
    counts = np.bincount(cell, minlength=c)

    def lowest(values, fill):
        out = np.full(c, fill, dtype=values.dtype)
        np.minimum.at(out, cell, values)
        return out

    def highest(values, fill):
        out = np.full(c, fill, dtype=values.dtype)
        np.maximum.at(out, cell, values)
        return out

    size_min = np.full(c, np.inf)
    np.fmin.at(size_min, cell, size)  # NaN is skipped: inf where none is known
    size_max = np.full(c, -np.inf)
    np.fmax.at(size_max, cell, size)
    if gi is None:
        gi = np.zeros(n, dtype=np.int64)
    cells = Cells(
        g=gu[keys // span],
        s=keys % span + s_lo,
        counts=counts,
        op_min=lowest(opc, _I64_MAX),
        op_max=highest(opc, _I64_MIN),
        size_min=size_min,
        size_max=size_max,
        dt_min=lowest(np.where(dt < 0, _I64_MAX, dt), _I64_MAX),
        dt_max=highest(dt, -1),
        shape_min=lowest(np.where(shape < 0, _I64_MAX, shape), _I64_MAX),
        shape_max=highest(shape, -1),
        bad_any=np.bincount(cell[bad], minlength=c) > 0,
        cov=_coverage(cell, c, gu, gi, ru, ri, s),
        present=lambda want: _present(want, cell, r, c),
        take=lambda idx: _take(idx, cell, r, c, counts, bad, done, size),
    )
    return cells


def _dense(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(distinct values ascending, each row's index among them) of small non-negative ints."""
    seen = np.bincount(x) > 0
    if seen.all():  # 0..max all present (ranks of a whole job): each value is its own index
        return np.arange(len(seen)), x
    return np.flatnonzero(seen), (np.cumsum(seen) - 1)[x]


def _one_row_each(cell: np.ndarray, ri: np.ndarray, c: int, n_ranks: int) -> bool:
    """Does every (cell, rank) hold at most one row? Rows that come rank by rank, each rank's once
    and its cells increasing (a load of dumps), say so in a few comparisons of neighbours; others
    are counted in a (cell, rank) table."""
    same = ri[1:] == ri[:-1]
    if int(np.count_nonzero(~same)) + 1 == n_ranks and bool(np.all((cell[1:] > cell[:-1]) | ~same)):
        return True
    return int(np.bincount(cell * n_ranks + ri, minlength=c * n_ranks).max()) <= 1


def _coverage(cell, c, gu, gi, ru, ri, s) -> pd.DataFrame:
    """First and last seq per (group, rank), in the row order :func:`.align._coverage` gives on
    the sorted rows: groups ascending, ranks in the order they first appear there (their first
    cell, then the rank)."""
    first_cell = np.full(len(ru), c, dtype=np.int64)
    np.minimum.at(first_cell, ri, cell)
    order = np.lexsort((ru, first_cell))  # rank indices in first-seen order
    at = np.empty(len(ru), dtype=np.int64)
    at[order] = np.arange(len(ru))
    width = len(ru)
    k = gi * width + at[ri]
    lo = np.full(len(gu) * width, _I64_MAX)
    hi = np.full(len(gu) * width, _I64_MIN)
    np.minimum.at(lo, k, s)
    np.maximum.at(hi, k, s)
    seen = np.flatnonzero(hi != _I64_MIN)
    return pd.DataFrame({"g": gu[seen // width], "r": ru[order][seen % width], "min": lo[seen], "max": hi[seen]})


def _rows_of(want: np.ndarray, cell, r, c) -> np.ndarray:
    """The rows of the cells ``want`` (ascending), ordered by cell, then rank."""
    mask = np.zeros(c, dtype=bool)
    mask[want] = True
    rows = np.flatnonzero(mask[cell])
    return rows[np.lexsort((r[rows], cell[rows]))]


def _present(want, cell, r, c) -> dict[int, list[int]]:
    want = np.unique(np.asarray(want, dtype=np.int64))
    rows = _rows_of(want, cell, r, c)
    out: dict[int, list[int]] = {int(k): [] for k in want}
    for k, rank in zip(cell[rows].tolist(), r[rows].tolist()):
        out[k].append(int(rank))
    return out


def _take(idx, cell, r, c, counts, bad, done, size):
    starts = np.cumsum(counts) - counts
    want = np.unique(np.searchsorted(starts, idx, side="right") - 1)
    rows = _rows_of(want, cell, r, c)
    pos = np.concatenate([np.arange(starts[k], starts[k] + counts[k]) for k in want])  # rows' places
    at = rows[np.searchsorted(pos, idx)]
    return at, done[at], bad[at], size[at]
