"""The explorer in JupyterLab: a zoomable picture linked to the tables, and its static twin.

What an engineer does with it: pick a finding (the view jumps to its collective and its culprit),
pick a rank and a seq (by clicking a cell or typing), and read every rank's entry at that seq
(odd ranks first, the agreeing majority one row with its count), the rank's own entries around
it, and the raw lines of evidence with their ``file:line``. Filters: counter (every one present:
trace, fr, detail ...), process group, op, rank range.

The widget carries a static HTML twin in its display bundle (``text/html`` beside the widget
view), so renderers without a live kernel (nbconvert, GitHub) still show the tables, and the same
twin as a hidden output of its own that JupyterLab reveals in the widget's place when a saved
notebook is reopened without its kernel (:mod:`.fallback`); the explorer itself is :class:`StaticExplorer` whenever nobody can interact
(:func:`denpex_nb.widgets.kernel.frontend`), or when ipywidgets is missing (with a note).
"""

from __future__ import annotations

import time
from html import escape

import numpy as np
import pandas as pd

from .. import plot
from .evidence import EventIndex, excerpts, excerpts_html
from .fallback import display_fallback
from .grid import Grid, rank_ranges
from .kernel import frontend, on_shutdown

#: seqs either side of the chosen one in the rank's own table
WINDOW = 5


def counters(incident) -> list[str]:
    """Every sequence counter present, in the preference order (trace, fr, work, detail ...)."""
    ev = incident.events
    if ev.empty:
        return []
    present = set(ev["seq_kind"].dropna().astype(str).unique())
    first = [k for k in plot.SEQ_KIND_PREFERENCE if k in present]
    return first + sorted(present - set(first))


def groups(incident, seq_kind) -> list[str]:
    """The process groups seen with ``seq_kind`` (as strings); ``[]`` when none is named."""
    ev = incident.events
    if ev.empty:
        return []
    sub = ev.loc[ev["seq_kind"].astype("object") == seq_kind, "pg"].dropna().astype(str)
    counts = sub.value_counts()
    return list(counts.index)


def finding_label(k: int, f) -> str:
    where = f"{f.seq_kind} seq {f.seq}" if f.seq is not None else "no seq"
    pg = f", pg {f.pg}" if f.pg is not None else ""
    who = f", culprit {rank_ranges(f.culprit_ranks)}" if f.culprit_ranks else ""
    return f"{k + 1}. {f.class_id} at {where}{pg}{who}"


def table_html(df: pd.DataFrame, caption: str, mark_col: str | None = None, mark_row=None) -> str:
    """A small HTML table: rows that differ (or are missing) tinted, one chosen row bold."""
    if df.empty:
        return f"<p><b>{escape(caption)}</b>: nothing here.</p>"
    head = "".join(f"<th style='text-align:left;padding:1px 6px'>{escape(str(c))}</th>" for c in df.columns)
    body = []
    for _, row in df.iterrows():
        verdict = str(row.get("vs majority", ""))
        style = {"differs": "background:#fdd;color:#900;font-weight:bold", "missing": "background:#eee"}.get(
            verdict, ""
        )
        if mark_col is not None and mark_row is not None and str(row[mark_col]) == str(mark_row):
            style += ";outline:2px solid #111"
        cells = "".join(f"<td style='padding:1px 6px'>{escape(str(v))}</td>" for v in row.tolist())
        body.append(f"<tr style='{style}'>{cells}</tr>")
    return (
        f"<table class='dx-table' style='border-collapse:collapse;font-size:12px'>"
        f"<caption style='caption-side:top;text-align:left;font-weight:bold'>{escape(caption)}</caption>"
        f"<thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"
    )


class Model:
    """The explorer's state without any widget: grids per (counter, pg), findings, the tables."""

    def __init__(self, incident, diagnosis=None):
        self.incident = incident
        self.diagnosis = plot.diagnosis_of(incident, diagnosis)
        self.findings = [f for f in getattr(self.diagnosis, "findings", []) or []]
        self._grids: dict = {}
        self._indexes: dict = {}
        self._start = None

    def grid(self, seq_kind, pg) -> Grid:
        key = (seq_kind, pg)
        if key not in self._grids:
            self._grids[key] = Grid.build(self.incident, seq_kind, pg, self.diagnosis)
        return self._grids[key]

    def start(self) -> tuple[str | None, str | None, int | None, int | None]:
        """(counter, pg, seq, rank) to open on: the first finding's, else the diagnosis' counter."""
        if self._start is None:
            self._start = self._choose_start()
        return self._start

    def _choose_start(self):
        kind = plot.choose_seq_kind(self.incident, self.diagnosis)
        pg = plot.choose_pg(self.incident, kind, self.diagnosis)
        g = self.grid(kind, pg)
        seq, culprits = plot.divergence(plot.Lanes(g.frame, list(g.ranks), g.seqs, kind, pg), self.diagnosis)
        if seq is None:
            odd = g.odd_cells(1)
            seq = int(odd["seq"].iloc[0]) if len(odd) else (int(g.seqs[-1]) if len(g.seqs) else None)
        rank = int(culprits[0]) if culprits else self.first_odd_rank(g, seq)
        return kind, pg, seq, rank

    @staticmethod
    def first_odd_rank(g: Grid, seq) -> int | None:
        if seq is None or not len(g.ranks):
            return None
        j = g.col_of(seq)
        if j is not None:
            bad = np.nonzero(g.odd[:, j] | g.missing[:, j])[0]
            if len(bad):
                return int(g.ranks[bad[0]])
        return int(g.ranks[0])

    def at_seq_html(self, g: Grid, seq, ranks=None) -> str:
        if seq is None:
            return "<p>No collective to show.</p>"
        df = g.entries_at(int(seq), ranks=ranks)
        n = int(df["count"].sum()) if len(df) else 0
        odd = int(df.loc[df["vs majority"] != "agrees", "count"].sum()) if len(df) else 0
        cap = f"Every rank at seq {seq} (pg {g.pg}, counter {g.seq_kind}): {n} ranks, {odd} not agreeing"
        return table_html(df, cap)

    def window_html(self, g: Grid, rank, seq) -> str:
        if rank is None or seq is None:
            return ""
        df = g.rank_window(int(rank), int(seq), WINDOW)
        return table_html(df, f"Rank {rank} around seq {seq}", mark_col="seq", mark_row=seq)

    def evidence_html(self, g: Grid, rank, seq) -> str:
        if rank is None or seq is None:
            return ""
        if g.seq_kind not in self._indexes:
            self._indexes[g.seq_kind] = EventIndex(self.incident, g.seq_kind)
        index = self._indexes[g.seq_kind]
        items = excerpts(self.incident, int(rank), int(seq), seq_kind=g.seq_kind, pg=g.pg, index=index)
        return excerpts_html(items, f"Evidence: rank {rank} at seq {seq}")


class StaticExplorer:
    """What the explorer shows when nobody can interact: every rank around the divergence, collapsed.

    ``note`` says why it is static (headless, ipywidgets missing ...)."""

    def __init__(self, incident, diagnosis=None, width: int = 2, note: str = "this notebook ran headless", model=None):
        self.model = model if model is not None else Model(incident, diagnosis)
        self.incident, self.diagnosis, self.width, self.note = incident, self.model.diagnosis, width, note

    def tables(self) -> list[tuple[str, pd.DataFrame]]:
        kind, pg, seq, _ = self.model.start()
        g = self.model.grid(kind, pg)
        if not len(g.seqs) or seq is None:
            return []
        div, _ = plot.divergence(plot.Lanes(g.frame, list(g.ranks), g.seqs, kind, pg), self.diagnosis)
        j = g.col_of(seq)
        picks = g.seqs[max(0, j - self.width) : j + self.width + 1] if j is not None else g.seqs[-1:]
        return [(f"seq {s}" + (" (divergence)" if s == div else ""), g.entries_at(int(s))) for s in picks]

    def _repr_html_(self) -> str:
        tables = self.tables()
        if not tables:
            return f"<p><b>Explorer (static: {escape(self.note)}).</b> No collective events to explore.</p>"
        kind, pg, _, _ = self.model.start()
        g = self.model.grid(kind, pg)
        parts = [
            f"<p><b>Explorer (static: {escape(self.note)}).</b> Every rank around the divergence "
            f"(pg {escape(str(g.pg))}, counter {escape(str(g.seq_kind))}, {len(g.ranks)} ranks): "
            "ranks that differ or are missing first, the agreeing majority as one row.</p>"
        ]
        for title, df in tables:
            parts.append(table_html(df, title))
        odd = g.odd_cells(20)
        if len(odd):
            parts.append(table_html(odd, "The first odd cells (differs from its seq's majority, or skipped)"))
        return "".join(parts)

    def __repr__(self) -> str:
        return "\n\n".join(f"{t}\n{df.to_string(index=False)}" for t, df in self.tables()) or "no collective events"


def explorer(incident, diagnosis=None, interactive: bool | None = None):
    """The explorer: live widgets when someone can use them, else :class:`StaticExplorer`.

    ``interactive=None`` asks the kernel (:func:`denpex_nb.widgets.kernel.frontend`); True or False
    forces it. Returns an ipywidgets ``VBox`` (with the :class:`Explorer` as ``.explorer``) or a
    :class:`StaticExplorer`; both display themselves as the last expression of a cell.
    """
    if interactive is None:
        fe = frontend()
        interactive, why = fe.interactive, fe.why
    else:
        why = "interactive=False"
    if not interactive:
        return StaticExplorer(incident, diagnosis, note=why)
    if not counters(incident):
        return StaticExplorer(incident, diagnosis, note="no sequenced collectives in this evidence")
    try:
        import ipywidgets  # noqa: F401
    except ImportError:
        return StaticExplorer(
            incident,
            diagnosis,
            note="ipywidgets is not installed, so the live explorer cannot run: pip install 'denpex_nb[notebook]'",
        )
    return Explorer(incident, diagnosis).box


class Explorer:
    """The live explorer: pickers, filters, the picture and the linked tables."""

    def __init__(self, incident, diagnosis=None):
        import ipywidgets as w

        from .canvas import Picture, live_canvas

        self.model = Model(incident, diagnosis)
        self.timings: list[tuple[str, float]] = []  # (what, seconds) of each refresh, newest last
        kind, pg, seq, rank = self.model.start()
        self._updating = False
        lay = w.Layout(width="auto")
        style = {"description_width": "initial"}
        f_opts = [(finding_label(k, f), k) for k, f in enumerate(self.model.findings)] or [("(no finding)", -1)]
        self.finding = w.Dropdown(options=f_opts, value=f_opts[0][1], description="finding", style=style, layout=lay)
        self.go = w.Button(description="go to finding", tooltip="back to the chosen finding's collective and culprit")
        kinds = counters(incident) or [kind or "(none)"]
        self.counter = w.Dropdown(options=kinds, value=kind if kind in kinds else kinds[0], description="counter")
        self.pg = w.Dropdown(description="process group", style=style)
        self.op = w.Dropdown(description="op")
        self.ranks = w.IntRangeSlider(description="ranks", continuous_update=False, layout=w.Layout(width="340px"))
        self.rank = w.BoundedIntText(description="rank", layout=w.Layout(width="150px"))
        self.seq = w.BoundedIntText(description="seq", layout=w.Layout(width="160px"))
        self.prev = w.Button(description="◀ seq", layout=w.Layout(width="70px"), tooltip="previous seq")
        self.next = w.Button(description="seq ▶", layout=w.Layout(width="70px"), tooltip="next seq")
        self.odd = w.Dropdown(description="odd cells", style=style, layout=w.Layout(width="300px"))
        self.status = w.HTML()
        self.at_seq = w.HTML(layout=w.Layout(margin="0 24px 0 0"))
        self.window = w.HTML()
        self.evidence = w.HTML()
        self.picture = Picture()
        self.canvas = live_canvas(self.picture.fig)
        if self.canvas is None:
            self.image = w.Image(format="png")
            plot_widget = w.VBox(
                [
                    w.HTML(
                        "<i>ipympl is not installed: the picture is static (pip install ipympl for zoom and pan).</i>"
                    ),
                    self.image,
                ]
            )
        else:
            self.image = None
            self.canvas.mpl_connect("button_press_event", self._on_click)
            plot_widget = self.canvas
        for name in ("finding", "go", "counter", "pg", "op", "ranks", "rank", "seq", "prev", "next", "odd"):
            getattr(self, name).add_class(f"dx-{name}")  # stable handles for people's CSS and the browser test
        for name in ("status", "at_seq", "window", "evidence"):
            getattr(self, name).add_class(f"dx-{name.replace('_', '-')}")
        plot_widget.add_class("dx-picture")
        self._set_counter(self.counter.value, pg)
        self._select(rank, seq, jump=True)
        self.finding.observe(self._on_finding, names="value")
        self.go.on_click(self._on_finding)
        self.counter.observe(lambda ch: self._set_counter(ch["new"], None), names="value")
        self.pg.observe(lambda ch: self._set_group(ch["new"]), names="value")
        self.op.observe(lambda ch: self._redraw_grid(), names="value")
        self.ranks.observe(self._on_ranks, names="value")
        self.rank.observe(lambda ch: self._select(ch["new"], self.seq.value), names="value")
        self.seq.observe(lambda ch: self._select(self.rank.value, ch["new"]), names="value")
        self.odd.observe(self._on_odd, names="value")
        self.prev.on_click(lambda _: self._step(-1))
        self.next.on_click(lambda _: self._step(+1))
        rows = [
            w.HBox([self.finding, self.go]),
            w.HBox([self.counter, self.pg, self.op, self.ranks]),
            w.HBox([self.rank, self.seq, self.prev, self.next, self.odd]),
            plot_widget,
            self.status,
            w.HBox([self.at_seq, self.window], layout=w.Layout(align_items="flex-start", flex_flow="row wrap")),
            self.evidence,
        ]
        self.box = ExplorerBox(rows, static=lambda: StaticExplorer(incident, note=_SAVED_NOTE, model=self.model))
        self.box.add_class("dx-explorer")
        self.box.explorer = self

    # --- state changes ------------------------------------------------------------------------------

    @property
    def grid(self) -> Grid:
        pg = self.pg.value if self.pg.value not in (None, "(none)") else None
        return self.model.grid(self.counter.value, pg)

    def _set_counter(self, kind, pg) -> None:
        pgs = groups(self.model.incident, kind) or ["(none)"]
        self._updating = True
        try:
            self.pg.options = pgs
            self.pg.value = str(pg) if pg is not None and str(pg) in pgs else pgs[0]
        finally:
            self._updating = False
        self._set_group(self.pg.value)

    def _set_group(self, _pg) -> None:
        if self._updating:
            return
        g = self.grid
        self._updating = True
        try:
            self.op.options = ["(all ops)"] + list(g.op_names)
            self.op.value = "(all ops)"
            lo, hi = (int(g.ranks[0]), int(g.ranks[-1])) if len(g.ranks) else (0, 0)
            self.ranks.min, self.ranks.max = min(lo, self.ranks.min), max(hi, self.ranks.max)
            self.ranks.min, self.ranks.max, self.ranks.value = lo, hi, (lo, hi)
            smin, smax = (int(g.seqs[0]), int(g.seqs[-1])) if len(g.seqs) else (0, 0)
            self.seq.min, self.seq.max = -(10**12), 10**12
            self.rank.min, self.rank.max = -(10**9), 10**9
            self.seq.min, self.seq.max = smin, smax
            self.rank.min, self.rank.max = lo, hi
            odd = g.odd_cells(50)
            opts = [("(choose one)", None)] + [
                (f"rank {r} at seq {s} ({what})", (int(r), int(s))) for r, s, what in odd.itertuples(index=False)
            ]
            self.odd.options = opts
            self.odd.value = None
        finally:
            self._updating = False
        self._redraw_grid()
        self._select(self.rank.value, self.seq.value, jump=True)

    def _redraw_grid(self) -> None:
        if self._updating:
            return
        g = self.grid
        ops = None if self.op.value in (None, "(all ops)") else {self.op.value}
        div = None
        f = self._finding()
        if f is not None and f.seq_kind == g.seq_kind and (f.pg is None or str(f.pg) == str(g.pg)):
            div = f.seq
        self.picture.show(g, allowed_ops=ops, divergence_seq=div)
        self._on_ranks({"new": self.ranks.value}, redraw=False)
        self._flush()

    def _finding(self):
        k = self.finding.value
        return self.model.findings[k] if k is not None and 0 <= k < len(self.model.findings) else None

    def _on_finding(self, change) -> None:
        f = self._finding()
        if f is None:
            return
        if f.seq_kind is not None and f.seq_kind in self.counter.options and f.seq_kind != self.counter.value:
            self._updating = True
            self.counter.value = f.seq_kind
            self._updating = False
            self._set_counter(f.seq_kind, f.pg)
        elif f.pg is not None and str(f.pg) in self.pg.options and str(f.pg) != self.pg.value:
            self.pg.value = str(f.pg)
        else:
            self._redraw_grid()
        g = self.grid
        rank = int(f.culprit_ranks[0]) if f.culprit_ranks else self.model.first_odd_rank(g, f.seq)
        self._select(rank, f.seq if f.seq is not None else self.seq.value, jump=True)

    def _on_ranks(self, change, redraw: bool = True) -> None:
        g = self.grid
        lo, hi = change["new"]
        r0, r1 = int(np.searchsorted(g.ranks, lo)), int(np.searchsorted(g.ranks, hi, side="right")) - 1
        x0, x1 = sorted(self.picture.ax.get_xlim())
        cols = (max(0, int(np.ceil(x0))), min(len(g.seqs) - 1, int(np.floor(x1))))
        self.picture.view((max(r0, 0), max(r1, 0)), cols)
        if redraw:
            self._refresh_tables()
            self._flush()

    def _on_odd(self, change) -> None:
        if change["new"] is None or self._updating:
            return
        r, s = change["new"]
        self._select(r, s, jump=True)

    def _on_click(self, event) -> None:
        toolbar = getattr(self.canvas, "toolbar", None)
        if event.inaxes is not self.picture.ax or getattr(toolbar, "mode", "") not in ("", None):
            return
        if event.xdata is None or event.ydata is None:
            return
        g = self.grid
        i, j = int(round(event.ydata)), int(round(event.xdata))
        if 0 <= i < len(g.ranks) and 0 <= j < len(g.seqs):
            self._select(int(g.ranks[i]), int(g.seqs[j]))

    def _step(self, d: int) -> None:
        g = self.grid
        j = g.nearest_col(self.seq.value)
        if j is None:
            return
        j = int(np.clip(j + d, 0, len(g.seqs) - 1))
        self._select(self.rank.value, int(g.seqs[j]))

    def _select(self, rank, seq, jump: bool = False) -> None:
        """Choose (rank, seq): move the pickers, the outline in the picture and every table."""
        if self._updating:
            return
        t0 = time.perf_counter()
        g = self.grid
        self._updating = True
        try:
            if rank is not None:
                self.rank.value = int(np.clip(rank, self.rank.min, self.rank.max))
            if seq is not None:
                self.seq.value = int(np.clip(seq, self.seq.min, self.seq.max))
        finally:
            self._updating = False
        i, j = g.row_of(self.rank.value), g.col_of(self.seq.value)
        if jump and i is not None and j is not None:
            self.picture.zoom_to(i, j)
        else:
            self.picture.select(i, j)
        self._refresh_tables()
        self._flush()
        self.timings.append(("select", time.perf_counter() - t0))

    def _refresh_tables(self) -> None:
        g = self.grid
        lo, hi = self.ranks.value
        in_range = g.ranks[(g.ranks >= lo) & (g.ranks <= hi)]
        ranks = None if len(in_range) == len(g.ranks) else in_range
        seq, rank = self.seq.value, self.rank.value
        self.at_seq.value = self.model.at_seq_html(g, seq, ranks)
        self.window.value = self.model.window_html(g, rank, seq)
        self.evidence.value = self.model.evidence_html(g, rank, seq)
        n_odd = int(g.odd.sum())
        self.status.value = self.picture.legend_html() + (
            f"<span class='dx-status'>pg {escape(str(g.pg))} · counter {escape(str(g.seq_kind))} · "
            f"{len(g.ranks)} ranks × {len(g.seqs)} seqs · {n_odd} cells differ from their seq's majority · "
            f"chosen: rank {rank}, seq {seq}</span>"
        )

    def _flush(self) -> None:
        if self.canvas is not None:
            self.canvas.draw_idle()
        elif self.image is not None:
            self.image.value = plot.to_png(self.picture.fig)


_SAVED_NOTE = "a snapshot of the live explorer; run the notebook to explore"


def _box_class():
    import ipywidgets as w

    class _ExplorerBox(w.VBox):
        """A VBox whose display bundle also carries the static tables as ``text/html``."""

        def __init__(self, children, static):
            super().__init__(children)
            self._static = static

        def _ipython_display_(self):
            """Displayed after its hidden static view (:mod:`.fallback`: what JupyterLab shows when the
            notebook is reopened with the kernel gone), and with a display id, so that at kernel
            shutdown the live view can be replaced by its static twin (:func:`.kernel.on_shutdown`)."""
            from IPython.display import display

            bundle = self._repr_mimebundle_()
            # an output of its own that JupyterLab shows if the widget cannot render (see .fallback)
            display_fallback(bundle.get("text/html", ""))
            handle = display(bundle, raw=True, display_id=True)
            if handle is not None:
                _LIVE_VIEWS.append((self, handle))
                on_shutdown(_freeze_live_views)

        def _repr_mimebundle_(self, **kwargs):
            bundle = super()._repr_mimebundle_(**kwargs)
            if isinstance(bundle, tuple):
                bundle = bundle[0]
            bundle = dict(bundle or {})
            try:
                bundle["text/html"] = self._static()._repr_html_()
            except Exception as e:  # noqa: BLE001 - the live widget must show even if its twin fails
                bundle["text/html"] = f"<p>(static view unavailable: {escape(str(e))})</p>"
            return bundle

    return _ExplorerBox


#: (box, display handle) of every live explorer shown in this kernel
_LIVE_VIEWS: list = []


def _freeze_live_views() -> None:
    """Replace every live explorer's output by its static tables (the kernel is going away)."""
    while _LIVE_VIEWS:
        box, handle = _LIVE_VIEWS.pop()
        try:
            html = box._static()._repr_html_()
        except Exception as e:  # noqa: BLE001
            html = f"<p>(static view unavailable: {escape(str(e))})</p>"
        handle.update({"text/html": html, "text/plain": "denpex_nb explorer (static snapshot)"}, raw=True)


def ExplorerBox(children, static):  # noqa: N802 - a class made on first use (ipywidgets is optional)
    global _BOX
    if _BOX is None:
        _BOX = _box_class()
    return _BOX(children, static)


_BOX = None
