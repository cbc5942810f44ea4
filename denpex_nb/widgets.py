"""An ipywidgets explorer: pick a rank and a process group, slide through sequence numbers.

Widget output does not survive papermill or nbconvert (no live kernel behind the page), so when
the notebook runs headless the explorer shows the same information as static tables: every rank's
entry around the divergence. Headless means: ``interactive=False``, or the ``DENPEX_NB_HEADLESS``
environment variable (set by ``denpex-nb report``), or a papermill / nbconvert parent process, or
no ipywidgets installed.
"""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from . import plot


def is_headless() -> bool:
    """True when nobody can interact with widgets in this kernel."""
    if os.environ.get("DENPEX_NB_HEADLESS", "") not in ("", "0"):
        return True
    try:
        parent = Path(f"/proc/{os.getppid()}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return False
    return any(word in parent for word in ("papermill", "nbconvert", "nbclient", "pytest"))


def entries_at(incident, seq: int, *, pg=None, seq_kind=None, diagnosis=None) -> pd.DataFrame:
    """Every rank's entry at one seq: rank, op, shapes, dtype, state (``missing`` when absent)."""
    ln = plot.lanes(incident, seq_kind, pg, diagnosis)
    at = ln.frame[ln.frame["seq"] == seq]
    by_rank = {int(r): row for r, row in zip(at["rank"], at.to_dict("records"))}
    rows = []
    for r in ln.ranks:
        e = by_rank.get(r)
        if e is None:
            rows.append({"rank": r, "op": "missing", "in_shapes": "–", "out_shapes": "–", "dtype": "–", "state": "–"})
        else:
            rows.append(
                {
                    "rank": r,
                    "op": e["op"],
                    "in_shapes": plot.shape_label(e["in_shapes"]),
                    "out_shapes": plot.shape_label(e["out_shapes"]),
                    "dtype": plot.value_label(e["dtype"]),
                    "state": plot.value_label(e["state"]),
                }
            )
    out = pd.DataFrame(rows, columns=["rank", "op", "in_shapes", "out_shapes", "dtype", "state"]).set_index("rank")
    out.attrs.update(seq=seq, pg=ln.pg, seq_kind=ln.seq_kind)
    return out


def rank_sequence(
    incident, rank: int, *, pg=None, seq_kind=None, around: int | None = None, width: int = 5
) -> pd.DataFrame:
    """One rank's collectives (optionally only ``width`` either side of ``around``)."""
    ln = plot.lanes(incident, seq_kind, pg)
    df = ln.frame[ln.frame["rank"] == rank]
    if around is not None:
        df = df[(df["seq"] >= around - width) & (df["seq"] <= around + width)]
    return pd.DataFrame(
        {
            "seq": df["seq"],
            "op": df["op"],
            "in_shapes": df["in_shapes"].map(plot.shape_label),
            "dtype": df["dtype"].astype(str),
            "state": df["state"],
        }
    ).set_index("seq")


class StaticExplorer:
    """What the explorer shows when nobody can move a slider: entries around the divergence."""

    def __init__(self, incident, diagnosis=None, width: int = 2):
        self.incident, self.diagnosis, self.width = incident, plot.diagnosis_of(incident, diagnosis), width

    def tables(self) -> list[tuple[str, pd.DataFrame]]:
        ln = plot.lanes(self.incident, None, None, self.diagnosis)
        if ln.frame.empty:
            return []
        seq, _ = plot.divergence(ln, self.diagnosis)
        seqs = ln.seqs.tolist()
        center = seq if seq is not None else seqs[-1]
        picks = [s for s in seqs if center - self.width <= s <= center + self.width]
        return [
            (
                f"seq {s}" + (" (divergence)" if s == seq else ""),
                entries_at(self.incident, s, pg=ln.pg, seq_kind=ln.seq_kind, diagnosis=self.diagnosis),
            )
            for s in picks
        ]

    def _repr_html_(self) -> str:
        from html import escape

        tables = self.tables()
        if not tables:
            return "<p>Explorer: no collective events to explore.</p>"
        parts = [
            "<p><b>Explorer (static: this notebook ran headless).</b> Every rank's entry around the divergence.</p>"
        ]
        for title, df in tables:
            parts.append(f"<h4>{escape(title)}</h4>" + df.to_html())
        return "".join(parts)

    def __repr__(self) -> str:
        return "\n\n".join(f"{t}\n{df.to_string()}" for t, df in self.tables()) or "no collective events"


def explorer(incident, diagnosis=None, interactive: bool | None = None):
    """Rank and process-group pickers and a seq slider; static tables when headless.

    Returns an ipywidgets ``VBox`` (interactive) or a :class:`StaticExplorer`; both display
    themselves as the last expression of a cell.
    """
    if interactive is None:
        interactive = not is_headless()
    if not interactive:
        return StaticExplorer(incident, diagnosis)
    try:
        import ipywidgets as w
    except ImportError:
        return StaticExplorer(incident, diagnosis)
    from IPython.display import display

    ev = incident.events
    diagnosis = plot.diagnosis_of(incident, diagnosis)
    kind = plot.choose_seq_kind(incident, diagnosis)
    pgs = sorted(ev.loc[ev["seq_kind"].astype("object") == kind, "pg"].dropna().astype(str).unique()) or ["0"]
    pg0 = plot.choose_pg(incident, kind, diagnosis)
    ln = plot.lanes(incident, kind, pg0, diagnosis)
    seq0, _ = plot.divergence(ln, diagnosis)
    lo = int(ln.seqs.min()) if len(ln.seqs) else 0
    hi = int(ln.seqs.max()) if len(ln.seqs) else 0
    pg_pick = w.Dropdown(options=pgs, value=pg0 if pg0 in pgs else pgs[0], description="process group")
    rank_pick = w.Dropdown(
        options=[("all ranks", -1)] + [(f"rank {r}", r) for r in ln.ranks], value=-1, description="rank"
    )
    slider = w.IntSlider(
        value=seq0 if seq0 is not None else lo, min=lo, max=max(hi, lo), description="seq", continuous_update=False
    )
    out = w.Output()

    def refresh(*_):
        out.clear_output(wait=True)
        with out:
            if rank_pick.value == -1:
                display(entries_at(incident, slider.value, pg=pg_pick.value, seq_kind=kind))
            else:
                display(rank_sequence(incident, rank_pick.value, pg=pg_pick.value, seq_kind=kind, around=slider.value))

    for widget in (pg_pick, rank_pick, slider):
        widget.observe(refresh, names="value")
    refresh()
    return w.VBox([w.HBox([pg_pick, rank_pick]), slider, out])
