"""Where each rank stopped: the per-rank state table that diagnosis compares ranks on.

Every source says something about where a rank stopped: Flight Recorder and tracer records
(its last collective issued and completed), watchdog lines (the collective it timed out in),
DETAIL fingerprints, NCCL COLL lines, tracebacks (the last collective call), the launcher (its
exit code or signal). :func:`rank_state` gathers them into one row per rank, so that "rank 3
stopped at all_reduce seq 11 while the others timed out in broadcast seq 12" is one comparison.

The group size is never guessed from the ranks that happen to be in the evidence: it comes from
explicit evidence (:func:`group_size`) or it is unknown. Ranks the group size says exist but
nothing speaks of are rows too (``present`` False): "known to exist, silent" is evidence.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..vocab import ErrorKind, SeqKind, State
from .align import KIND_PREFERENCE, MAX_LISTED_RANKS, code_flags
from .rules import VICTIM_KINDS, is_failure, own_failures

#: columns of the rank_state frame, in order (documented in README's data model)
COLUMNS = (
    "rank",
    "present",
    "sources",
    "last_op",
    "last_seq",
    "last_seq_kind",
    "last_pg",
    "last_state",
    "last_numel_in",
    "last_dtype",
    "last_in_shapes",
    "last_completed_seq",
    "timeout_op",
    "timeout_seq",
    "timeout_seq_kind",
    "call_op",
    "first_error_kind",
    "first_error_t",
    "first_error",
    "own_failure",
    "failed",
    "exit_code",
    "signal",
    "status",
)


@dataclass(frozen=True)
class GroupSize:
    """The size of the default group and the evidence it came from (``size`` None: unknown)."""

    size: int | None
    basis: str


def group_size(incident) -> GroupSize:
    """The world size from explicit evidence, most direct first; never from the ranks present."""
    ev = incident.events
    if len(ev) and "world_size" in ev.columns:
        ws = pd.to_numeric(ev["world_size"], errors="coerce").dropna()
        ws = ws[(ws > 0) & (ws < 1 << 24)]
        if len(ws):
            return GroupSize(int(ws.max()), "the collective records' group size (world_size / nranks / pg_config)")
    ranks = incident.ranks
    if len(ranks) and "world_size" in ranks.columns:
        ws = pd.to_numeric(ranks["world_size"], errors="coerce").dropna()
        ws = ws[(ws > 0) & (ws < 1 << 24)]
        if len(ws):
            return GroupSize(int(ws.max()), "a rank's own statement of the world size")
    er = incident.errors
    if len(er) and "expected_ranks" in er.columns:
        sizes = [len(v) for v in er["expected_ranks"].dropna() if isinstance(v, (tuple, list, set, frozenset))]
        if sizes:
            return GroupSize(max(sizes), "the Flight Recorder analyzer's expected ranks")
    ratio = _gather_ratio(ev)
    if ratio is not None:
        return GroupSize(ratio, "all_gather / reduce_scatter output over input size")
    src = incident.sources
    if len(src) and "format" in src.columns and (src["format"].astype(str) == "repro_manifest").any() and len(ranks):
        return GroupSize(int(ranks["rank"].dropna().nunique()), "the launcher's manifest")
    return GroupSize(None, "unknown: no evidence states the group size")


def _gather_ratio(ev: pd.DataFrame) -> int | None:
    """NumelOut / NumelIn of all_gather (NumelIn / NumelOut of reduce_scatter) when it is one integer."""
    if not len(ev) or "numel_in" not in ev.columns:
        return None
    from ..ops import GATHER_LIKE, SCATTER_LIKE

    op = ev["op"].astype(object)
    nin = pd.to_numeric(ev["numel_in"], errors="coerce")
    nout = pd.to_numeric(ev["numel_out"], errors="coerce")
    ok = nin.notna() & nout.notna() & (nin > 0) & (nout > 0)
    g = ok & op.isin(GATHER_LIKE)
    s = ok & op.isin(SCATTER_LIKE)
    ratios = pd.concat([nout[g] / nin[g], nin[s] / nout[s]])
    ratios = ratios[(ratios >= 2) & (ratios == np.floor(ratios))]
    if ratios.empty or ratios.nunique() != 1:
        return None
    return int(ratios.iloc[0])


def rank_state(incident, size: GroupSize | None = None) -> pd.DataFrame:
    """One row per rank (present in the evidence, or known to exist by the group size)."""
    size = size or group_size(incident)
    ev, er, rk = incident.events, incident.errors, incident.ranks
    ranks: set[int] = set()
    for frame in (ev, er, rk, incident.progress):
        if len(frame) and "rank" in frame.columns:
            col = frame["rank"]
            if frame is er and "kind" in er.columns:  # a file that could not be read shows no rank
                col = col[er["kind"].astype(object) != ErrorKind.LOAD_ERROR]
            ranks.update(int(r) for r in col.dropna().unique())
    present = set(ranks)
    if size.size is not None and size.size <= MAX_LISTED_RANKS:
        ranks.update(range(size.size))
    rows = {r: {"rank": r, "present": r in present, "sources": ()} for r in sorted(ranks)}
    _fill_sources(rows, ev, er)
    _fill_last_collective(rows, ev)
    _fill_errors(rows, er)
    _fill_exits(rows, rk)
    for row in rows.values():
        row["status"] = _status(row)
    out = pd.DataFrame([{c: row.get(c) for c in COLUMNS} for row in rows.values()], columns=list(COLUMNS))
    for c in ("rank", "last_seq", "last_completed_seq", "timeout_seq", "last_numel_in", "exit_code"):
        # straight to Int64: through float64 (to_numeric of a column with gaps) a 2**60 is inexact
        out[c] = pd.array([_int64(v) for v in out[c].tolist()], dtype="Int64")
    out["first_error_t"] = pd.to_datetime(out["first_error_t"], utc=True, errors="coerce")
    for c in ("present", "own_failure", "failed"):
        out[c] = out[c].fillna(False).astype(bool)
    return out


def _fill_sources(rows: dict, ev: pd.DataFrame, er: pd.DataFrame) -> None:
    """Which readers speak of each rank (distinct (rank, source) pairs: no per-row Python work)."""
    seen: dict[int, set] = {}
    for frame in (ev, er):
        if not len(frame) or "source" not in frame.columns:
            continue
        # distinct (rank, source) as one int64 per row, counted in a table (small ranks) or hashed:
        # no 2M-row object frame
        rank = frame["rank"].to_numpy("int64", na_value=-1)  # -1 only where missing (masked below)
        src = frame["source"]
        if isinstance(src.dtype, pd.CategoricalDtype):  # its codes (-1: missing), no hash pass
            scode, suniq = src.cat.codes.to_numpy().astype(np.int64), np.asarray(src.cat.categories, dtype=object)
        else:
            scode, suniq = pd.factorize(src, use_na_sentinel=True)
        ok = frame["rank"].notna().to_numpy(bool) & (scode >= 0)
        if not ok.any():
            continue
        pick = slice(None) if ok.all() else ok  # no copy when every row has both
        rank, scode = rank[pick], scode[pick]
        width = len(suniq)
        lo, hi = int(rank.min()), int(rank.max())
        if lo >= 0 and (hi + 1) * width <= 2 * len(rank) + (1 << 16):  # a (rank, source) table
            pairs = np.flatnonzero(np.bincount(rank * width + scode))
            ranks = pairs // width
        else:
            rc, ru = pd.factorize(rank)
            pairs = pd.unique(rc.astype(np.int64) * width + scode)
            ranks = np.asarray(ru)[pairs // width]
        for r, k in zip(ranks.tolist(), (pairs % width).tolist()):
            seen.setdefault(int(r), set()).add(str(suniq[k]))
    for r, src in seen.items():
        if r in rows:
            rows[r]["sources"] = tuple(sorted(src))


def _fill_last_collective(rows: dict, ev: pd.DataFrame) -> None:
    """The last collective each rank issued, in its most precise counter (trace > fr > detail > work)
    and, within it, its most populous group. Vectorised: numpy reductions, no sort of the rows,
    no per-rank frame slicing
    (a 1024-rank Flight Recorder incident has 2M rows)."""
    if not len(ev):
        return
    pref_all = _lookup(ev["seq_kind"], KIND_PREFERENCE, -1)
    mask = ev["rank"].notna().to_numpy(bool) & ev["seq"].notna().to_numpy(bool) & (pref_all >= 0)
    if not mask.any():
        return
    idx = np.flatnonzero(mask)  # positions in ev (no copy of a 2M-row frame)
    # every row counts (a load of dumps): the columns as they are, not gathered through ``idx``
    # (a 2M-row gather is ~10 ms each, and there are seven)
    pick = slice(None) if len(idx) == len(ev) else idx
    rank = ev["rank"].to_numpy("int64", na_value=-1)[pick]
    seq = ev["seq"].to_numpy("int64", na_value=-1)[pick]
    pref = pref_all[pick]
    pg_codes = _codes(ev["pg"])[pick]
    group = pg_codes * (len(KIND_PREFERENCE) + 1) + pref
    ranks_u, slot = _rank_slots(rank)  # ranks ascending; each row's rank index
    pgsize = _distinct_per_group(group, slot, len(ranks_u))
    done = _lookup(ev["state"], {State.COMPLETED: True}, False, bool)[pick]
    bad = _lookup(ev["state"], {State.TIMED_OUT: True, State.FAILED: True}, False, bool)[pick]
    is_trace = _lookup(ev["seq_kind"], {SeqKind.TRACE: True}, False, bool)[pick]
    # the best (counter, group) per rank, then its last seq: numpy reductions per rank
    best_pos = _best_rows(slot, len(ranks_u), pref, pgsize, seq)  # one row per rank, ranks ascending
    comp_max = np.full(len(ranks_u), -1, dtype=np.int64)
    sel = done if _constant(group) else done & (group == group[best_pos][slot])  # rows of the best group
    if sel.all():  # (every row: no copies of the columns through the mask)
        np.maximum.at(comp_max, slot, seq)
    else:
        np.maximum.at(comp_max, slot[sel], seq[sel])
    failed = np.zeros(len(ranks_u), dtype=bool)
    failed[slot[bad]] = True  # any bad row of the rank (an assignment: logical_or.at is ~40x slower)
    # a tracer record whose last collective never returned (no completed row at its last seq)
    is_tr = is_trace
    stuck = set()
    if is_tr.any():
        tr_last = np.full(len(ranks_u), np.iinfo(np.int64).min, dtype=np.int64)
        np.maximum.at(tr_last, slot[is_tr], seq[is_tr])
        at_last = is_tr & (seq == tr_last[slot])
        ok = np.zeros(len(ranks_u), dtype=bool)
        ok[slot[at_last & done]] = True
        has_tr = np.zeros(len(ranks_u), dtype=bool)
        has_tr[slot[is_tr]] = True
        stuck = {int(ranks_u[k]) for k in np.flatnonzero(has_tr & ~ok)}
    completed = {int(r): int(c) for r, c in zip(ranks_u, comp_max) if c >= 0}
    failed_ranks = {int(r) for r, f in zip(ranks_u, failed) if f}
    at = idx[best_pos]  # the best row of each rank, as positions in ev
    cols = {
        c: ev[c].iloc[at].to_numpy(object) if c in ev.columns else np.full(len(at), None, dtype=object)
        for c in ("op", "seq_kind", "pg", "state", "numel_in", "dtype", "in_shapes")
    }
    for k, (r, pos) in enumerate(zip(ranks_u, best_pos)):
        r = int(r)
        if r not in rows:
            continue
        if r in failed_ranks or r in stuck:
            rows[r]["failed"] = True  # a collective that timed out, failed, or never returned
        rows[r].update(
            last_op=_str(cols["op"][k]),
            last_seq=int(seq[pos]),
            last_seq_kind=_str(cols["seq_kind"][k]),
            last_pg=_str(cols["pg"][k]),
            last_state=_str(cols["state"][k]),
            last_numel_in=_int(cols["numel_in"][k]),
            last_dtype=_str(cols["dtype"][k]),
            last_in_shapes=cols["in_shapes"][k],
            last_completed_seq=completed.get(r),
        )


def _codes(col: pd.Series) -> np.ndarray:
    """One int64 code per distinct value of ``col``, missing values one code of their own (only
    equality of codes is used): a categorical's own codes, else a hash factorize."""
    if isinstance(col.dtype, pd.CategoricalDtype):
        return col.cat.codes.to_numpy(np.int64)
    return pd.factorize(col, use_na_sentinel=False)[0].astype("int64")


def _constant(a: np.ndarray) -> bool:
    """One value in every row (two passes; a gather and a compare over 2M rows cost more)."""
    return not len(a) or int(a.min()) == int(a.max())


def _rank_slots(rank: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct ranks ascending and each row's index among them: a table over the rank
    numbers when they are small non-negative ints (no hashing of 2M rows; when every rank from 0
    up is there, each rank is its own index), else a hash factorize and a sort of the few distinct
    ranks, not a sort of every row."""
    if len(rank) and rank.min() >= 0 and rank.max() < 4 * len(rank) + (1 << 16):
        seen = np.bincount(rank) > 0
        if seen.all():
            return np.arange(len(seen), dtype=rank.dtype), rank
        return np.flatnonzero(seen).astype(rank.dtype), (np.cumsum(seen) - 1)[rank]
    codes, uniq = pd.factorize(rank)
    perm = np.argsort(uniq, kind="stable")
    where = np.empty(len(perm), dtype=np.int64)
    where[perm] = np.arange(len(perm))
    return np.asarray(uniq)[perm], where[codes]


def _best_rows(slot: np.ndarray, k: int, pref: np.ndarray, pgsize: np.ndarray, seq: np.ndarray) -> np.ndarray:
    """Per rank (``slot`` 0..k-1) the row that ``np.lexsort((-seq, -pgsize, pref, rank))`` puts
    first: lowest ``pref``, then largest ``pgsize``, then largest ``seq``, then the earliest row.
    Up to four unbuffered reductions over the rows instead of a four-key sort (~0.6 s on 2M rows);
    a key on which every row ties (one counter, one group) takes none."""
    keep = None  # None: every row still in the running (no mask, no copies through it)
    for values, ufunc, fill in (
        (pref, np.minimum, np.iinfo(np.int64).max),
        (pgsize, np.maximum, np.iinfo(np.int64).min),
        (seq, np.maximum, np.iinfo(np.int64).min),
    ):
        if keep is None and _constant(values):  # every row ties on this key
            continue
        best = np.full(k, fill, dtype=np.int64)
        if keep is None:
            ufunc.at(best, slot, values)
            keep = values == best[slot]
        else:
            ufunc.at(best, slot[keep], values[keep])
            keep &= values == best[slot]
    pos = np.arange(len(slot)) if keep is None else np.flatnonzero(keep)
    first = np.full(k, len(slot), dtype=np.int64)
    np.minimum.at(first, slot if keep is None else slot[pos], pos)
    return first


def _distinct_per_group(group: np.ndarray, slot: np.ndarray, k: int) -> np.ndarray:
    """Per row, how many distinct ranks (``slot`` 0..k-1) its group holds, as
    ``groupby(group).transform("nunique")`` of the ranks: a table of seen (group, rank) cells when
    the groups are small non-negative codes (no hashing of 2M rows), else a hash unique of pairs."""
    k = max(k, 1)
    if _constant(group):  # one group: every row's count is the number of ranks with rows
        return np.full(len(group), np.count_nonzero(np.bincount(slot, minlength=k)), dtype="int64")
    if len(group) and group.min() >= 0 and (int(group.max()) + 1) * k <= 1 << 25:
        seen = np.zeros((int(group.max()) + 1) * k, dtype=bool)
        seen[group * k + slot] = True
        return seen.reshape(-1, k).sum(axis=1).astype("int64")[group]
    gi, gu = pd.factorize(group)
    pairs = pd.unique(gi.astype(np.int64) * k + slot)
    return np.bincount(pairs // k, minlength=len(gu)).astype("int64")[gi]


def _lookup(col: pd.Series, table: dict, default, dtype=np.int64) -> np.ndarray:
    """``table[value]`` per row as ``dtype`` (``default`` for other values and missing ones), through
    the categories when the column is categorical (one lookup per distinct value, not per row)."""
    if isinstance(col.dtype, pd.CategoricalDtype):
        lut = np.array([table.get(str(c), default) for c in col.cat.categories] + [default], dtype=dtype)
        codes = col.cat.codes.to_numpy()
        return code_flags(codes, lut) if lut.dtype == bool else lut[codes]
    codes, uniques = pd.factorize(col, use_na_sentinel=True)
    lut = np.array([table.get(str(u), default) for u in uniques] + [default], dtype=dtype)
    return lut[codes]


def _fill_errors(rows: dict, er: pd.DataFrame) -> None:
    """Failures per rank; the first error is its earliest own failure, else its earliest failure."""
    if not len(er):
        return
    e = er[er["rank"].notna()]
    far = pd.Timestamp.max.tz_localize("UTC")
    firsts: dict[int, tuple] = {}
    for r, k, m, t, op, seq, sk, own in zip(
        e["rank"].astype(int),
        e["kind"].astype(str),
        e["message"],
        e["t_wall"],
        e["op"].astype(object),
        e["seq"],
        e["seq_kind"].astype(object),
        own_failures(e),
    ):
        msg = None if pd.isna(m) else str(m)
        if r not in rows or not is_failure(k, msg):
            continue
        row = rows[r]
        row["failed"] = True
        row["own_failure"] = bool(row.get("own_failure")) or own
        cand = (not own, far if pd.isna(t) else t, k, (msg or "")[:300], None if pd.isna(t) else t)
        if r not in firsts or cand[:2] < firsts[r][:2]:
            firsts[r] = cand
        if k in VICTIM_KINDS and pd.notna(seq) and row.get("timeout_seq") is None:
            row.update(timeout_op=_str(op), timeout_seq=int(seq), timeout_seq_kind=_str(sk))
        if k == ErrorKind.EXCEPTION and _str(op) and not row.get("call_op"):
            row["call_op"] = _str(op)
    for r, (_, _, k, msg, t) in firsts.items():
        rows[r].update(first_error_kind=k, first_error=msg, first_error_t=t)


def _fill_exits(rows: dict, rk: pd.DataFrame) -> None:
    if not len(rk):
        return
    for r, code, sg in zip(rk["rank"], rk["exit_code"], rk["signal"].astype(object)):
        if pd.isna(r) or int(r) not in rows:
            continue
        row = rows[int(r)]
        if pd.notna(code) and row.get("exit_code") is None:
            row["exit_code"] = int(code)
        if sg is not None and sg == sg and not row.get("signal"):
            row["signal"] = str(sg)
        if (row.get("exit_code") not in (None, 0)) or row.get("signal"):
            row["failed"] = True


def _status(row: dict) -> str:
    """One word for how the rank ended, as far as the evidence tells."""
    if not row["present"]:
        return "absent"
    if row.get("own_failure"):
        return "failed"
    k = row.get("first_error_kind")
    if k in VICTIM_KINDS:
        return (
            "timed-out"
            if "timeout" in k or k in (ErrorKind.HEARTBEAT, ErrorKind.WATCHDOG_STATUS, ErrorKind.WATCHDOG_ABORT)
            else "peer-gone"
        )
    if row.get("failed"):
        return "error"
    if row.get("exit_code") == 0:
        return "exited"
    return "running" if row.get("last_seq") is not None else "unknown"


def _str(v):
    return None if v is None or (not isinstance(v, str) and pd.isna(v)) else str(v)


def _int64(v):
    """``v`` as an int that fits Int64, else None (a counter read through float64 may round past it)."""
    v = _int(v)
    return v if v is not None and -(2**63) <= v < 2**63 else None


def _int(v):
    try:
        return None if v is None or pd.isna(v) else int(v)
    except (TypeError, ValueError, OverflowError):
        return None


# --- positions: the last place each rank reached on every counter ---------------------------------

#: columns of the positions frame (one row per rank and counter)
POSITION_COLUMNS = (
    "rank",
    "pg",
    "counter",
    "position",
    "op",
    "completed",
    "stuck_places",
    "source",
    "file",
    "line",
    "t_wall",
)
#: counters compared by position: per-group collective counters (NCCL's opCount may stay 0 and is
#: per launch, desync's is per rank across groups: neither is a position)
POSITION_KINDS = (SeqKind.TRACE, SeqKind.FR, SeqKind.DETAIL, SeqKind.WORK, SeqKind.NCCL_POSITION)


def positions(incident) -> pd.DataFrame:
    """Where each rank got to, per (process group, counter), from every source that says so.

    ``position`` is the highest seq the rank's records reach on that counter (an issued or a
    timed-out collective, a progress counter's last enqueued one); ``completed`` says whether its
    record of that very collective says it completed; ``stuck_places`` how many different seqs of
    the counter the rank says it timed out or failed in. Sources: collective records (trace, Flight
    Recorder, DETAIL fingerprints, watchdog ``WorkNCCL`` lines, NCCL COLL lines), watchdog errors
    (the SeqNum a rank timed out in) and progress counters of a counter no collective record shows.
    A rank no record of a counter speaks of
    has no row for it: silence is not a position. Vectorised (codes and numpy reductions): a
    1024-rank Flight Recorder incident has millions of rows.
    """
    events = _event_positions(incident.events)
    # progress counters only for counters no collective record shows: Flight Recorder's pg_status and
    # the tracer's progress repeat their records, and DETAIL's helper group counts unevenly there
    shown = {k for k in events["counter"][1] if k} if events is not None else set()
    parts = [
        p
        for p in (events, _error_positions(incident.errors), _progress_positions(incident.progress, shown))
        if p is not None
    ]
    if not parts:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in POSITION_COLUMNS})
    rank = np.concatenate([p["rank"] for p in parts])
    seq = np.concatenate([p["seq"] for p in parts])
    done = np.concatenate([p["done"] for p in parts])
    stuck = np.concatenate([p["stuck"] for p in parts])
    # (pg, counter) as codes over the parts' labels; a key per (rank, pg, counter) by arithmetic
    pg_u = list(dict.fromkeys(x for p in parts for x in p["pg"][1]))
    k_u = list(dict.fromkeys(x for p in parts for x in p["counter"][1]))
    pg_code = np.concatenate(
        [np.array([pg_u.index(x) for x in p["pg"][1]] + [0], dtype=np.int64)[p["pg"][0]] for p in parts]
    )
    k_code = np.concatenate(
        [np.array([k_u.index(x) for x in p["counter"][1]] + [0], dtype=np.int64)[p["counter"][0]] for p in parts]
    )
    raw = (rank * max(len(pg_u), 1) + pg_code) * max(len(k_u), 1) + k_code
    _, key = np.unique(raw, return_inverse=True)
    key = key.astype(np.int64)
    n_keys = int(key.max()) + 1
    # the furthest position per key; completed when any record of that very seq says so
    order = np.lexsort((seq, key))
    last_at = order[np.r_[key[order][1:] != key[order][:-1], True]]  # the last row of each key, keys ascending
    top = np.full(n_keys, np.iinfo(np.int64).min, dtype=np.int64)
    top[key[last_at]] = seq[last_at]
    at_top = seq == top[key]
    comp = np.zeros(n_keys, dtype=bool)
    comp[key[at_top & done]] = True
    places = np.zeros(n_keys, dtype=np.int64)
    if stuck.any():
        pairs = np.unique(np.stack([key[stuck], seq[stuck]]), axis=1)
        places = np.bincount(pairs[0], minlength=n_keys).astype(np.int64)
    # the describing columns of the chosen rows only, read once per part
    bounds = np.cumsum([0] + [len(p["rank"]) for p in parts])
    rows = []
    for i, part in enumerate(parts):
        mine = last_at[(last_at >= bounds[i]) & (last_at < bounds[i + 1])]
        if not len(mine):
            continue
        desc = part["describe"](mine - bounds[i])
        for n, pos in enumerate(mine):
            k = int(key[pos])
            rows.append(
                {
                    "rank": int(rank[pos]),
                    "pg": _str(pg_u[pg_code[pos]]),
                    "counter": str(k_u[k_code[pos]]),
                    "position": int(seq[pos]),
                    "op": _str(desc["op"][n]),
                    "completed": bool(comp[k]),
                    "stuck_places": int(places[k]),
                    "source": _str(desc["source"][n]),
                    "file": _str(desc["file"][n]),
                    "line": _int(desc["line"][n]),
                    "t_wall": desc["t_wall"][n],
                }
            )
    out = pd.DataFrame(rows, columns=list(POSITION_COLUMNS))
    out["pg"] = out["pg"].astype(object).where(out["pg"].notna(), None)  # no group named: None, not NaN
    return out.sort_values(["rank", "counter"], kind="stable").reset_index(drop=True)


def _labels(frame: pd.DataFrame, col: str, idx: np.ndarray) -> tuple[np.ndarray, list]:
    """(codes, labels) of ``frame[col]`` at ``idx``; a missing value's code points one past the labels
    (read as None), so a categorical column costs no per-row Python work."""
    if col not in frame.columns:
        return np.full(len(idx), 0, dtype=np.int64), [None]
    c = frame[col]
    if isinstance(c.dtype, pd.CategoricalDtype):
        codes = c.cat.codes.to_numpy()[idx].astype(np.int64)
        labels = [str(x) for x in c.cat.categories] + [None]
        codes[codes < 0] = len(labels) - 1
        return codes, labels
    codes, uniq = pd.factorize(c.iloc[idx].astype(object), use_na_sentinel=True)
    labels = [None if x is None or (isinstance(x, float) and x != x) else str(x) for x in uniq] + [None]
    codes = codes.astype(np.int64)
    codes[codes < 0] = len(labels) - 1
    return codes, labels


def _describer(frame: pd.DataFrame, idx: np.ndarray):
    """A function of positions within ``idx`` -> the describing columns of those rows."""

    def describe(sel: np.ndarray) -> dict:
        rows = idx[sel]
        return {c: _arr(frame, c, rows) for c in ("op", "source", "file", "line", "t_wall")}

    return describe


def _arr(frame: pd.DataFrame, col: str, idx: np.ndarray) -> np.ndarray:
    """``frame[col]`` at the positions ``idx`` as an object array (Nones where the column is absent)."""
    if col not in frame.columns:
        return np.full(len(idx), None, dtype=object)
    return frame[col].iloc[idx].to_numpy(object)


def _event_positions(ev: pd.DataFrame) -> dict | None:
    if ev is None or not len(ev) or not {"rank", "seq", "seq_kind"} <= set(ev.columns):
        return None
    kinds = _lookup(ev["seq_kind"], {str(k): True for k in POSITION_KINDS}, False, bool)
    idx = np.flatnonzero(kinds & ev["rank"].notna().to_numpy(bool) & ev["seq"].notna().to_numpy(bool))
    if not len(idx):
        return None
    state = ev["state"] if "state" in ev.columns else pd.Series(None, index=ev.index, dtype=object)
    return {
        "rank": ev["rank"].to_numpy("int64", na_value=-1)[idx],
        "seq": ev["seq"].to_numpy("int64", na_value=-1)[idx],
        "done": _lookup(state, {State.COMPLETED: True}, False, bool)[idx],
        "stuck": _lookup(state, {State.TIMED_OUT: True, State.FAILED: True}, False, bool)[idx],
        "pg": _labels(ev, "pg", idx),
        "counter": _labels(ev, "seq_kind", idx),
        "describe": _describer(ev, idx),
    }


def _error_positions(er: pd.DataFrame) -> dict | None:
    if er is None or not len(er) or "seq" not in er.columns:
        return None
    ok = (
        er["kind"].astype(str).isin([str(k) for k in VICTIM_KINDS])
        & er["rank"].notna()
        & er["seq"].notna()
        & er["seq_kind"].astype(object).isin([str(k) for k in POSITION_KINDS])
    )
    idx = np.flatnonzero(ok.to_numpy(bool))
    if not len(idx):
        return None
    return {
        "rank": er["rank"].to_numpy("int64", na_value=-1)[idx],
        "seq": er["seq"].to_numpy("int64", na_value=-1)[idx],
        "done": np.zeros(len(idx), dtype=bool),
        "stuck": np.ones(len(idx), dtype=bool),
        "pg": _labels(er, "pg", idx),
        "counter": _labels(er, "seq_kind", idx),
        "describe": _describer(er, idx),
    }


def _progress_positions(pr: pd.DataFrame, shown: set) -> dict | None:
    if pr is None or not len(pr) or "last_enqueued" not in pr.columns:
        return None
    last = pd.to_numeric(pr["last_enqueued"], errors="coerce")
    kind = pr["seq_kind"].astype(object) if "seq_kind" in pr.columns else pd.Series(None, index=pr.index, dtype=object)
    idx = np.flatnonzero((pr["rank"].notna() & last.notna() & ~kind.isin([k for k in shown if k])).to_numpy(bool))
    if not len(idx):
        return None
    comp = pd.to_numeric(pr["last_completed"], errors="coerce") if "last_completed" in pr.columns else None
    return {
        "rank": pr["rank"].to_numpy("int64", na_value=-1)[idx],
        "seq": last.to_numpy("int64", na_value=-1)[idx],
        "done": np.zeros(len(idx), dtype=bool) if comp is None else (comp >= last).fillna(False).to_numpy(bool)[idx],
        "stuck": np.zeros(len(idx), dtype=bool),
        "pg": _labels(pr, "pg", idx),
        "counter": _labels(pr, "seq_kind", idx),
        "describe": _describer(pr, idx),
    }
