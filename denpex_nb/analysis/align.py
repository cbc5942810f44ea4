"""Align collective events across ranks per (pg, seq_kind, seq) and find where ranks diverge.

Vectorised with numpy: events are reduced to integer codes, sorted once by a packed
(group, seq, rank) key, and compared per (group, seq) with ``reduceat``; no Python loop runs per
event. Only the few divergent (group, seq) cells are looked at in Python afterwards.

Counters are never compared across ``seq_kind`` (a WorkNCCL SeqNum, a Flight Recorder id and a
DETAIL SequenceNumber are different counters): the group is (pg, seq_kind).

Size rules are op-aware: all_reduce/broadcast/reduce compare numel in; all_gather-like compare the
input (and, within a rank, out = in x world size); reduce_scatter-like compare the output (and
in = out x world size); all_to_all and barrier are compared by op and dtype only (totals may
legitimately differ with uneven splits).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..ops import GATHER_LIKE, P2P, SCATTER_LIKE
from ..vocab import ALIGNABLE_SEQ_KINDS, SEQ_KIND_PREFERENCE, State
from .align_cells import Cells, cells_by_table

#: counters that can be aligned across ranks (desync '#N' is per rank, NCCL opCount per comm)
ALIGNABLE_KINDS = tuple(str(k) for k in ALIGNABLE_SEQ_KINDS)
#: when one divergence shows in several counters, report it in the most precise one
KIND_PREFERENCE = {str(k): i for i, k in enumerate(SEQ_KIND_PREFERENCE)}
#: ranks of a group are listed one by one only up to this size: a world size of 2**31 in a corrupt
#: or crafted log must not become a list (or a set) of two billion ranks
MAX_LISTED_RANKS = 1 << 16
_NO_SIZE = frozenset({"barrier", "all_to_all", "all_to_all_single", "coalesced", "unknown"})
_STATE_DONE = str(State.COMPLETED)
_STATE_TIMED_OUT = str(State.TIMED_OUT)
#: ops whose input tensors must have the same shape on every rank, not only the same element count
_SAME_SHAPE = frozenset(
    {
        "all_reduce",
        "reduce",
        "broadcast",
        "all_gather",
        "all_gather_into_tensor",
        "reduce_scatter",
        "reduce_scatter_tensor",
    }
)


@dataclass
class Divergence:
    """One (pg, seq_kind, seq) where ranks disagree. ``rows`` holds the aligned rows (one per rank)."""

    kind: str  # "op" | "dtype" | "size" | "local-size" | "shape" | "missing"
    pg: str | None
    seq_kind: str
    seq: int
    _rows: pd.DataFrame | None  # see ``rows``
    missing: list[int] = field(default_factory=list)  # ranks expected here but absent
    present: list[int] = field(default_factory=list)
    lag: dict[int, int] = field(default_factory=dict)  # rank -> last seq seen (for "missing")
    t_wall: pd.Timestamp | None = None
    #: ``rows.to_dict("records")``, made once for every divergence of an alignment (None: not made)
    records: list[dict] | None = field(default=None, repr=False, compare=False)
    #: makes ``rows`` on first use (align gives the rules ``records``; few read the frame)
    _take: Callable[[], pd.DataFrame] | None = field(default=None, repr=False, compare=False)

    @property
    def rows(self) -> pd.DataFrame | None:
        """The events rows of the ranks present, one per rank (with ``_done``, ``_local_bad``, ``_size``)."""
        if self._rows is None and self._take is not None:
            self._rows, self._take = self._take(), None
        return self._rows

    @rows.setter
    def rows(self, value: pd.DataFrame | None) -> None:
        self._rows, self._take = value, None


@dataclass
class Alignment:
    """Result of :func:`align`: the divergences plus per-group facts used for notes."""

    divergences: list[Divergence]
    members: dict[tuple[str, str], list[int]]  # (pg, seq_kind) -> ranks seen
    n_events: int
    n_cells: int  # (pg, seq_kind, seq) cells compared
    missing_dumps: dict[tuple[str, str], list[int]]  # world_size says more ranks than seen


def align(events: pd.DataFrame) -> Alignment:
    """Find every divergence in ``events`` (an Incident's events frame)."""
    ev = with_sole_groups(_collective_rows(events))
    if ev.empty:
        return Alignment([], {}, 0, 0, {})

    pg_cat = _as_cat(ev["pg"])
    kind_cat = _as_cat(ev["seq_kind"])
    pg_codes = pg_cat.cat.codes.to_numpy(np.int64) + 1  # 0 = no pg
    kind_codes = kind_cat.cat.codes.to_numpy(np.int64)
    n_kinds = max(len(kind_cat.cat.categories), 1)
    g = pg_codes * n_kinds + kind_codes
    r = ev["rank"].to_numpy(np.int64)
    s = ev["seq"].to_numpy(np.int64)

    op_cat = _as_cat(ev["op"])
    opc = op_cat.cat.codes.to_numpy(np.int64)
    nin, nout = _floats(ev["numel_in"]), _floats(ev["numel_out"])  # once, for both size rules
    size = _size_key(ev, op_cat, nin, nout)
    shape = _shape_codes(ev, op_cat)  # -1: unknown or not compared
    dt = _as_cat(ev["dtype"]).cat.codes.to_numpy(np.int64) if "dtype" in ev else np.full(len(ev), -1, np.int64)
    done = (ev["state"] == _STATE_DONE).to_numpy(bool, na_value=False)
    local_bad = _local_size_violation(ev, op_cat, g, r, nin, nout)
    del nin, nout  # 2 x 16 MB at 2M rows: not kept through the sort below

    # --- one cell per (group, seq), one row per rank in it: by tables when the rows allow, else sorted
    cells = cells_by_table(g, s, r, opc, size, dt, shape, local_bad, done)
    if cells is None:
        cells = cells_by_sort(g, s, r, opc, size, dt, shape, local_bad, done)
    counts = cells.counts
    cstart = np.cumsum(counts) - counts
    multi = counts > 1
    op_div = multi & (cells.op_min != cells.op_max)
    dt_div = multi & ~op_div & (cells.dt_min < cells.dt_max)
    size_div = multi & ~op_div & ~dt_div & (cells.size_min < cells.size_max)
    local_div = ~op_div & ~dt_div & ~size_div & cells.bad_any
    # same element count, different shapes: completes on every backend, combines by flat position
    shape_div = multi & ~op_div & ~dt_div & ~size_div & ~local_div & (cells.shape_min < cells.shape_max)

    # --- per (group, rank) coverage: first/last seq, for missing ranks (laggards / extra calls)
    cov = cells.cov
    gmax = cov.groupby("g")["max"].transform("max")
    laggards = cov[cov["max"] < gmax]

    pg_names = np.asarray(pg_cat.cat.categories, dtype=object)
    kind_names = np.asarray(kind_cat.cat.categories, dtype=object)

    def names(gcode: int) -> tuple[str | None, str]:
        pgc, kc = divmod(int(gcode), n_kinds)
        return (None if pgc == 0 else str(pg_names[pgc - 1])), str(kind_names[kc])

    members = {names(gc): sorted(int(x) for x in sub["r"]) for gc, sub in cov.groupby("g")}

    out: list[Divergence] = []
    todo: list[tuple[Divergence, int, int]] = []  # rows come in one go (_with_rows)
    present_in = cells.present(np.flatnonzero(op_div | dt_div | size_div | local_div | shape_div))
    for label, mask in (
        ("op", op_div),
        ("dtype", dt_div),
        ("size", size_div),
        ("local-size", local_div),
        ("shape", shape_div),
    ):
        for ci in np.flatnonzero(mask):
            lo, hi = cstart[ci], cstart[ci] + counts[ci]
            pg, kind = names(cells.g[ci])
            out.append(Divergence(label, pg, kind, int(cells.s[ci]), None, present=present_in[int(ci)]))
            todo.append((out[-1], lo, hi))

    # missing: one divergence per distinct lag level in a group
    # (group, seq) -> cell, and each group's cell seqs in order (cells are sorted by group, then seq)
    cell_at = {(int(gc), int(sq)): ci for ci, (gc, sq) in enumerate(zip(cells.g, cells.s))}
    cell_seqs = {int(gc): np.sort(cells.s[cells.g == gc]) for gc in np.unique(cells.g)} if len(laggards) else {}
    for gc, sub in laggards.groupby("g"):
        allcov = cov[cov["g"] == gc]
        # the group's coverage as arrays, its cells' seqs sorted: each lag level is a few numpy steps
        a_r, a_min, a_max = (allcov[c].to_numpy() for c in ("r", "min", "max"))
        s_r, s_max = sub["r"].to_numpy(), sub["max"].to_numpy()
        g_seqs = cell_seqs.get(int(gc), np.empty(0, np.int64))
        lag = {int(rr): int(m) for rr, m in zip(a_r, a_max)}
        for level in sorted(set(int(x) for x in s_max)):
            seq = level + 1
            present = a_r[(a_min <= seq) & (a_max >= seq)].astype(int).tolist()
            missing = s_r[s_max == level].astype(int).tolist()
            if not present:
                continue
            ci = cell_at.get((int(gc), seq))
            if ci is None:
                # the others' records resume later (a watchdog line or a fingerprint per rank is
                # all there is): compare with the first seq past the laggards that others reached
                k = int(np.searchsorted(g_seqs, level, side="right"))
                if k == len(g_seqs):
                    continue
                seq = int(g_seqs[k])
                present = a_r[(a_min <= seq) & (a_max >= seq)].astype(int).tolist()
                if not present:
                    continue
                ci = cell_at.get((int(gc), seq))
            lo, hi = cstart[ci], cstart[ci] + counts[ci]
            pg, kind = names(gc)
            out.append(Divergence("missing", pg, kind, seq, None, missing=missing, present=present, lag=dict(lag)))
            todo.append((out[-1], lo, hi))

    _with_rows(todo, ev, cells.take)
    missing_dumps = {}
    if "world_size" in ev.columns:
        wsv = _floats(ev["world_size"])
        if not np.all(np.isnan(wsv)):
            for gc, w in _max_per_group(g, wsv):
                seen = members.get(names(gc), [])
                # only when ranks are numbered 0..w-1 (default group): then absent ranks are known
                if not np.isnan(w) and seen and max(seen) < int(w) and len(seen) < int(w) <= MAX_LISTED_RANKS:
                    missing_dumps[names(gc)] = sorted(set(range(int(w))) - set(seen))
    return Alignment(out, members, len(ev), len(cstart), missing_dumps)


def _with_rows(todo: list[tuple[Divergence, int, int]], ev: pd.DataFrame, take) -> None:
    """Give each divergence of ``todo`` (with its cell ``lo:hi`` of the sorted selection) its
    ``rows`` (with ``_done``, ``_local_bad``, ``_size``), ``records`` and ``t_wall``.

    Why in one go: a big incident can hold a thousand divergences of a few rows each; taking each
    cell's rows from the events frame apart (and turning each into records apart, in the rules)
    cost ~10 ms a divergence in pandas' per-call work. Here the rows of every divergent cell are
    taken once, each divergence's ``rows`` is a copy of its slice of them and its ``records`` a
    slice of one ``to_dict``: the same rows, columns and values as a frame taken per cell.
    ``take``: :attr:`.align_cells.Cells.take`."""
    if not todo:
        return
    spans = sorted({(lo, hi) for _, lo, hi in todo})
    idx = np.concatenate([np.arange(lo, hi) for lo, hi in spans])
    at, done_any, bad, size = take(idx)
    frame = ev.iloc[at].copy()
    frame["_done"] = done_any
    frame["_local_bad"] = bad
    frame["_size"] = size
    records = frame.to_dict("records")
    at, off = {}, 0
    for lo, hi in spans:
        at[(lo, hi)] = off
        off += hi - lo
    stamps = "t_wall" in frame and frame["t_wall"].dtype.kind == "M"  # records hold Timestamps / NaT
    for d, lo, hi in todo:
        o = at[(lo, hi)]
        d._take = functools.partial(_slice, frame, o, o + hi - lo)
        d.records = records[o : o + hi - lo]
        if stamps:
            ts = [r["t_wall"] for r in d.records if r["t_wall"] is not pd.NaT]
            d.t_wall = min(ts) if ts else None  # as _tmin says it: the earliest, None when none is known
        else:
            d.t_wall = _tmin(d.rows)


def cells_by_sort(g, s, r, opc, size, dt, shape, bad, done) -> Cells:
    """:class:`Cells` of any rows, through one stable sort of a packed (group, seq, rank) key."""
    s_off = s - s.min()
    r_bits = max(int(r.max()).bit_length(), 1) if r.min() >= 0 else 0
    s_bits = max(int(s_off.max()).bit_length(), 1)
    g_bits = max(int(g.max()).bit_length(), 1)
    packed = bool(r.min() >= 0 and r_bits + s_bits + g_bits <= 60)
    if packed:
        key = (g << (s_bits + r_bits)) | (s_off << r_bits) | r
    else:  # pragma: no cover - absurd seq ranges
        # cells numbered in (group, seq) order, as the packed key orders them: the same list of divergences
        cell_of = pd.MultiIndex.from_arrays([g, s]).factorize(sort=True)[0].astype(np.int64)
        # as wide as every rank from the lowest: with a negative rank no two (cell, rank) share a key
        key = cell_of * (int(r.max()) - int(r.min()) + 1) + (r - r.min())
    del s_off

    quality = (~np.isnan(size)).astype(np.int64) * 2 + done.astype(np.int64)
    if int(key.max()) < (1 << 60):
        sort_key = (key << 2) | (3 - quality)
        order = np.argsort(sort_key, kind="stable")  # best row of a (cell, rank) first
        # the sorted sort key holds the key and ``done`` (the low bit of 3 - quality is 1 - done):
        # one gather through ``order`` instead of two (each ~45 ms at 2M rows, see _pack_fields)
        sorted_key = sort_key[order]
        del sort_key
        key_sorted = sorted_key >> 2
        done_sorted = (sorted_key & 1) == 0
        del sorted_key
    else:  # pragma: no cover
        order = np.lexsort((-quality, key))
        key_sorted, done_sorted = key[order], done[order]
    first = np.ones(len(order), dtype=bool)
    first[1:] = key_sorted[1:] != key_sorted[:-1]
    # any completed among duplicates of one (cell, rank)
    dup_start = np.flatnonzero(first)
    done_any = np.maximum.reduceat(done_sorted.astype(np.int8), dup_start).astype(bool)
    del done_sorted
    sel = order[first]  # one row per (group, seq, rank), sorted

    if packed:  # the sorted keys hold group, seq and rank: no gather through ``sel`` (2M random reads each)
        ks = key_sorted[first]
        cell1 = ks >> r_bits
        g1, s1, r1 = cell1 >> s_bits, (cell1 & ((1 << s_bits) - 1)) + s.min(), ks & ((1 << r_bits) - 1)
    else:  # pragma: no cover
        g1, s1, r1, cell1 = g[sel], s[sel], r[sel], cell_of[sel]
    fields = _pack_fields(opc, dt, bad, shape)
    if fields is not None:  # one gather of the four small fields, not four
        op1, dt1, bad1, shape1 = _unpack_fields(fields[0][sel], *fields[1:])
    else:  # pragma: no cover - tens of thousands of distinct ops, dtypes and shapes at once
        op1, dt1, bad1, shape1 = opc[sel], _nan_codes(dt[sel]), bad[sel], _nan_codes(shape[sel])
    del fields
    size1 = size[sel]
    cstart = np.flatnonzero(np.r_[True, cell1[1:] != cell1[:-1]])
    counts = np.diff(np.r_[cstart, len(sel)])

    def present(want) -> dict[int, list[int]]:
        return {int(k): [int(x) for x in r1[cstart[k] : cstart[k] + counts[k]]] for k in want}

    return Cells(
        g=g1[cstart],
        s=s1[cstart],
        counts=counts,
        op_min=np.minimum.reduceat(op1, cstart),
        op_max=np.maximum.reduceat(op1, cstart),
        size_min=np.minimum.reduceat(np.where(np.isnan(size1), np.inf, size1), cstart),
        size_max=np.maximum.reduceat(np.where(np.isnan(size1), -np.inf, size1), cstart),
        dt_min=np.minimum.reduceat(np.where(np.isnan(dt1), np.inf, dt1), cstart),
        dt_max=np.maximum.reduceat(np.where(np.isnan(dt1), -np.inf, dt1), cstart),
        shape_min=np.minimum.reduceat(np.where(np.isnan(shape1), np.inf, shape1), cstart),
        shape_max=np.maximum.reduceat(np.where(np.isnan(shape1), -np.inf, shape1), cstart),
        bad_any=np.maximum.reduceat(bad1.astype(np.int8), cstart).astype(bool),
        cov=_coverage(g1, r1, s1),
        present=present,
        take=lambda idx: (sel[idx], done_any[idx], bad1[idx], size1[idx]),
    )


def _nan_codes(codes: np.ndarray) -> np.ndarray:
    """Integer codes (-1: none) as floats with NaN for none, the form align's reductions compare."""
    out = codes.astype(np.float64)
    out[codes < 0] = np.nan
    return out


def _pack_fields(opc: np.ndarray, dt: np.ndarray, bad: np.ndarray, shape: np.ndarray):
    """The op code, dtype code and shape code (integers, -1: none) and the local-size flag of each
    row packed into one int64, with the bit widths :func:`_unpack_fields` needs; None when they do
    not fit in 62 bits.

    Why: the rows are taken in (group, seq, rank) order, a transpose of the rank-major rows of a
    load of dumps; a gather of 2M values in that order costs ~45 ms (a TLB miss a value), and the
    four fields gathered apart were a third of ``align`` on 1024 dumps x 2000 entries. The codes
    stay integers until they are unpacked (no float pass over the 2M rows before the gather)."""
    op = opc + 1  # -1 (no op) -> 0
    dtc = dt + 1
    shc = shape + 1
    widths = [max(int(a.max()) if len(a) else 0, 1).bit_length() for a in (op, dtc, shc)]
    if op.min(initial=0) < 0 or 1 + sum(widths) > 62:
        return None
    _, b_dt, b_sh = widths
    packed = (op << (b_dt + b_sh + 1)) | (dtc << (b_sh + 1)) | (shc << 1) | bad.astype(np.int64)
    return packed, b_dt, b_sh


def _unpack_fields(p: np.ndarray, b_dt: int, b_sh: int):
    """(op codes, dtype codes, local-size flags, shape codes) of packed rows, as
    ``opc[sel], dt[sel], local_bad[sel], shape[sel]`` give them, the dtype and shape codes as
    floats with NaN for a missing code (:func:`_nan_codes`)."""
    sh = ((p >> 1) & ((1 << b_sh) - 1)).astype(np.float64)
    dtv = ((p >> (b_sh + 1)) & ((1 << b_dt) - 1)).astype(np.float64)
    sh[sh == 0] = np.nan
    dtv[dtv == 0] = np.nan
    return (p >> (b_dt + b_sh + 1)) - 1, dtv - 1, (p & 1).astype(bool), sh - 1


def _slice(frame: pd.DataFrame, lo: int, hi: int) -> pd.DataFrame:
    return frame.iloc[lo:hi].copy()


def _collective_rows(events: pd.DataFrame) -> pd.DataFrame:
    if events is None or events.empty:
        return events.iloc[0:0] if events is not None else pd.DataFrame()
    ev = events
    mask = (
        ev["rank"].notna() & ev["seq"].notna() & ev["seq_kind"].isin(ALIGNABLE_KINDS) & ~ev["op"].isin(P2P)
    ).to_numpy()
    return ev if mask.all() else ev[mask]  # no copy of 2M rows when every row aligns


def with_sole_groups(ev: pd.DataFrame) -> pd.DataFrame:
    """``ev`` where a timed-out row that names no group takes the one group its counter's rows name,
    when they name only one. A watchdog's timeout line names no group in torch up to 2.3, and from 2.4
    the status line after it names the group (``[PG 0 Rank 3] Timeout at NCCL work: 4084``, ``[PG ID 1
    PG GUID 1 Rank 3] failure detected by watchdog at work sequence id: 4084``): when the evidence kept
    that line for some ranks only, the ranks' timeouts at one seq would otherwise fall in two cells and
    never be compared. A rank with unnamed timeouts at several seqs of the counter keeps them unnamed
    (they may be of different groups). The stuck-points rule reads its watchdog errors the same way."""
    if ev.empty or "state" not in ev or "pg" not in ev:
        return ev
    pg = ev["pg"]
    no_pg = pg.isna().to_numpy(bool)
    unnamed = no_pg & (ev["state"] == _STATE_TIMED_OUT).to_numpy(bool, na_value=False)
    if not unnamed.any() or no_pg.all():
        return ev
    kinds = ev["seq_kind"].astype(object)
    named = pd.DataFrame({"k": kinds[~no_pg], "g": pg[~no_pg].astype(object)})
    groups = named.groupby("k", sort=False)["g"].agg(["nunique", "first"])
    sole = groups.loc[groups["nunique"] == 1, "first"]
    todo = pd.DataFrame({"r": ev["rank"][unnamed], "k": kinds[unnamed], "s": ev["seq"][unnamed]})
    todo = todo[todo["k"].isin(sole.index)]
    places = todo.groupby(["r", "k"], sort=False)["s"].transform("nunique")
    todo = todo[places.eq(1).to_numpy(bool)]
    if todo.empty:
        return ev
    filled = pg.astype(object).copy()
    filled.loc[todo.index] = todo["k"].map(sole).to_numpy(object)
    return ev.assign(pg=filled)


def _coverage(g: np.ndarray, r: np.ndarray, s: np.ndarray) -> pd.DataFrame:
    """First and last seq per (group, rank), with dense numpy reductions (ranks are small ints)."""
    if len(g) and bool(np.all(g[1:] >= g[:-1])):  # align's rows come sorted by group: codes from the breaks
        brk = np.r_[True, g[1:] != g[:-1]]
        gi, gu = np.cumsum(brk) - 1, g[brk]  # what pd.factorize(g) gives, without hashing 2M values
    else:
        gi, gu = pd.factorize(g)
    ri, ru = pd.factorize(r)  # dense rank codes: a rank number like 2**31 costs nothing
    width = max(len(ru), 1)
    k = gi.astype(np.int64) * width + ri
    lo = np.full(len(gu) * width, np.iinfo(np.int64).max)
    hi = np.full(len(gu) * width, np.iinfo(np.int64).min)
    np.minimum.at(lo, k, s)
    np.maximum.at(hi, k, s)
    seen = np.flatnonzero(hi != np.iinfo(np.int64).min)
    return pd.DataFrame({"g": gu[seen // width], "r": np.asarray(ru)[seen % width], "min": lo[seen], "max": hi[seen]})


def _as_cat(s: pd.Series) -> pd.Series:
    """A categorical view (categoricals stay as they are: no per-row string work on 2M rows)."""
    if isinstance(s.dtype, pd.CategoricalDtype):
        return s.cat.remove_unused_categories() if len(s.cat.categories) > 4096 else s
    return s.astype(object).where(s.notna(), None).astype("category")


def _family_lookup(op_cat: pd.Series, names: frozenset) -> np.ndarray:
    cats = np.asarray(op_cat.cat.categories, dtype=object)
    lut = np.array([c in names for c in cats] + [False], dtype=bool)  # code -1 -> last slot
    return code_flags(op_cat.cat.codes.to_numpy(), lut)


def code_flags(codes: np.ndarray, lut: np.ndarray) -> np.ndarray:
    """``lut[codes]`` for a boolean table over a categorical's codes (its last entry is code -1's).
    A flag of a few categories comes from comparing the narrow codes: a gather through 2M int8
    codes first widens them to 2M array indices (~4 ms a lookup, five or more per diagnosis)."""
    hits = np.flatnonzero(lut[:-1])
    if lut[-1] or len(hits) > 4:
        return lut[codes]
    out = np.zeros(len(codes), dtype=bool)
    for c in hits.tolist():
        out |= codes == c
    return out


def _floats(col: pd.Series) -> np.ndarray:
    """A numeric column as float64 with NaN for missing (no to_numeric pass when already numeric)."""
    if pd.api.types.is_numeric_dtype(col.dtype):
        return col.to_numpy(np.float64, na_value=np.nan)
    return pd.to_numeric(col, errors="coerce").to_numpy(np.float64, na_value=np.nan)


def _size_key(ev: pd.DataFrame, op_cat: pd.Series, nin: np.ndarray, nout: np.ndarray) -> np.ndarray:
    """The number each rank must agree on for its op (NaN: unknown or not comparable);
    ``nin``/``nout``: ``numel_in``/``numel_out`` as floats (:func:`_floats`)."""
    scatter = _family_lookup(op_cat, SCATTER_LIKE)
    nosize = _family_lookup(op_cat, _NO_SIZE)
    size = np.where(scatter, nout, nin)
    size[nosize] = np.nan
    return size


def _shape_codes(ev: pd.DataFrame, op_cat: pd.Series) -> np.ndarray:
    """A code per distinct input shape for ops whose shapes must match across ranks (-1: unknown
    or not compared), as int64. One hash pass over the column (~0.2 s for 2M rows)."""
    if "in_shapes" not in ev.columns:
        return np.full(len(ev), -1, dtype=np.int64)
    codes = _factorize_shared(ev["in_shapes"].to_numpy(dtype=object)).astype(np.int64, copy=False)
    codes[~_family_lookup(op_cat, _SAME_SHAPE)] = -1
    return codes


def _factorize_shared(values: np.ndarray) -> np.ndarray:
    """``pd.factorize(values, use_na_sentinel=True)`` codes of an object array whose equal values are
    mostly one shared object (the loader makes each distinct shape tuple once per file or task, so
    2M rows hold a few hundred tuple objects at most).

    Why: factorizing 2M tuples of tuples hashes every row's tuple again (tuples do not cache their
    hash): ~0.1-0.2 s. Rows are grouped by object identity first (the object pointers read as
    integers: an int64 factorize), then one row per distinct object is factorized by value, so
    equal values held by different objects still share a code, in the same first-seen order."""
    values = np.ascontiguousarray(values, dtype=object)
    n = len(values)
    if n < 4096:
        return pd.factorize(values, use_na_sentinel=True)[0]
    import ctypes

    # the array's own buffer of PyObject pointers; ``values`` stays alive (and unchanged) meanwhile
    ptr = np.ctypeslib.as_array((ctypes.c_size_t * n).from_address(values.ctypes.data))  # a view: no copy
    by_id, ids = pd.factorize(ptr)
    first = np.full(len(ids), n, dtype=np.int64)
    np.minimum.at(first, by_id, np.arange(n, dtype=np.int64))  # increasing: ids come in first-seen order
    by_value = pd.factorize(values[first], use_na_sentinel=True)[0]
    return by_value[by_id]


def _local_size_violation(
    ev: pd.DataFrame, op_cat: pd.Series, g: np.ndarray, r: np.ndarray, nin: np.ndarray, nout: np.ndarray
) -> np.ndarray:
    """Within one rank: all_gather out != in x world, reduce_scatter in != out x world (world stated).
    Only the rows of those two families are looked at (the others are never bad)."""
    gather = _family_lookup(op_cat, GATHER_LIKE)
    scatter = _family_lookup(op_cat, SCATTER_LIKE)
    out = np.zeros(len(ev), dtype=bool)
    rows = np.flatnonzero(gather | scatter)
    if not len(rows):
        return out
    gather, scatter, nin, nout = gather[rows], scatter[rows], nin[rows], nout[rows]
    # the group size only where a record states it: the ranks that happen to be in the evidence
    # are not the group (three of four ranks' lines would make every all_gather look wrong)
    ws = _floats(ev["world_size"])[rows] if "world_size" in ev.columns else np.full(len(rows), np.nan)
    sizes = ~np.isnan(nin) & ~np.isnan(nout)
    known = sizes & ~np.isnan(ws) & (ws >= 1)  # a group of one too: its all_gather out = in
    with np.errstate(invalid="ignore", divide="ignore"):
        bad = (gather & known & (nout != nin * ws)) | (scatter & known & (nin != nout * ws))
        # world not stated: the ranks seen are only a lower bound, so the ratio must be a whole
        # number at least that large (3 of 4 ranks with out = 4 x in are fine)
        unknown = sizes & np.isnan(ws)
        if unknown.any():
            seen = pd.DataFrame({"g": g, "r": r}).drop_duplicates().groupby("g")["r"].size()  # every row's ranks
            lower = seen.reindex(g[rows]).to_numpy(np.float64)
            big, small = np.where(gather, nout, nin), np.where(gather, nin, nout)
            ratio = big / small
            off = (small > 0) & ((ratio != np.floor(ratio)) | (ratio < lower))
            bad |= unknown & off
    out[rows] = bad
    return out


def _max_per_group(g: np.ndarray, values: np.ndarray):
    """``pd.Series(values).groupby(g).max().items()`` (NaN skipped; NaN when a group has none);
    one group (a load of dumps) is one reduction, not a groupby over every row."""
    if len(g) and int(g.min()) == int(g.max()):
        return [(g[0], np.fmax.reduce(values))]
    return pd.Series(values).groupby(g).max().items()


def _tmin(rows: pd.DataFrame):
    if "t_wall" not in rows or rows["t_wall"].isna().all():
        return None
    return rows["t_wall"].min()
