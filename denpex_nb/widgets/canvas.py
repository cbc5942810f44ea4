"""The explorer's picture: ranks x seqs, zoomable and pannable, aggregated to the view.

Why aggregated: 512 ranks x 2000 collectives is a million cells; one artist per cell would take
seconds per redraw. The picture is one image whose pixels are recomputed from
:func:`grid.aggregate` whenever the visible range changes (each block keeps its highest code,
so an odd cell stays red at any zoom). In JupyterLab the figure lives on an ipympl canvas
(zoom, pan, hover text, click to pick a cell); without ipympl the same figure is sent as a PNG
after each change (no zoom), and the explorer says so.
"""

from __future__ import annotations

import numpy as np
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle
from matplotlib.ticker import FuncFormatter, MaxNLocator

from .. import plot
from .grid import Grid, aggregate

ODD_COLOR = plot.DIVERGE_COLOR
MISSING_COLOR = "#c8c8c8"
SELECT_COLOR = "#111111"


class Picture:
    """The figure of one :class:`Grid`, with a selected cell and a divergence line."""

    def __init__(self, width_px: int = 960, height_px: int = 420):
        # a fixed layout and no legend inside the figure: each redraw costs text layout, and the
        # legend is HTML beside the picture (:meth:`legend_html`)
        self.fig = Figure(figsize=(width_px / 100, height_px / 100), dpi=100)
        self.fig.subplots_adjust(left=0.06, right=0.995, top=0.93, bottom=0.11)
        self.ax = self.fig.add_subplot(1, 1, 1)
        self.ax.tick_params(labelsize=8)
        self.max_cols, self.max_rows = width_px, height_px
        self.grid: Grid | None = None
        self.allowed_ops: set[str] | None = None
        self._image = None
        self._busy = False
        self._select = Rectangle((0, 0), 1, 1, fill=False, edgecolor=SELECT_COLOR, linewidth=1.6, zorder=5)
        self._hline = self.ax.axhline(0, color=SELECT_COLOR, linewidth=0.5, alpha=0.5, zorder=4)
        self._vline = self.ax.axvline(0, color=SELECT_COLOR, linewidth=0.5, alpha=0.5, zorder=4)
        self._div = self.ax.axvline(0, color=ODD_COLOR, linewidth=1.0, linestyle="--", zorder=4, visible=False)
        self.ax.add_patch(self._select)
        # rows holding an odd cell in view, marked beside the axis: a one-pixel row is easy to miss
        self._odd_rows = self.ax.scatter(
            [], [], marker=">", s=28, color=ODD_COLOR, clip_on=False, zorder=6, transform=self.ax.get_yaxis_transform()
        )
        self.ax.set_autoscale_on(False)
        self.ax.callbacks.connect("xlim_changed", self._on_view)
        self.ax.callbacks.connect("ylim_changed", self._on_view)

    # --- content ----------------------------------------------------------------------------------

    def show(self, grid: Grid, *, allowed_ops=None, divergence_seq=None, title: str = "") -> None:
        """Draw ``grid`` (all of it in view), ops outside ``allowed_ops`` left blank."""
        self.grid, self.allowed_ops = grid, (set(allowed_ops) if allowed_ops else None)
        ax = self.ax
        n_ops = len(grid.op_names)
        colors = ["white"] + [plot.OP_COLORS.get(o, plot.OP_COLORS["unknown"]) for o in grid.op_names]
        cmap = ListedColormap(colors + [MISSING_COLOR, ODD_COLOR])
        if self._image is not None:
            self._image.remove()
        self._image = ax.imshow(
            np.zeros((1, 1), dtype=np.int16),
            cmap=cmap,
            vmin=-0.5,
            vmax=n_ops + 2.5,
            interpolation="nearest",
            aspect="auto",
            origin="upper",
            zorder=1,
        )
        ax.xaxis.set_major_formatter(FuncFormatter(self._seq_tick))
        ax.yaxis.set_major_formatter(FuncFormatter(self._rank_tick))
        ax.xaxis.set_major_locator(MaxNLocator(integer=True, nbins=10))
        ax.yaxis.set_major_locator(MaxNLocator(integer=True, nbins=8))
        ax.set_xlabel(f"sequence number ({grid.seq_kind or 'no counter'})", fontsize=8)
        ax.set_ylabel(f"{len(grid.ranks)} ranks", fontsize=8)
        ax.set_title(title or f"pg {grid.pg}, counter {grid.seq_kind}", fontsize=9, loc="left")
        ax.format_coord = self._hover
        self._legend = list(zip(grid.op_names, colors[1:])) + [("missing", MISSING_COLOR), ("differs", ODD_COLOR)]
        col = grid.col_of(divergence_seq) if divergence_seq is not None else None
        self._div.set_visible(col is not None)
        if col is not None:
            self._div.set_xdata([col, col])
        self.view()

    def legend_html(self) -> str:
        """The colours of the picture, as HTML (kept out of the figure: cheaper redraws)."""
        from html import escape

        from matplotlib.colors import to_hex

        items = "".join(
            f"<span style='display:inline-block;margin-right:10px'><span style='display:inline-block;width:10px;"
            f"height:10px;background:{to_hex(c)};border:1px solid #999;margin-right:3px'></span>{escape(str(n))}</span>"
            for n, c in getattr(self, "_legend", [])
        )
        return f"<div class='dx-legend' style='font-size:11px'>{items}</div>"

    def view(self, rows: tuple[int, int] | None = None, cols: tuple[int, int] | None = None) -> None:
        """Set the visible rows/cols (index ranges, inclusive); None: everything."""
        g = self.grid
        if g is None:
            return
        r0, r1 = rows if rows is not None else (0, max(len(g.ranks) - 1, 0))
        c0, c1 = cols if cols is not None else (0, max(len(g.seqs) - 1, 0))
        self._busy = True
        try:
            self.ax.set_xlim(c0 - 0.5, c1 + 0.5)
            self.ax.set_ylim(r1 + 0.5, r0 - 0.5)
        finally:
            self._busy = False
        self._on_view()

    def select(self, row: int | None, col: int | None) -> None:
        """Outline the chosen cell; pan so that it is in view (keeping the zoom)."""
        if row is None or col is None:
            self._select.set_visible(False)
            return
        self._select.set_visible(True)
        self._select.set_xy((col - 0.5, row - 0.5))
        self._hline.set_ydata([row, row])
        self._vline.set_xdata([col, col])
        x0, x1 = sorted(self.ax.get_xlim())
        y0, y1 = sorted(self.ax.get_ylim())
        if not (x0 <= col <= x1 and y0 <= row <= y1):
            w, h = x1 - x0, y1 - y0
            nx0 = col - w / 2 if not x0 <= col <= x1 else x0
            ny0 = row - h / 2 if not y0 <= row <= y1 else y0
            self._busy = True
            try:
                self.ax.set_xlim(nx0, nx0 + w)
                self.ax.set_ylim(ny0 + h, ny0)
            finally:
                self._busy = False
            self._on_view()

    def zoom_to(self, row: int, col: int, half_cols: int = 20) -> None:
        """Columns ``col ± half_cols``, every rank: where a finding lies."""
        g = self.grid
        if g is None:
            return
        c0, c1 = max(0, col - half_cols), min(len(g.seqs) - 1, col + half_cols)
        self.view(None, (c0, c1))
        self.select(row, col)

    # --- internals ---------------------------------------------------------------------------------

    def _on_view(self, *_):
        if self._busy or self.grid is None or self._image is None:
            return
        g = self.grid
        if not len(g.ranks) or not len(g.seqs):
            self._image.set_data(np.zeros((1, 1), dtype=np.int16))
            return
        x0, x1 = sorted(self.ax.get_xlim())
        y0, y1 = sorted(self.ax.get_ylim())
        c0 = int(np.clip(np.floor(x0 + 0.5), 0, len(g.seqs) - 1))
        c1 = int(np.clip(np.ceil(x1 - 0.5), c0, len(g.seqs) - 1))
        r0 = int(np.clip(np.floor(y0 + 0.5), 0, len(g.ranks) - 1))
        r1 = int(np.clip(np.ceil(y1 - 0.5), r0, len(g.ranks) - 1))
        paint = g.paint
        if self.allowed_ops is not None:
            keep = np.array([o in self.allowed_ops for o in g.op_names] + [True, True])
            n = len(g.op_names)
            blank = ~keep[np.clip(paint - 1, 0, n + 1)] & (paint > 0) & (paint <= n)
            paint = np.where(blank, 0, paint).astype(np.int16)
        box = self.ax.get_window_extent()  # the axes in pixels: never more blocks than pixels
        max_rows = int(max(8, min(self.max_rows, box.height)))
        max_cols = int(max(8, min(self.max_cols, box.width)))
        agg = aggregate(paint, (r0, r1 + 1), (c0, c1 + 1), max_rows, max_cols)
        rows = np.nonzero(g.odd[r0 : r1 + 1, c0 : c1 + 1].any(axis=1))[0] + r0
        self._odd_rows.set_offsets(
            np.column_stack([np.full(len(rows), -0.012), rows]) if len(rows) else np.empty((0, 2))
        )
        self._image.set_data(agg)
        self._image.set_extent((c0 - 0.5, c1 + 0.5, r1 + 0.5, r0 - 0.5))

    def _seq_tick(self, x, _pos=None) -> str:
        g = self.grid
        j = int(round(x))
        return str(g.seqs[j]) if g is not None and 0 <= j < len(g.seqs) else ""

    def _rank_tick(self, y, _pos=None) -> str:
        g = self.grid
        i = int(round(y))
        return str(g.ranks[i]) if g is not None and 0 <= i < len(g.ranks) else ""

    def _hover(self, x, y) -> str:
        g = self.grid
        return g.describe(int(round(y)), int(round(x))) if g is not None else ""


def live_canvas(fig: Figure):
    """An ipympl canvas widget for ``fig`` (zoom, pan, hover, clicks), or None without ipympl."""
    try:
        from ipympl.backend_nbagg import Canvas, FigureManager
    except ImportError:
        return None
    canvas = Canvas(fig)
    FigureManager(canvas, 0)  # gives the canvas its toolbar (zoom, pan, home)
    canvas.header_visible = False
    canvas.footer_visible = True  # the hover text: rank, seq and the entry under the pointer
    canvas.resizable = False
    canvas.capture_scroll = False
    return canvas
