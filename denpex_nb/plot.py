"""Pictures of an incident: swimlanes, the shapes at the divergence, who is behind.

Every function returns a matplotlib :class:`~matplotlib.figure.Figure` (or a pandas ``Styler``)
built without pyplot: no global state, no ``plt.show``, safe under the Agg backend, in threads and
in papermill. The figures display themselves in Jupyter (``_repr_png_``), so a notebook cell that
ends in ``dx.plot.swimlane(incident, diagnosis)`` shows the picture, and reports and tests get the
very same Figure.

Which sequence counter to draw (``seq_kind``) matters: counters from different sources are not
comparable (see :mod:`denpex_nb.incident`). :func:`choose_seq_kind` takes the diagnosis' counter if
it has one, else the most complete one (trace > fr > work > detail > ...); callers may pick.
"""

from __future__ import annotations

import io
from dataclasses import dataclass

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from .incident import OPS
from .vocab import SEQ_KIND_PREFERENCE as _SEQ_KIND_PREFERENCE
from .vocab import TIMEOUT_KINDS, ErrorKind, SeqKind, State

#: preference order of sequence counters when the caller does not choose
SEQ_KIND_PREFERENCE = tuple(str(k) for k in _SEQ_KIND_PREFERENCE)  # the one order (denpex_nb.vocab)
#: above this many ranks the swimlane becomes a heatmap (one pixel row per rank)
HEATMAP_THRESHOLD = 64
#: below this many marks per lane, shapes are written next to every mark
ANNOTATE_MAX_SEQS = 24
ANNOTATE_MAX_RANKS = 16

DIVERGE_COLOR = "#d62728"
CULPRIT_COLOR = "#b00000"
MISSING_COLOR = "#bbbbbb"


def _op_colors() -> dict[str, tuple]:
    from matplotlib import colormaps

    cmap = colormaps["tab20"]
    # the common ops get the most distinct colours
    order = [
        "all_reduce",
        "all_gather",
        "broadcast",
        "reduce_scatter",
        "barrier",
        "all_gather_into_tensor",
        "reduce_scatter_tensor",
        "all_to_all",
        "all_to_all_single",
        "send",
        "recv",
        "reduce",
        "gather",
        "scatter",
        "all_reduce_coalesced",
        "all_gather_coalesced",
        "coalesced",
        "recv_anysource",
        "all_reduce_sparse",
        "unknown",
    ]
    order += [o for o in OPS if o not in order]
    picks = [0, 2, 4, 6, 8, 1, 3, 5, 7, 9, 10, 12, 14, 16, 18, 11, 13, 15, 17, 19]
    return {op: cmap(picks[i % len(picks)]) for i, op in enumerate(order)}


OP_COLORS = _op_colors()


class DenpexFigure(Figure):
    """A Figure that shows itself in Jupyter whatever the backend (``_repr_png_``)."""

    def _repr_png_(self):
        return to_png(self)


def to_png(fig: Figure, dpi: int | None = None) -> bytes:
    """Render a Figure to PNG bytes with the Agg canvas (no pyplot, no display needed)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    if fig.canvas is None or not isinstance(fig.canvas, FigureCanvasAgg):
        FigureCanvasAgg(fig)
    buf = io.BytesIO()
    # constrained layout already fits labels and outside legends; "tight" would cost another draw
    fig.savefig(buf, format="png", dpi=dpi or fig.dpi)
    return buf.getvalue()


def _new_figure(w: float, h: float) -> DenpexFigure:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    fig = DenpexFigure(figsize=(w, h), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


# --- choosing what to draw -------------------------------------------------------------------


def choose_seq_kind(incident, diagnosis=None, prefer: str | None = None) -> str | None:
    """The sequence counter to align on: ``prefer`` if present, the diagnosis' one, else the best."""
    ev = incident.events
    if ev.empty:
        return prefer
    present = set(ev["seq_kind"].dropna().astype(str).unique())
    if prefer:
        return prefer
    first = getattr(diagnosis, "first", None) if diagnosis is not None else None
    if first is not None and first.seq_kind and first.seq_kind in present:
        return first.seq_kind
    for kind in SEQ_KIND_PREFERENCE:
        if kind in present:
            return kind
    return sorted(present)[0] if present else None


def choose_pg(incident, seq_kind: str | None, diagnosis=None, prefer: str | None = None) -> str | None:
    """The process group to draw: the caller's, the diagnosis', else the one with most events."""
    ev = incident.events
    if prefer is not None:
        return str(prefer)
    if ev.empty:
        return None
    sub = ev[ev["seq_kind"].astype("object") == seq_kind] if seq_kind else ev
    pgs = sub["pg"].dropna().astype(str)
    first = getattr(diagnosis, "first", None) if diagnosis is not None else None
    if first is not None and first.pg is not None and str(first.pg) in set(pgs):
        return str(first.pg)
    if pgs.empty:
        return None
    return pgs.value_counts().index[0]


_STATE_RANK = {"scheduled": 0, "started": 1, "completed": 2, "timed_out": 3, "failed": 4}


@dataclass
class Lanes:
    """The events of one (pg, seq_kind) reduced to one row per (rank, seq): what a lane shows."""

    frame: pd.DataFrame  # rank, seq, op, in_shapes, out_shapes, dtype, state, t_wall, t_mono, sig
    ranks: list[int]
    seqs: np.ndarray
    seq_kind: str | None
    pg: str | None


def lanes(incident, seq_kind: str | None = None, pg: str | None = None, diagnosis=None) -> Lanes:
    """One row per (rank, seq) of the chosen counter and process group: the most advanced state."""
    kind = choose_seq_kind(incident, diagnosis, seq_kind)
    group = choose_pg(incident, kind, diagnosis, pg)
    ev = incident.events
    ranks_all = _all_ranks(incident)
    if ev.empty or kind is None:
        return Lanes(_empty_lane_frame(), ranks_all, np.array([], dtype=np.int64), kind, group)
    mask = (ev["seq_kind"].astype("object") == kind) & ev["seq"].notna() & ev["rank"].notna()
    if group is not None:
        mask &= ev["pg"].astype("object").astype(str) == group
    cols = ["rank", "seq", "op", "in_shapes", "out_shapes", "dtype", "state", "t_wall", "t_mono", "numel_in"]
    sub = ev.loc[mask, cols].copy()
    sub["rank"] = sub["rank"].astype("int64")
    sub["seq"] = sub["seq"].astype("int64")
    sub["op"] = sub["op"].astype("object")
    sub["state"] = sub["state"].astype("object")
    sub["_st"] = sub["state"].map(_STATE_RANK).fillna(-1)
    # keep the most informative row: highest state, then one that has shapes
    sub["_has_shape"] = sub["in_shapes"].notna()  # elementwise on the object column: tuples are never NA
    sub = sub.sort_values(["rank", "seq", "_st", "_has_shape"], kind="stable")
    # shapes may sit on an earlier row (trace "issue" has them, "done" does not): carry them over
    first_shape = sub[sub["_has_shape"]].groupby(["rank", "seq"], sort=False)[["in_shapes", "out_shapes"]].last()
    sub = sub.drop_duplicates(["rank", "seq"], keep="last").set_index(["rank", "seq"])
    if len(first_shape):
        missing = ~sub["_has_shape"]
        idx = sub.index[missing].intersection(first_shape.index)
        if len(idx):
            sub.loc[idx, "in_shapes"] = first_shape.loc[idx, "in_shapes"]
            sub.loc[idx, "out_shapes"] = first_shape.loc[idx, "out_shapes"]
    sub = sub.reset_index().drop(columns=["_st", "_has_shape"])
    sub["label"] = _labels(sub["in_shapes"], sub["numel_in"])
    sub["sig"] = _joined(sub["op"].astype(str), sub["label"], sub["dtype"].astype("object").astype(str))
    ranks = sorted(set(ranks_all) | set(sub["rank"].unique().tolist()))
    seqs = np.sort(sub["seq"].unique())
    return Lanes(sub, ranks, seqs, kind, group)


def _empty_lane_frame() -> pd.DataFrame:
    return pd.DataFrame(
        {
            c: []
            for c in [
                "rank",
                "seq",
                "op",
                "in_shapes",
                "out_shapes",
                "dtype",
                "state",
                "t_wall",
                "t_mono",
                "numel_in",
                "label",
                "sig",
            ]
        }
    )


def _isnan(v) -> bool:
    try:
        return bool(pd.isna(v)) if not isinstance(v, (tuple, list)) else False
    except (TypeError, ValueError):
        return False


def _all_ranks(incident) -> list[int]:
    try:
        return list(incident.ranks_seen)
    except Exception:  # noqa: BLE001 - a partial Incident still plots
        return []


def shape_label(shapes) -> str:
    """``((5, 4),)`` -> ``"[5,4]"``; several tensors are joined with ``;``; unknown -> ``"?"``."""
    if shapes is None or _isnan(shapes):
        return "?"
    try:
        parts = ["[" + ",".join(str(int(d)) for d in s) + "]" for s in shapes]
    except TypeError:
        return str(shapes)
    if len(parts) > 3:
        return ";".join(parts[:2]) + f";…({len(parts)})"
    return ";".join(parts) if parts else "[]"


def entry_label(shapes, numel=None) -> str:
    """The shape label, or ``numel=N`` when only the element count is known (watchdog lines)."""
    lab = shape_label(shapes)
    if lab == "?" and numel is not None and not _isnan(numel):
        return f"numel={int(numel)}"
    return lab


def _joined(*cols: pd.Series) -> np.ndarray:
    """``" ".join`` of the columns, row by row, built once per distinct combination (1M rows, a
    few dozen combinations: string concatenation per row cost seconds)."""
    combined = np.zeros(len(cols[0]), dtype=np.int64)
    for c in cols:
        codes, uniq = pd.factorize(c)
        combined = combined * (len(uniq) + 1) + (codes + 1)
    keys, first, inverse = np.unique(combined, return_index=True, return_inverse=True)
    names = np.array([" ".join(str(c.iloc[i]) for c in cols) for i in first], dtype=object)
    return names[inverse.reshape(-1)] if len(keys) else np.array([], dtype=object)


def _labels(shapes: pd.Series, numel: pd.Series) -> list[str]:
    """entry_label for every row, computed once per distinct shape (100k rows, a few shapes)."""
    if len(shapes) > 10_000:  # many rows: label each distinct shape once, by codes
        try:
            codes, uniq = pd.factorize(shapes.to_numpy(dtype=object), use_na_sentinel=True)
        except TypeError:  # an unhashable shape (a list): the row-by-row path below
            codes = None
    else:
        codes = None
    if codes is not None:
        names = np.array([shape_label(u) for u in uniq] + [""], dtype=object)
        out = names[codes]
        unknown = np.nonzero(codes < 0)[0]
        if len(unknown):
            nv = numel.to_numpy(dtype=object)
            out[unknown] = [entry_label(None, nv[i]) for i in unknown]
        return out.tolist()
    cache: dict = {}
    out = []
    for shp, n in zip(shapes.tolist(), numel.tolist()):
        key = shp if isinstance(shp, tuple) else None
        if key is None:
            out.append(entry_label(shp, n))
            continue
        lab = cache.get(key)
        if lab is None:
            lab = cache[key] = shape_label(key)
        out.append(lab)
    return out


def diagnosis_of(incident, diagnosis=None):
    """The Diagnosis a picture draws: the one given, else the incident's own (``denpex_nb.diagnose``)."""
    if diagnosis is not None:
        return diagnosis
    from .analysis import diagnose

    return diagnose(incident)


def divergence(lanes_: Lanes, diagnosis=None) -> tuple[int | None, list[int]]:
    """(seq, culprit ranks) of the first finding of ``diagnosis`` that lies in these lanes' counter
    and process group; ``(None, [])`` without one. Pictures draw what the Diagnosis says: they
    never decide a divergence or a culprit themselves, so a picture cannot disagree with the verdict."""
    for f in getattr(diagnosis, "findings", None) or []:
        if f.seq is None or f.seq_kind not in (None, lanes_.seq_kind):
            continue
        if f.pg is not None and lanes_.pg is not None and str(f.pg) != str(lanes_.pg):
            continue
        return int(f.seq), [int(r) for r in f.culprit_ranks]
    return None, []


# --- the swimlane ------------------------------------------------------------------------------


def swimlane(
    incident,
    diagnosis=None,
    x: str = "seq",
    *,
    seq_kind: str | None = None,
    pg: str | None = None,
    max_lanes: int = HEATMAP_THRESHOLD,
    annotate: bool | None = None,
    title: str | None = None,
) -> Figure:
    """One lane per rank, one mark per collective, coloured by op; the divergence highlighted.

    ``x="seq"`` places marks by sequence number (gaps are missing entries); ``x="time"`` by wall
    clock (monotonic time when no wall clock is known). Errors and timeouts are marked on their
    rank's lane at their time. Beyond ``max_lanes`` ranks the lanes become a heatmap (one pixel
    row per rank; cells that disagree with the majority in red, culprits labelled).
    """
    if x not in ("seq", "time"):
        raise ValueError("x must be 'seq' or 'time'")
    diagnosis = diagnosis_of(incident, diagnosis)
    ln = lanes(incident, seq_kind, pg, diagnosis)
    div_seq, culprits = divergence(ln, diagnosis)
    if not culprits and diagnosis is not None:
        culprits = list(getattr(diagnosis, "culprit_ranks", []) or [])
    if len(ln.ranks) > max_lanes:
        return _heatmap(incident, ln, div_seq, culprits, title, x)
    return _lanes_figure(incident, ln, div_seq, culprits, x, annotate, title, diagnosis)


def _title(ln: Lanes, extra: str | None) -> str:
    where = f"pg {ln.pg}" if ln.pg is not None else "all process groups"
    base = f"Collective sequence per rank ({where}, counter: {ln.seq_kind or 'none'})"
    return f"{extra}\n{base}" if extra else base


def _lanes_figure(incident, ln: Lanes, div_seq, culprits, x, annotate, title, diagnosis) -> Figure:
    df = ln.frame
    ranks = ln.ranks or [0]
    n_seq = max(len(ln.seqs), 1)
    width = min(16.0, max(7.0, 0.45 * n_seq + 3))
    height = min(14.0, max(2.4, 0.42 * len(ranks) + 1.6))
    fig = _new_figure(width, height)
    ax = fig.add_subplot(1, 1, 1)
    ypos = {r: i for i, r in enumerate(ranks)}
    if annotate is None:
        annotate = n_seq <= ANNOTATE_MAX_SEQS and len(ranks) <= ANNOTATE_MAX_RANKS

    xcol = _x_values(df, x)
    if df.empty:
        ax.text(
            0.5,
            0.5,
            "no collective events in this evidence",
            ha="center",
            va="center",
            transform=ax.transAxes,
            fontsize=11,
            color="#555555",
        )
    else:
        ys = df["rank"].map(ypos).to_numpy()
        failed = df["state"].isin([State.TIMED_OUT, State.FAILED]).to_numpy()
        pending = df["state"].isin([State.SCHEDULED, State.STARTED]).to_numpy() & (ln.seq_kind != SeqKind.FR)
        for op, idx in df.groupby("op", sort=True, observed=True).indices.items():
            color = OP_COLORS.get(str(op), OP_COLORS["unknown"])
            sel = np.asarray(idx)
            solid = sel[~pending[sel]]
            hollow = sel[pending[sel]]
            if len(solid):
                ax.scatter(
                    xcol[solid],
                    ys[solid],
                    s=140,
                    marker="s",
                    color=color,
                    edgecolors="black",
                    linewidths=0.4,
                    label=str(op),
                    zorder=3,
                )
            if len(hollow):
                ax.scatter(
                    xcol[hollow],
                    ys[hollow],
                    s=140,
                    marker="s",
                    facecolors="white",
                    edgecolors=color,
                    linewidths=1.6,
                    label=None if len(solid) else str(op),
                    zorder=3,
                )
        if pending.any():
            ax.scatter(
                [],
                [],
                s=140,
                marker="s",
                facecolors="white",
                edgecolors="black",
                linewidths=1.2,
                label="hollow: issued, never completed",
            )
        if failed.any():
            ax.scatter(
                xcol[failed],
                ys[failed],
                s=60,
                marker="x",
                color=DIVERGE_COLOR,
                linewidths=2,
                zorder=4,
                label="timed out / failed",
            )
        if x == "seq":
            _draw_missing(ax, ln, ypos)
        if annotate:
            for xi, yi, lab in zip(xcol, ys, df["label"]):
                ax.annotate(
                    lab,
                    (xi, yi),
                    xytext=(0, 11),
                    textcoords="offset points",
                    ha="center",
                    fontsize=7,
                    color="#333333",
                    zorder=5,
                )
        if div_seq is not None:
            _highlight_divergence(ax, ln, df, xcol, div_seq, ypos, x, annotate)
    _draw_errors(ax, incident, ln, ypos, x, xcol)

    ax.set_yticks(range(len(ranks)))
    ax.set_yticklabels([f"rank {r}" for r in ranks])
    for lab, r in zip(ax.get_yticklabels(), ranks):
        if r in culprits:
            lab.set_color(CULPRIT_COLOR)
            lab.set_fontweight("bold")
    ax.set_ylim(len(ranks) - 0.5, -1.05)
    if x == "time" and not _has_clock(df):
        ax.set_xlabel("sequence number (no clock in this evidence: x='time' cannot be drawn)")
    else:
        ax.set_xlabel("sequence number" if x == "seq" else "time since first event (s)")
    if x == "seq" and len(ln.seqs):
        lo, hi = int(ln.seqs.min()), int(ln.seqs.max())
        extra = 1 if not incident.errors.empty else 0
        ax.set_xlim(lo - 0.7, hi + 0.7 + extra)
        if hi - lo <= 30:
            ax.set_xticks(range(lo, hi + 1))
    ax.grid(axis="x", color="#eeeeee", zorder=0)
    ax.set_axisbelow(True)
    ax.set_title(_title(ln, title), fontsize=10, loc="left")
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        seen = {}
        for h, label in zip(handles, labels):
            if label and not label.startswith("_") and label not in seen:
                seen[label] = h
        ax.legend(seen.values(), seen.keys(), loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    return fig


def _x_values(df: pd.DataFrame, x: str) -> np.ndarray:
    if df.empty:
        return np.array([], dtype=float)
    if x == "seq":
        return df["seq"].to_numpy(dtype=float)
    t = _seconds(df)
    if np.all(np.isnan(t)):  # no clock at all: fall back to seq so the picture still says something
        return df["seq"].to_numpy(dtype=float)
    return t - np.nanmin(t)


def _has_clock(df: pd.DataFrame) -> bool:
    return not df.empty and not np.all(np.isnan(_seconds(df)))


def _seconds(df: pd.DataFrame) -> np.ndarray:
    """Seconds since the epoch from t_wall, else the monotonic clock."""
    wall = df["t_wall"]
    out = np.full(len(df), np.nan)
    if wall.notna().any():
        ok = wall.notna().to_numpy()
        out[ok] = wall[ok].astype("int64").to_numpy() / 1e9
    if "t_mono" in df and np.isnan(out).all():
        out = pd.to_numeric(df["t_mono"], errors="coerce").astype("float64").to_numpy()
    return out


def _draw_missing(ax, ln: Lanes, ypos: dict[int, int]) -> None:
    """A dotted outline where a rank has no entry at a seq that others reached (a gap)."""
    df = ln.frame
    if df.empty:
        return
    have = set(zip(df["rank"].tolist(), df["seq"].tolist()))
    last = df.groupby("seq")["rank"].nunique()
    seqs = last.index.to_numpy()
    xs, ys = [], []
    for r in ln.ranks:
        for s in seqs:
            if (r, int(s)) not in have:
                xs.append(s)
                ys.append(ypos[r])
    if xs:
        ax.scatter(
            xs,
            ys,
            s=140,
            marker="s",
            facecolors="none",
            edgecolors=MISSING_COLOR,
            linestyle=":",
            linewidths=1.0,
            zorder=2,
            label="missing",
        )


def _highlight_divergence(ax, ln, df, xcol, div_seq, ypos, x, annotate) -> None:
    at = (df["seq"] == div_seq).to_numpy()
    if x == "seq":
        ax.axvspan(div_seq - 0.45, div_seq + 0.45, color=DIVERGE_COLOR, alpha=0.12, zorder=1)
        ax.text(
            div_seq,
            -0.6,
            f"diverges at seq {div_seq}",
            ha="center",
            va="bottom",
            fontsize=8,
            color=DIVERGE_COLOR,
            fontweight="bold",
        )
    elif at.any():
        xs = xcol[at]
        ax.axvspan(xs.min() - 0.01, xs.max() + 0.01, color=DIVERGE_COLOR, alpha=0.12, zorder=1)
    if at.any():
        ax.scatter(
            xcol[at],
            df.loc[at, "rank"].map(ypos).to_numpy(),
            s=260,
            marker="s",
            facecolors="none",
            edgecolors=DIVERGE_COLOR,
            linewidths=2.0,
            zorder=4,
        )
        if not annotate:  # always show the shapes where it matters
            sigs = df.loc[at, "sig"]
            majority = sigs.value_counts().index[0]
            few = len(ypos) <= ANNOTATE_MAX_RANKS
            for xi, r, lab, op, sig in zip(xcol[at], df.loc[at, "rank"], df.loc[at, "label"], df.loc[at, "op"], sigs):
                if few or sig != majority:  # many ranks: write only the odd ones, and the majority once
                    ax.annotate(
                        f"{op} {lab}",
                        (xi, ypos[int(r)]),
                        xytext=(0, 11),
                        textcoords="offset points",
                        ha="center",
                        fontsize=7,
                        color=DIVERGE_COLOR,
                        zorder=5,
                    )
            if not few:
                maj = df.loc[at][sigs == majority].iloc[0]
                ax.annotate(
                    f"others: {maj['op']} {maj['label']}",
                    (xcol[at].max(), len(ypos) - 0.5),
                    xytext=(4, 4),
                    textcoords="offset points",
                    ha="left",
                    va="bottom",
                    fontsize=7,
                    color="#333333",
                    zorder=5,
                )


def _draw_errors(ax, incident, ln: Lanes, ypos, x, xcol) -> None:
    """Errors and timeouts on their rank's lane, at their time (interpolated onto the seq axis)."""
    err = incident.errors
    if err.empty:
        return
    err = err[err["rank"].notna()]
    if err.empty:
        return
    df = ln.frame
    t_ev = _seconds(df) if not df.empty else np.array([])
    t0 = np.nanmin(t_ev) if len(t_ev) and not np.all(np.isnan(t_ev)) else None
    placed = {"timeout": ([], []), "error": ([], [])}
    for r, grp in err.groupby(err["rank"].astype("int64")):
        r = int(r)
        if r not in ypos:
            continue
        lane = df[df["rank"] == r] if not df.empty else df
        for _, e in grp.iterrows():
            kind = "timeout" if str(e["kind"]) in TIMEOUT_KINDS else "error"
            pos = _error_x(e, lane, x, t0)
            if pos is None:
                continue
            placed[kind][0].append(pos)
            placed[kind][1].append(ypos[r])
    if placed["error"][0]:
        ax.scatter(
            *placed["error"],
            s=170,
            marker="X",
            color=DIVERGE_COLOR,
            edgecolors="white",
            linewidths=0.8,
            zorder=6,
            label="error",
        )
    if placed["timeout"][0]:
        ax.scatter(
            *placed["timeout"],
            s=150,
            marker="v",
            color="#ff7f0e",
            edgecolors="black",
            linewidths=0.6,
            zorder=6,
            label="timeout",
        )


#: error kinds that say how a rank *ended*: whatever their clock says, they come after the rank's
#: last observed collective (a launcher's exit time is a whole-second start time plus a duration,
#: so it can read earlier than the collectives it followed)
ENDING_KINDS = frozenset({ErrorKind.EXIT, ErrorKind.SIGNAL, ErrorKind.CHILD_FAILED})


def _error_x(e, lane: pd.DataFrame, x: str, t0) -> float | None:
    t = e["t_wall"]
    t_s = t.value / 1e9 if t is not None and not pd.isna(t) else None
    ending = str(e["kind"]) in ENDING_KINDS
    if x == "time":
        if t_s is None or t0 is None:
            return None
        if ending and not lane.empty:
            tl = _seconds(lane)
            if not np.all(np.isnan(tl)):
                t_s = max(t_s, float(np.nanmax(tl)))
        return t_s - t0
    if ending and not lane.empty:
        return float(lane["seq"].max()) + 0.5
    if not pd.isna(e.get("seq", pd.NA)) and str(e.get("seq_kind")) == str(lane.get("seq_kind", "")):
        return float(e["seq"])
    if lane.empty:
        return 0.0
    seqs = lane["seq"].to_numpy(dtype=float)
    if t_s is not None:
        tl = _seconds(lane)
        ok = ~np.isnan(tl)
        if ok.any():
            order = np.argsort(tl[ok])
            tt, ss = tl[ok][order], seqs[ok][order]
            if t_s >= tt[-1]:
                return float(ss[-1]) + 0.5
            return float(np.interp(t_s, tt, ss))
    return float(seqs.max()) + 0.5


def _heatmap(incident, ln: Lanes, div_seq, culprits, title, x: str = "seq") -> Figure:
    """Many ranks: a ranks x seq image coloured by op; disagreeing cells red, missing cells white.

    ``x="time"``: columns are equal slices of wall-clock time (each cell shows the rank's last
    collective in that slice); without any clock the picture says it cannot and draws by seq."""
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch

    df = ln.frame
    ranks = np.asarray(ln.ranks)
    seqs = ln.seqs
    fig = _new_figure(12.0, 8.5)
    top, ax = fig.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [1, 6]})
    if df.empty:
        ax.text(0.5, 0.5, "no collective events in this evidence", ha="center", va="center", transform=ax.transAxes)
        top.set_title(_title(ln, title), fontsize=10, loc="left")
        return fig
    r_idx = np.searchsorted(ranks, df["rank"].to_numpy())
    s_idx = np.searchsorted(seqs, df["seq"].to_numpy())
    seq_col = s_idx  # the seq column of each event (the majority is per seq, whatever the x axis)
    by_time = x == "time" and _has_clock(df)
    if x == "time" and not by_time:
        title = ((title + "\n") if title else "") + "no clock in this evidence: x='time' cannot be drawn, shown by seq"
    if by_time:
        t = _seconds(df)
        t0 = np.nanmin(t)
        rel = np.nan_to_num(t - t0, nan=0.0)
        n_cols = int(min(800, max(50, len(seqs))))
        span = max(float(rel.max()), 1e-9)
        s_idx = np.minimum((rel / span * n_cols).astype(np.int64), n_cols - 1)
        order = np.argsort(rel, kind="stable")  # the last collective of each slice wins the cell
        r_idx, s_idx = r_idx[order], s_idx[order]
        seq_col = seq_col[order]
        df = df.iloc[order]
        seqs = (np.arange(n_cols) + 0.5) * span / n_cols  # column centres in seconds
        if div_seq is not None:  # the divergence: when the ranks issued that collective
            at = (df["seq"] == div_seq).to_numpy()
            div_seq = float(np.median(rel[order][at])) if at.any() else None
    half = (seqs[1] - seqs[0]) / 2 if by_time and len(seqs) > 1 else 0.5
    ops = df["op"].astype(str)
    op_codes, op_names = pd.factorize(ops, sort=True)
    n_ops = len(op_names)
    grid = np.full((len(ranks), len(seqs)), -1, dtype=np.int32)
    grid[r_idx, s_idx] = op_codes
    # disagreement with the majority signature at each seq
    sig_codes, _ = pd.factorize(df["sig"])
    maj = pd.DataFrame({"s": seq_col, "c": sig_codes}).groupby("s")["c"].agg(lambda c: np.bincount(c).argmax())
    off = sig_codes != maj.reindex(seq_col).to_numpy()
    grid[r_idx[off], s_idx[off]] = n_ops
    colors = [OP_COLORS.get(o, OP_COLORS["unknown"]) for o in op_names] + [DIVERGE_COLOR]
    cmap = ListedColormap(["white"] + colors)
    ax.imshow(
        grid + 1,
        aspect="auto",
        interpolation="nearest",
        cmap=cmap,
        vmin=-0.5,
        vmax=n_ops + 1.5,
        extent=(seqs[0] - half, seqs[-1] + half, len(ranks) - 0.5, -0.5),
    )
    if off.any():  # one pixel row is too thin to see: mark the odd cells
        ax.scatter(seqs[s_idx[off]], r_idx[off], marker="s", s=18, color=DIVERGE_COLOR, zorder=4)
    # top strip: per seq, how many ranks differ from the majority or are missing
    n_off = np.bincount(s_idx[off], minlength=len(seqs))
    # (by time, a rank with nothing in a slice is idle, not missing)
    n_missing = 0 * n_off if by_time else len(ranks) - np.bincount(s_idx, minlength=len(seqs))
    edges = np.append(seqs - half, seqs[-1] + half)  # one step artist each, not hundreds of bar patches
    top.stairs(n_off + n_missing, edges, fill=True, color="#999999", label="ranks missing")
    top.stairs(n_off, edges, fill=True, color=DIVERGE_COLOR, label="ranks differing")
    top.set_ylim(0, max(1, int((n_off + n_missing).max())) * 1.15)
    top.set_ylabel("odd ranks", fontsize=8)
    top.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    if div_seq is not None:
        for a in (top, ax):
            a.axvline(div_seq, color=DIVERGE_COLOR, linewidth=1.2, linestyle="--")
        top.text(
            div_seq,
            top.get_ylim()[1],
            f" diverges at seq {div_seq}" if not by_time else " diverges here",
            color=DIVERGE_COLOR,
            fontsize=9,
            va="top",
            fontweight="bold",
        )
    ticks = np.linspace(0, len(ranks) - 1, 9).astype(int).tolist()
    culprit_rows = [int(np.searchsorted(ranks, c)) for c in culprits[:12] if c in set(ranks.tolist())]
    gap = max(1, len(ranks) // 30)
    labels = {t: f"rank {ranks[t]}" for t in ticks if all(abs(t - c) > gap for c in culprit_rows)}
    for row in culprit_rows:
        labels[row] = f"rank {ranks[row]} ◀"
    if culprit_rows:
        ax.scatter(
            np.full(len(culprit_rows), seqs[-1] + half + 0.01 * (seqs[-1] - seqs[0] + 2 * half)),
            culprit_rows,
            marker="<",
            color=CULPRIT_COLOR,
            s=40,
            clip_on=False,
            zorder=6,
        )
    ax.set_yticks(list(labels))
    ax.set_yticklabels(list(labels.values()), fontsize=8)
    for lab in ax.get_yticklabels():
        if lab.get_text().endswith("◀"):
            lab.set_color(CULPRIT_COLOR)
            lab.set_fontweight("bold")
    # errors: one mark per rank at its last seq
    err = incident.errors
    if not err.empty and err["rank"].notna().any():
        er = np.unique(err["rank"].dropna().astype("int64").to_numpy())
        er = er[np.isin(er, ranks)]
        if by_time:  # after the rank's last collective: an ending is never drawn before it
            last = pd.Series(seqs[s_idx], index=df["rank"].to_numpy()).groupby(level=0).max()
        else:
            last = df.groupby("rank")["seq"].max()
        xs = last.reindex(er).fillna(seqs[-1]).to_numpy() + half
        ax.scatter(xs, np.searchsorted(ranks, er), marker="x", color="black", s=12, linewidths=0.8, zorder=5)
    ax.set_xlabel("time since first event (s)" if by_time else "sequence number")
    ax.set_ylabel(f"{len(ranks)} ranks")
    handles = [Patch(color=c, label=o) for o, c in zip(op_names, colors[:-1])]
    handles += [
        Patch(color=DIVERGE_COLOR, label="differs from majority"),
        Patch(facecolor="white", edgecolor="#999999", label="missing"),
    ]
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    top.set_title(_title(ln, title), fontsize=10, loc="left")
    return fig


# --- the table at the divergence ---------------------------------------------------------------


def shapes_frame(incident, diagnosis=None, *, seq_kind: str | None = None, pg: str | None = None) -> pd.DataFrame:
    """Every rank's entry at the divergent collective, one row per rank (``minority`` marks culprits).

    Uses the events at the divergence; ranks with no event there get the diagnosis' RankView, else
    "missing". The frame's ``attrs`` carry ``seq``, ``seq_kind`` and ``pg``.
    """
    diagnosis = diagnosis_of(incident, diagnosis)
    ln = lanes(incident, seq_kind, pg, diagnosis)
    seq, minority = divergence(ln, diagnosis)
    first = getattr(diagnosis, "first", None) if diagnosis is not None else None
    rows = []
    views = dict(first.ranks) if first is not None and first.ranks else {}
    at = ln.frame[ln.frame["seq"] == seq] if seq is not None else ln.frame.iloc[0:0]
    by_rank = {int(r): row for r, row in zip(at["rank"], at.to_dict("records"))}
    for r in sorted(set(ln.ranks) | set(int(k) for k in views)):
        if r in by_rank:
            e = by_rank[r]
            rows.append(
                {
                    "rank": r,
                    "op": e["op"],
                    "in_shapes": e["label"],
                    "out_shapes": shape_label(e["out_shapes"]),
                    "dtype": value_label(e["dtype"]),
                    "state": value_label(e["state"]),
                }
            )
        elif r in views and views[r].state != "absent":
            v = views[r]
            rows.append(
                {
                    "rank": r,
                    "op": v.op or "?",
                    "in_shapes": shape_label(v.shapes),
                    "out_shapes": "?",
                    "dtype": ",".join(v.dtypes or []) or "?",
                    "state": v.state or "?",
                }
            )
        else:
            rows.append(
                {
                    "rank": r,
                    "op": "missing",
                    "in_shapes": "–",
                    "out_shapes": "–",
                    "dtype": "–",
                    "state": "never reached",
                }
            )
    out = pd.DataFrame(rows, columns=["rank", "op", "in_shapes", "out_shapes", "dtype", "state"])
    out["minority"] = out["rank"].isin(minority)
    out = out.set_index("rank")
    out.attrs.update(seq=seq, seq_kind=ln.seq_kind, pg=ln.pg)
    return out


def value_label(v) -> str:
    """A table cell's text: ``?`` for a missing value (None, NaN), else ``str(v)``."""
    return "?" if v is None or _isnan(v) else str(v)


def shapes_table(incident, diagnosis=None, **kw):
    """:func:`shapes_frame` as a styled table: the minority (culprit) ranks highlighted in red."""
    df = shapes_frame(incident, diagnosis, **kw)
    seq = df.attrs.get("seq")
    caption = (
        f"Each rank at the divergence: pg {df.attrs.get('pg')}, {df.attrs.get('seq_kind')} seq {seq}"
        if seq is not None
        else "No divergent collective found in the events"
    )

    def _row_style(row):
        style = "background-color: #fdd; color: #900; font-weight: bold" if row["minority"] else ""
        return [style] * len(row)

    return (
        df.style.apply(_row_style, axis=1)
        .set_caption(caption)
        .set_table_styles([{"selector": "caption", "props": "caption-side: top; font-weight: bold;"}])
    )


# --- who is behind ------------------------------------------------------------------------------


def progress_frame(incident, *, seq_kind: str | None = None, pg: str | None = None) -> pd.DataFrame:
    """Per rank: last seq enqueued and completed (from ``progress``, else derived from events)."""
    kind = choose_seq_kind(incident, None, seq_kind)
    prog = incident.progress
    out = None
    if not prog.empty:
        p = prog[prog["rank"].notna()]
        if kind is not None and (p["seq_kind"].astype("object") == kind).any():
            p = p[p["seq_kind"].astype("object") == kind]
        group = (
            pg
            if pg is not None
            else (p["pg"].dropna().astype(str).value_counts().index[0] if p["pg"].notna().any() else None)
        )
        if group is not None:
            p = p[p["pg"].astype("object").astype(str) == str(group)]
        if not p.empty:
            out = p.assign(rank=p["rank"].astype("int64")).groupby("rank")[["last_enqueued", "last_completed"]].max()
            kind = str(p["seq_kind"].dropna().iloc[0]) if p["seq_kind"].notna().any() else kind
    if out is None:
        ln = lanes(incident, kind, pg)
        df = ln.frame
        if df.empty:
            out = pd.DataFrame(columns=["last_enqueued", "last_completed"])
        else:
            enq = df.groupby("rank")["seq"].max()
            done = df[
                df["state"].isin([State.COMPLETED])
                | ((ln.seq_kind == SeqKind.FR) & df["state"].isin([State.SCHEDULED]))
            ]
            comp = done.groupby("rank")["seq"].max()
            out = pd.DataFrame({"last_enqueued": enq, "last_completed": comp.reindex(enq.index)})
    for r in _all_ranks(incident):
        if r not in out.index:
            out.loc[r] = [pd.NA, pd.NA]
    out = out.sort_index().astype("Int64")
    out.index.name = "rank"
    # behind: enqueued fewer collectives than the leaders, or completed fewer; unknown ranks too
    behind = pd.Series(False, index=out.index)
    for col in ("last_enqueued", "last_completed"):
        if out[col].notna().any():
            behind |= (out[col] < out[col].max()).fillna(False).astype(bool)
    if len(out) and out["last_enqueued"].notna().any():
        behind |= out["last_enqueued"].isna() & out["last_completed"].isna()
    out["behind"] = behind.astype(bool)
    out.attrs["seq_kind"] = kind
    return out


def progress_bars(incident, *, seq_kind: str | None = None, pg: str | None = None) -> Figure:
    """Per rank: last seq completed (solid) and enqueued (light); ranks that are behind in red."""
    df = progress_frame(incident, seq_kind=seq_kind, pg=pg)
    n = max(len(df), 1)
    fig = _new_figure(8.0, min(12.0, max(2.2, 0.3 * n + 1.2)) if n <= HEATMAP_THRESHOLD else 8.0)
    ax = fig.add_subplot(1, 1, 1)
    if df.empty:
        ax.text(0.5, 0.5, "no progress information in this evidence", ha="center", va="center", transform=ax.transAxes)
        ax.set_axis_off()
        return fig
    y = np.arange(len(df))
    enq = df["last_enqueued"].astype("float64").fillna(0).to_numpy()
    comp = df["last_completed"].astype("float64").fillna(0).to_numpy()
    behind = df["behind"].to_numpy(dtype=bool)
    if n <= HEATMAP_THRESHOLD:
        ax.barh(y, enq, height=0.8, color=np.where(behind, "#f4a6a6", "#c6dbef"), label="last enqueued")
        ax.barh(y, comp, height=0.45, color=np.where(behind, DIVERGE_COLOR, "#2171b5"), label="last completed")
    else:  # hundreds of bars: one line collection each is much faster than patches
        lw = max(0.5, 400.0 / n)
        ax.hlines(y, 0, enq, colors=np.where(behind, "#f4a6a6", "#c6dbef"), linewidth=lw * 1.6, label="last enqueued")
        ax.hlines(y, 0, comp, colors=np.where(behind, DIVERGE_COLOR, "#2171b5"), linewidth=lw, label="last completed")
    if n <= HEATMAP_THRESHOLD:
        ax.set_yticks(y)
        ax.set_yticklabels([f"rank {r}" for r in df.index])
        for lab, b in zip(ax.get_yticklabels(), behind):
            if b:
                lab.set_color(CULPRIT_COLOR)
                lab.set_fontweight("bold")
        for yi, e, c in zip(y, enq, comp):
            ax.text(max(e, c), yi, f"  {int(c)}/{int(e)}", va="center", fontsize=8)
    else:
        ax.set_ylabel(f"{n} ranks")
        for yi in y[behind][:12]:
            ax.text(0, yi, f" rank {df.index[yi]} behind", va="center", fontsize=7, color=CULPRIT_COLOR)
    ax.invert_yaxis()
    ax.set_xlabel(f"sequence number ({df.attrs.get('seq_kind') or 'none'})")
    ax.set_title("How far each rank got (completed / enqueued); ranks behind in red", fontsize=10, loc="left")
    ax.legend(loc="lower right", fontsize=8)
    return fig
