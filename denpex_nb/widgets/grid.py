"""The explorer's model: one (counter, process group) of an incident as a ranks x seqs grid.

Why a grid: at 512 ranks x 2000 collectives a question such as "every rank at seq 1500" or
"which cells disagree with their column" must answer in milliseconds, and a picture must be
aggregated to the pixels on screen rather than drawn one artist per cell. Everything here is
numpy over integer codes built once per (counter, process group); the tables a person reads are
built from the codes on demand, odd ranks first and the agreeing majority collapsed into one row.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import pandas as pd

from .. import plot
from ..human import rank_ranges

#: in :attr:`Grid.paint`: 0 = no cell, 1..n = op codes, then these two (drawn above the ops)
MISSING = -1


@dataclass
class Grid:
    """Ranks x seqs of one counter and process group, as integer codes.

    ``cell[i, j]`` is the code of rank ``ranks[i]``'s entry at ``seqs[j]`` (an index into
    :attr:`labels`), or :data:`MISSING`; ``sig[i, j]`` the code of what must agree across ranks
    (op, shapes, dtype), so :attr:`odd` marks cells that differ from their column's majority.
    """

    ranks: np.ndarray
    seqs: np.ndarray
    cell: np.ndarray  # int32 ranks x seqs -> index into labels, MISSING where absent
    sig: np.ndarray  # int32 ranks x seqs -> signature code, MISSING where absent
    labels: pd.DataFrame  # one row per distinct (op, in_shapes, out_shapes, dtype, state)
    op_of_cell: np.ndarray  # label index -> op code
    op_names: list[str]
    seq_kind: str | None
    pg: str | None
    frame: pd.DataFrame = field(repr=False)  # the lanes frame it was built from

    @classmethod
    def build(cls, incident, seq_kind=None, pg=None, diagnosis=None) -> Grid:
        ln = plot.lanes(incident, seq_kind, pg, diagnosis)
        df = ln.frame
        ranks = np.asarray(sorted(set(ln.ranks) | set(df["rank"].astype("int64").tolist())), dtype=np.int64)
        seqs = np.asarray(ln.seqs, dtype=np.int64)
        cell = np.full((len(ranks), len(seqs)), MISSING, dtype=np.int32)
        sig = np.full_like(cell, MISSING)
        cols = ["op", "in_shapes", "out_shapes", "dtype", "state"]
        if df.empty:
            labels = pd.DataFrame(columns=cols)
            return cls(ranks, seqs, cell, sig, labels, np.zeros(0, np.int32), [], ln.seq_kind, ln.pg, df)
        ri = np.searchsorted(ranks, df["rank"].to_numpy(dtype=np.int64))
        si = np.searchsorted(seqs, df["seq"].to_numpy(dtype=np.int64))
        show = pd.DataFrame(
            {
                "op": df["op"].astype(str).to_numpy(),
                "in_shapes": df["label"].to_numpy(),
                "out_shapes": _out_labels(df["out_shapes"]),
                "dtype": _value_labels(df["dtype"]),
                "state": _value_labels(df["state"]),
            }
        )
        combined = np.zeros(len(show), dtype=np.int64)
        for c in cols:  # one code per distinct row, without building a tuple per row
            part, uniq = pd.factorize(show[c])
            combined = combined * (len(uniq) + 1) + part
        codes, first = _first_codes(combined)
        labels = show.iloc[first].reset_index(drop=True)
        cell[ri, si] = codes
        sig_codes, _ = pd.factorize(df["sig"])
        sig[ri, si] = sig_codes
        op_codes, op_names = pd.factorize(labels["op"], sort=True)
        return cls(ranks, seqs, cell, sig, labels, op_codes.astype(np.int32), list(op_names), ln.seq_kind, ln.pg, df)

    # --- what disagrees -------------------------------------------------------------------------

    @cached_property
    def majority(self) -> np.ndarray:
        """Per seq column, the most common signature code; MISSING when more ranks have no entry
        there than share any one entry (then the few ranks that do are the odd ones)."""
        out = np.full(len(self.seqs), MISSING, dtype=np.int32)
        if not self.sig.size:
            return out
        present = self.sig >= 0
        cols = np.nonzero(present)[1]
        codes = self.sig[present]
        pairs = pd.DataFrame({"c": cols, "s": codes}).value_counts(sort=True)
        top = pairs.reset_index().drop_duplicates("c", keep="first")
        out[top["c"].to_numpy()] = top["s"].to_numpy()
        n_top = np.zeros(len(self.seqs), dtype=np.int64)
        n_top[top["c"].to_numpy()] = top.iloc[:, -1].to_numpy()
        n_missing = len(self.ranks) - present.sum(axis=0)
        out[n_missing > n_top] = MISSING
        return out

    @cached_property
    def odd(self) -> np.ndarray:
        """Cells present but differing from their column's majority signature."""
        return (self.sig >= 0) & (self.sig != self.majority[None, :])

    @cached_property
    def missing(self) -> np.ndarray:
        """Cells absent where at least one rank has an entry (every column has one by construction)."""
        return self.sig < 0

    @cached_property
    def paint(self) -> np.ndarray:
        """int16 picture codes: 1..n ops, n+1 missing, n+2 odd (a block's max keeps the odd visible)."""
        n = len(self.op_names)
        pic = np.zeros(self.cell.shape, dtype=np.int16)
        have = self.cell >= 0
        pic[have] = self.op_of_cell[self.cell[have]] + 1
        pic[self.missing] = n + 1
        pic[self.odd] = n + 2
        return pic

    def odd_cells(self, limit: int = 50) -> pd.DataFrame:
        """The first ``limit`` odd or missing cells by seq: rank, seq, what (differs / missing)."""
        bad = self.odd | (self.missing & self._reached_later())
        r, s = np.nonzero(bad)
        order = np.lexsort((r, s))[:limit]
        return pd.DataFrame(
            {
                "rank": self.ranks[r[order]],
                "seq": self.seqs[s[order]],
                "what": np.where(self.odd[r[order], s[order]], "differs", "missing"),
            }
        )

    def _reached_later(self) -> np.ndarray:
        """Missing cells of a rank that has entries after them: a skipped collective, not a stop."""
        present = self.sig >= 0
        if not present.size:
            return present
        last = np.where(present.any(axis=1), present.shape[1] - 1 - np.argmax(present[:, ::-1], axis=1), -1)
        return np.arange(present.shape[1])[None, :] < last[:, None]

    # --- lookups --------------------------------------------------------------------------------

    def row_of(self, rank: int) -> int | None:
        i = int(np.searchsorted(self.ranks, rank))
        return i if i < len(self.ranks) and self.ranks[i] == rank else None

    def col_of(self, seq: int) -> int | None:
        j = int(np.searchsorted(self.seqs, seq))
        return j if j < len(self.seqs) and self.seqs[j] == seq else None

    def nearest_col(self, seq: float) -> int | None:
        if not len(self.seqs):
            return None
        j = int(np.clip(np.searchsorted(self.seqs, seq), 0, len(self.seqs) - 1))
        if j > 0 and abs(self.seqs[j - 1] - seq) <= abs(self.seqs[j] - seq):
            j -= 1
        return j

    def describe(self, i: int, j: int) -> str:
        """One cell in words (hover text): ``rank 3 · seq 7 · all_gather [5,4] float32 completed``."""
        if not (0 <= i < len(self.ranks) and 0 <= j < len(self.seqs)):
            return ""
        head = f"rank {self.ranks[i]} · seq {self.seqs[j]}"
        c = self.cell[i, j]
        if c < 0:
            return f"{head} · missing"
        lab = self.labels.iloc[int(c)]
        tail = " · differs from the majority" if self.odd[i, j] else ""
        return f"{head} · {lab['op']} {lab['in_shapes']} {lab['dtype']} {lab['state']}{tail}"

    # --- tables ---------------------------------------------------------------------------------

    def entries_at(self, seq: int, *, ranks=None, collapse: bool = True) -> pd.DataFrame:
        """Every rank's entry at ``seq``: odd ranks first, then the agreeing majority.

        ``collapse`` groups ranks with the same entry into one row (``ranks`` as ranges, ``count``);
        without it there is one row per rank, in the same order. ``ranks`` restricts to those ranks.
        """
        cols = ["ranks", "count", "op", "in_shapes", "out_shapes", "dtype", "state", "vs majority"]
        j = self.col_of(seq)
        rows_idx = np.arange(len(self.ranks))
        if ranks is not None:
            rows_idx = rows_idx[np.isin(self.ranks, np.asarray(list(ranks), dtype=np.int64))]
        if j is None:
            cells = np.full(len(rows_idx), MISSING, dtype=np.int32)
            sigs = cells
            maj = MISSING
        else:
            cells, sigs, maj = self.cell[rows_idx, j], self.sig[rows_idx, j], self.majority[j]
        verdict = np.where(sigs < 0, "missing", np.where(sigs == maj, "agrees", "differs"))
        key = pd.DataFrame({"cell": cells, "verdict": verdict, "rank": self.ranks[rows_idx]})
        groups = []
        for (c, v), g in key.groupby(["cell", "verdict"], sort=False):
            groups.append((int(c), str(v), g["rank"].tolist()))
        order = {"differs": 0, "missing": 1, "agrees": 2}
        # odd first (the smallest groups first: the lone culprit on top), the majority last (when
        # most ranks have no entry, the missing group is the majority and goes last)
        groups.sort(key=lambda t: (order[t[1]], len(t[2]) if t[1] != "agrees" else -len(t[2]), t[2][0]))
        major = [k for k, t in enumerate(groups) if t[1] == "agrees" or (maj == MISSING and t[1] == "missing")]
        if major:
            big = max(major, key=lambda k: len(groups[k][2]))
            groups.append(groups.pop(big))
        out = []
        for c, v, rs in groups:
            lab = self.labels.iloc[c] if c >= 0 else None
            base = {
                "op": lab["op"] if lab is not None else "missing",
                "in_shapes": lab["in_shapes"] if lab is not None else "",
                "out_shapes": lab["out_shapes"] if lab is not None else "",
                "dtype": lab["dtype"] if lab is not None else "",
                "state": lab["state"] if lab is not None else "no entry",
                "vs majority": v,
            }
            if collapse:
                out.append({"ranks": rank_ranges(rs), "count": len(rs), **base})
            else:
                out.extend({"ranks": str(r), "count": 1, **base} for r in rs)
        df = pd.DataFrame(out, columns=cols)
        df.attrs.update(seq=seq, seq_kind=self.seq_kind, pg=self.pg)
        return df

    def rank_window(self, rank: int, seq: int, width: int = 5) -> pd.DataFrame:
        """One rank's entries from ``seq - width`` to ``seq + width`` (the window moves with seq)."""
        i = self.row_of(rank)
        j = self.col_of(seq)
        if j is None:
            j = self.nearest_col(seq)
        cols = ["seq", "op", "in_shapes", "out_shapes", "dtype", "state", "vs majority"]
        if i is None or j is None:
            return pd.DataFrame(columns=cols)
        lo, hi = max(0, j - width), min(len(self.seqs), j + width + 1)
        rows = []
        for jj in range(lo, hi):
            c = self.cell[i, jj]
            lab = self.labels.iloc[int(c)] if c >= 0 else None
            rows.append(
                {
                    "seq": int(self.seqs[jj]),
                    "op": lab["op"] if lab is not None else "missing",
                    "in_shapes": lab["in_shapes"] if lab is not None else "",
                    "out_shapes": lab["out_shapes"] if lab is not None else "",
                    "dtype": lab["dtype"] if lab is not None else "",
                    "state": lab["state"] if lab is not None else "no entry",
                    "vs majority": "missing" if c < 0 else ("differs" if self.odd[i, jj] else "agrees"),
                }
            )
        return pd.DataFrame(rows, columns=cols)


def aggregate(paint: np.ndarray, rows: tuple[int, int], cols: tuple[int, int], max_rows: int, max_cols: int):
    """Codes of rows ``[r0, r1)`` x cols ``[c0, c1)`` reduced to at most ``max_rows x max_cols``
    blocks, each keeping its highest code (odd > missing > op): one odd cell among a million stays
    visible at any zoom, and the image never has more pixels than the screen shows."""
    sub = paint[rows[0] : rows[1], cols[0] : cols[1]]
    if sub.shape[0] > max_rows:
        starts = np.unique(np.linspace(0, sub.shape[0], max_rows, endpoint=False).astype(np.int64))
        sub = np.maximum.reduceat(sub, starts, axis=0)
    if sub.shape[1] > max_cols:
        starts = np.unique(np.linspace(0, sub.shape[1], max_cols, endpoint=False).astype(np.int64))
        sub = np.maximum.reduceat(sub, starts, axis=1)
    return sub


def _first_codes(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Codes 0..k-1 for ``values`` and the position of each code's first occurrence."""
    uniq, first, inverse = np.unique(values, return_index=True, return_inverse=True)
    return inverse.astype(np.int32), first


def _value_labels(series: pd.Series) -> np.ndarray:
    """:func:`plot.value_label` of every value, computed once per distinct value."""
    codes, uniq = pd.factorize(series.astype("object"), use_na_sentinel=True)
    names = np.array([plot.value_label(v) for v in uniq] + ["?"], dtype=object)
    return names[codes]  # code -1 (missing) picks the trailing "?"


def _out_labels(series: pd.Series) -> np.ndarray:
    """Output shape labels ("" when unknown), computed once per distinct shape."""
    values = series.to_numpy(dtype=object)
    try:
        codes, uniq = pd.factorize(values, use_na_sentinel=True)
    except TypeError:  # an unhashable shape (a list): label row by row
        return np.array([plot.shape_label(v) if isinstance(v, (tuple, list)) else "" for v in values], dtype=object)
    names = np.array([plot.shape_label(u) if isinstance(u, (tuple, list)) else "" for u in uniq] + [""], dtype=object)
    return names[codes]
