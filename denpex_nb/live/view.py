"""A live view of a running job in JupyterLab: ``dx.watch(path)`` shown in a cell.

The watcher polls in a background thread, so the kernel stays free; the view redraws about once a
second: the findings (highlighted the moment one appears), each rank's current position (ranks
that stand at the same place are one row, written as a range), and the last collectives of every
rank as a growing swimlane (one column per collective, coloured by op, the diverging one
outlined). Without ipywidgets, or headless, it shows the same content once, as HTML.
"""

from __future__ import annotations

import html
import io
import threading
import time
from collections import defaultdict

from ..analysis.rules import fmt_ranks
from ..vocab import State

#: collectives per rank in the swimlane
WINDOW = 40


def positions_html(watcher) -> str:
    """Ranks grouped by where they stand now, as an HTML table (ranges, not lists)."""
    state = watcher.state
    now = state.clock()
    groups: dict[str, list[int]] = defaultdict(list)
    for rank, r in sorted(state.ranks.items()):
        inside = [
            (pg, s, c)
            for pg, g in state.groups.items()
            for s, n in g.open.items()
            if n > 0 and (c := g.calls[s].get(rank)) is not None and c.row["state"] == State.SCHEDULED
        ]
        if r.ended_at is not None:
            where = "process ended"
        elif inside:
            pg, s, c = min(inside, key=lambda t: (t[0], t[1]))
            where = f"inside {c.row.get('op')} #{s} (pg {pg}) for {now - c.seen:.0f} s"
        else:
            last = ", ".join(f"#{s} (pg {pg})" for pg, s in sorted(r.last_issued.items())) or "nothing yet"
            where = f"between collectives; last entered {last}"
        groups[where].append(rank)
    for rank in watcher.absent_ranks():
        groups["no trace yet"].append(rank)
    rows = "".join(
        f"<tr><td>{html.escape(fmt_ranks(ranks))}</td><td>{html.escape(where)}</td></tr>"
        for where, ranks in sorted(groups.items(), key=lambda kv: kv[1][0])
    )
    return f"<table><tr><th>ranks</th><th>where they are</th></tr>{rows}</table>" if rows else "<i>no rank yet</i>"


def findings_html(watcher) -> str:
    if not watcher.reported:
        return "<div>no finding so far</div>"
    items = "".join(
        f"<li style='color:#b00020'><b>{html.escape(f.finding.class_id)}</b> at "
        f"{html.escape(f.finding.where() or 'unknown collective')}: {html.escape(f.finding.summary)}</li>"
        for f in watcher.reported
    )
    return f"<ul class='denpex-live-findings'>{items}</ul>"


def swimlane_png(watcher, pg: str | None = None) -> bytes | None:
    """The last :data:`WINDOW` collectives of each rank in group ``pg`` (the busiest by default)."""
    state = watcher.state
    if not state.groups:
        return None
    pg = pg if pg in state.groups else max(state.groups, key=lambda p: len(state.groups[p].calls))
    g = state.groups[pg]
    seqs = sorted(g.calls)[-WINDOW:]
    ranks = sorted(g.members() | set(state.ranks))
    if not seqs or not ranks:
        return None
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt
    import numpy as np

    ops = sorted({str(c.row.get("op")) for s in seqs for c in g.calls[s].values()})
    code = {op: i + 1 for i, op in enumerate(ops)}
    grid = np.zeros((len(ranks), len(seqs)))
    index = {r: i for i, r in enumerate(ranks)}
    for j, s in enumerate(seqs):
        for r, c in g.calls[s].items():
            if r in index:
                grid[index[r], j] = code[str(c.row.get("op"))] + (0.5 if c.row["state"] == State.SCHEDULED else 0)
    fig, ax = plt.subplots(figsize=(8, min(6, 1 + 0.25 * len(ranks))), dpi=80)
    ax.imshow(grid, aspect="auto", interpolation="nearest", cmap="tab20", vmin=0, vmax=max(2, len(ops) + 1))
    ax.set_xlabel(f"collective # (pg {pg}); pale: still inside; blank: not entered")
    ax.set_ylabel("rank")
    ax.set_xticks(range(0, len(seqs), max(1, len(seqs) // 10)), [str(s) for s in seqs][:: max(1, len(seqs) // 10)])
    for f in watcher.reported:
        if f.finding.pg == pg and f.finding.seq in seqs:
            x = seqs.index(f.finding.seq)
            ax.axvspan(x - 0.5, x + 0.5, fill=False, edgecolor="red", linewidth=2)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()


def snapshot_html(watcher) -> str:
    """Everything the live view shows, once, as HTML (the fallback without widgets)."""
    import base64

    png = swimlane_png(watcher)
    img = f"<img src='data:image/png;base64,{base64.b64encode(png).decode()}'/>" if png else ""
    return (
        f"<div class='denpex-live'><b>denpex-nb watch</b> (snapshot)<h4>Findings</h4>{findings_html(watcher)}"
        f"<h4>Where each rank is</h4>{positions_html(watcher)}{img}</div>"
    )


class LiveView:
    """The widget and the thread that keeps it current; :meth:`stop` ends both."""

    def __init__(self, watcher, refresh_s: float = 1.0):
        import ipywidgets as w

        self.watcher = watcher
        self.refresh_s = refresh_s
        self.status = w.HTML()
        self.findings = w.HTML()
        self.positions = w.HTML()
        self.lane = w.Image(format="png")
        self.widget = w.VBox(
            [
                self.status,
                w.HTML("<h4>Findings</h4>"),
                self.findings,
                w.HTML("<h4>Where each rank is</h4>"),
                self.positions,
                self.lane,
            ]
        )
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="denpex-live-view", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        drawn = 0.0
        while not self._stop.is_set():
            try:
                self.watcher.poll()
                reason = self.watcher.ended()
                if time.monotonic() - drawn >= self.refresh_s or reason:
                    self.refresh(reason)
                    drawn = time.monotonic()
                if reason:
                    return
            except Exception as e:  # a view that dies says why instead of freezing silently
                self.status.value = f"<b>watching stopped</b>: {html.escape(type(e).__name__)}: {html.escape(str(e))}"
                return
            self._stop.wait(self.watcher.interval)
        self.watcher.close()

    def refresh(self, reason: str | None = None) -> None:
        w = self.watcher
        files = len(w.trace.tails) + len(w.other.tails)
        head = reason or (w.waiting_for() or f"watching {files} file(s), {len(w.state.ranks)} rank(s)")
        self.status.value = f"<b>denpex-nb watch</b>: {html.escape(head)}; stall time {w.state.stall_s():.1f} s"
        self.findings.value = findings_html(w)
        self.positions.value = positions_html(w)
        png = swimlane_png(w)
        if png:
            self.lane.value = png

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)
