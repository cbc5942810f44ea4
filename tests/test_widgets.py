"""The explorer: its model (grid, collapsed tables, evidence), the live widgets and their static twin,
and how it decides whether anybody can interact (asked of a real kernel)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
import pytest

import denpex_nb as dx
from denpex_nb import widgets
from denpex_nb.teach import synthetic_incident
from denpex_nb.widgets.grid import aggregate

ROOT = Path(__file__).resolve().parents[1]
W4_DETAIL = ROOT / "data/recorded/gloo/allgather-shape-mismatch/broken-detail-w4"


def test_rank_ranges_read_at_any_size():
    assert widgets.rank_ranges([0, 1, 2, 5, 7, 8]) == "0–2, 5, 7, 8"  # denpex_nb.human's, one spelling
    assert widgets.rank_ranges([300]) == "300"
    assert widgets.rank_ranges(list(range(300)) + list(range(301, 512))) == "0–299, 301–511"
    assert widgets.rank_ranges([]) == ""


def test_at_512_ranks_the_culprit_is_the_first_row_and_the_majority_one_row():
    inc = synthetic_incident(512, 12, mismatch_at=9, culprit=300)
    at = widgets.entries_at(inc, 9)
    assert len(at) == 2, at
    assert at.iloc[0]["ranks"] == "300" and at.iloc[0]["vs majority"] == "differs"
    assert at.iloc[0]["in_shapes"] == "[3,4]"
    assert at.iloc[1]["ranks"] == "0–299, 301–511" and at.iloc[1]["count"] == 511
    assert at.iloc[1]["vs majority"] == "agrees" and at.iloc[1]["in_shapes"] == "[1024,4]"
    # one row per rank on request, still culprit first
    flat = widgets.entries_at(inc, 9, collapse=False)
    assert len(flat) == 512 and flat.iloc[0]["ranks"] == "300"


def test_a_skipped_collective_shows_the_missing_rank_first():
    inc = synthetic_incident(4, 10, mismatch_at=6, culprit=2, kind="skip")
    at = widgets.entries_at(inc, 6)
    assert at.iloc[0]["ranks"] == "2" and at.iloc[0]["vs majority"] == "missing" and at.iloc[0]["op"] == "missing"
    assert at.iloc[-1]["ranks"] == "0, 1, 3" and at.iloc[-1]["count"] == 3
    nowhere = widgets.entries_at(inc, 99)
    assert set(nowhere["vs majority"]) == {"missing"} and nowhere["count"].sum() == 4


def test_rank_window_moves_with_the_seq():
    inc = synthetic_incident(3, 20, mismatch_at=15, culprit=0)
    win = widgets.rank_sequence(inc, 1, around=10, width=2)
    assert win["seq"].tolist() == [8, 9, 10, 11, 12]
    assert win["seq"].tolist() != widgets.rank_sequence(inc, 1, around=5, width=2)["seq"].tolist()
    culprit = widgets.rank_sequence(inc, 0, around=15, width=1)
    assert culprit.set_index("seq").loc[15, "vs majority"] == "differs"


def test_one_odd_cell_among_a_million_stays_visible_when_aggregated_to_the_screen():
    paint = np.ones((512, 2000), dtype=np.int16)
    paint[300, 1500] = 9
    agg = aggregate(paint, (0, 512), (0, 2000), 400, 800)
    assert agg.shape[0] <= 400 and agg.shape[1] <= 800
    assert (agg == 9).sum() == 1
    zoomed = aggregate(paint, (290, 310), (1490, 1510), 400, 800)
    assert zoomed.shape == (20, 20) and zoomed[10, 10] == 9


def test_grid_marks_odd_and_skipped_cells_not_a_rank_that_stopped():
    inc = synthetic_incident(8, 10, mismatch_at=6, culprit=5)
    g = widgets.Grid.build(inc)
    odd = g.odd_cells()
    assert odd.iloc[0].tolist() == [5, 6, "differs"]
    assert g.describe(g.row_of(5), g.col_of(6)).endswith("differs from the majority")
    assert "seq 6" in g.describe(g.row_of(5), g.col_of(6))


def test_every_counter_present_is_offered_and_each_has_its_groups():
    inc = dx.load(str(W4_DETAIL))
    assert set(widgets.counters(inc)) == {"trace", "fr", "detail"}
    assert widgets.counters(inc)[0] == "trace"  # the preference order
    assert widgets.groups(inc, "trace") == ["0"]
    assert widgets.groups(inc, "detail") == []  # DETAIL fingerprints name no group


def test_evidence_lines_are_read_from_the_file_at_the_events_line():
    inc = dx.load(str(W4_DETAIL))
    items = widgets.excerpts(inc, 1, 2, seq_kind="detail")
    text = [ex for ex in items if ex.lines]
    assert text, [ex.note for ex in items]
    ex = text[0]
    assert ex.where.startswith(str(W4_DETAIL)) and ":" in ex.where
    lines = Path(ex.file).read_text(encoding="utf-8", errors="replace").splitlines()
    assert ex.lines[ex.line - ex.first] == lines[ex.line - 1]
    assert "SequenceNumber=2" in ex.lines[ex.line - ex.first]
    assert len(ex.lines) >= 4  # context around it
    fr = widgets.excerpts(inc, 0, 3, seq_kind="fr")
    assert fr and "Flight Recorder dump: entry #" in fr[0].note


def test_static_explorer_collapses_and_says_why_it_is_static():
    inc = synthetic_incident(64, 10, mismatch_at=6, culprit=40)
    ex = widgets.explorer(inc, interactive=False)
    assert isinstance(ex, widgets.StaticExplorer)
    titles = [t for t, _ in ex.tables()]
    assert titles == ["seq 4", "seq 5", "seq 6 (divergence)"]
    at6 = dict(ex.tables())["seq 6 (divergence)"]
    assert at6.iloc[0]["ranks"] == "40" and at6.iloc[-1]["count"] == 63
    html = ex._repr_html_()
    assert "Explorer (static: interactive=False)" in html and "0–39, 41–63" in html
    assert "seq 6" in repr(ex)


def test_headless_outside_a_kernel_and_when_forced(monkeypatch):
    fe = widgets.frontend()
    assert not fe.interactive and "not running in a Jupyter kernel" in fe.why
    monkeypatch.setenv("DENPEX_NB_HEADLESS", "1")
    assert widgets.is_headless() and "DENPEX_NB_HEADLESS" in widgets.frontend().why
    assert isinstance(widgets.explorer(synthetic_incident(2, 3)), widgets.StaticExplorer)


def test_without_ipywidgets_the_explorer_falls_back_with_a_note(monkeypatch):
    monkeypatch.setitem(sys.modules, "ipywidgets", None)  # import ipywidgets -> ImportError
    ex = widgets.explorer(synthetic_incident(4, 8), interactive=True)
    assert isinstance(ex, widgets.StaticExplorer)
    assert "ipywidgets is not installed" in ex._repr_html_() and "pip install" in ex._repr_html_()


def test_a_real_kernel_is_interactive_only_for_a_notebook_frontend(tmp_path):
    """Asked of a real ipykernel: a request from nbclient-like clients (no cellId) is headless,
    one carrying a frontend's cellId (as JupyterLab sends) is interactive."""
    jupyter_client = pytest.importorskip("jupyter_client")
    pytest.importorskip("ipykernel")
    km = jupyter_client.KernelManager(kernel_name="python3")
    env = dict(__import__("os").environ, PYTHONPATH=str(ROOT))
    env.pop("DENPEX_NB_HEADLESS", None)
    km.start_kernel(env=env, cwd=str(tmp_path))
    kc = km.client()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=60)
        code = "from denpex_nb.widgets import frontend; print(repr(frontend()))"

        def run(metadata):
            msg = kc.session.msg("execute_request", {"code": code, "silent": False, "store_history": False})
            msg["metadata"].update(metadata)
            kc.shell_channel.send(msg)
            out, deadline = [], time.monotonic() + 60
            while time.monotonic() < deadline:
                m = kc.get_iopub_msg(timeout=60)
                if m["parent_header"].get("msg_id") != msg["header"]["msg_id"]:
                    continue
                if m["msg_type"] == "stream":
                    out.append(m["content"]["text"])
                if m["msg_type"] == "error":
                    pytest.fail("\n".join(m["content"]["traceback"]))
                if m["msg_type"] == "status" and m["content"]["execution_state"] == "idle":
                    break
            return "".join(out)

        headless = run({})
        assert "interactive=False" in headless and "without a notebook frontend" in headless
        live = run({"cellId": "6a3b1f0e-0000-4000-8000-000000000001"})
        assert "interactive=True" in live and "notebook frontend" in live
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def test_interactive_explorer_links_findings_pickers_picture_and_tables():
    w = pytest.importorskip("ipywidgets")
    inc = dx.load(str(W4_DETAIL))
    box = widgets.explorer(inc, interactive=True)
    assert isinstance(box, w.VBox)
    ex = box.explorer
    assert set(ex.counter.options) == {"trace", "fr", "detail"}
    # every finding is offered; going to one moves counter, seq and rank to it
    assert len(ex.finding.options) == len(ex.model.findings) >= 1
    f = ex.model.findings[0]
    before = ex.at_seq.value
    ex.counter.value = "detail" if f.seq_kind != "detail" else "fr"  # wander off to another counter ...
    assert ex.grid.seq_kind != f.seq_kind and ex.at_seq.value != before
    ex.go.click()  # ... and jump back
    assert ex.counter.value == f.seq_kind and ex.seq.value == f.seq
    if f.culprit_ranks:
        assert ex.rank.value == f.culprit_ranks[0]
    # another counter: its own grid, its own seqs
    ex.counter.value = "detail"
    assert ex.grid.seq_kind == "detail" and "counter detail" in ex.at_seq.value
    ex.rank.value, ex.seq.value = 1, 2
    assert "Every rank at seq 2" in ex.at_seq.value and ex.at_seq.value != before
    assert "Rank 1 around seq 2" in ex.window.value
    assert "combined.log:" in ex.evidence.value or "stderr.log:" in ex.evidence.value
    # stepping and the op filter
    ex.next.click()
    assert ex.seq.value > 2 or ex.seq.value == ex.seq.max
    ex.op.value = ex.op.options[1]
    assert ex.picture.allowed_ops == {ex.op.options[1]}
    # the static twin rides along in the display bundle
    bundle = box._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert "Explorer (static: a snapshot of the live explorer" in bundle["text/html"]


def test_clicking_a_cell_of_the_picture_selects_that_rank_and_seq():
    pytest.importorskip("ipympl")
    from matplotlib.backend_bases import MouseEvent

    inc = synthetic_incident(8, 12, mismatch_at=9, culprit=5)
    ex = widgets.explorer(inc, interactive=True).explorer
    assert ex.canvas is not None
    g = ex.grid
    i, j = g.row_of(3), g.col_of(4)
    ex.picture.view()
    x, y = ex.picture.ax.transData.transform((j, i))
    ev = MouseEvent("button_press_event", ex.canvas, x, y, button=1)
    ex.canvas.callbacks.process("button_press_event", ev)
    assert (ex.rank.value, ex.seq.value) == (3, 4)
    assert "Every rank at seq 4" in ex.at_seq.value


def test_choosing_a_seq_at_512_ranks_answers_fast_in_the_kernel():
    """Not a timed bar (benchmarks/bench_explorer.py measures it in the browser): a sanity check
    that a selection does no work proportional to the whole incident."""
    pytest.importorskip("ipywidgets")
    inc = synthetic_incident(512, 200, mismatch_at=150, culprit=300)
    ex = widgets.explorer(inc, interactive=True).explorer
    assert ex.rank.value == 300 and ex.seq.value == 150
    assert ex.at_seq.value.count("<tr") <= 4  # header + culprit + majority
    for s in (10, 150, 199):
        ex.seq.value = s
    assert len(ex.timings) >= 3 and all(t < 5.0 for _, t in ex.timings)


def test_evidence_without_collectives_gets_a_static_explorer_that_says_so():
    from denpex_nb.incident import Incident

    empty = Incident()
    assert widgets.Grid.build(empty).odd_cells().empty
    ex = widgets.explorer(empty, interactive=True)
    assert isinstance(ex, widgets.StaticExplorer)
    assert "no sequenced collectives" in ex._repr_html_() and "No collective events" in ex._repr_html_()


def test_process_group_and_rank_range_filters_change_the_grid_and_the_tables():
    pytest.importorskip("ipywidgets")
    import pandas as pd

    from denpex_nb.incident import Incident

    a = synthetic_incident(8, 10, mismatch_at=6, culprit=5).events
    b = synthetic_incident(8, 4, mismatch_at=None).events
    b = b.assign(pg=b["pg"].astype(str).replace("0", "7"))
    inc = Incident(events=pd.concat([a.assign(pg=a["pg"].astype(str)), b], ignore_index=True))
    ex = widgets.explorer(inc, interactive=True).explorer
    assert list(ex.pg.options) == ["0", "7"] and ex.pg.value == "0"
    assert "8 ranks × 6 seqs" in ex.status.value
    ex.pg.value = "7"
    assert ex.grid.pg == "7" and "8 ranks × 4 seqs" in ex.status.value and "pg 7" in ex.at_seq.value
    ex.pg.value = "0"
    ex.seq.value = 6
    assert "8 ranks, 1 not agreeing" in ex.at_seq.value
    ex.ranks.value = (0, 3)  # rank 5, the odd one, is outside the range now
    assert "4 ranks, 0 not agreeing" in ex.at_seq.value
    y0, y1 = sorted(ex.picture.ax.get_ylim())
    assert (y0, y1) == (-0.5, 3.5)  # the picture shows rows 0-3 only


def test_the_hidden_static_view_is_revealed_only_where_a_widget_renderer_failed():
    """The stylesheet's two rules name the failed renderer's exact state (its node has the class
    ``jupyter-widgets`` and the widget MIME type), so a live widget (no such class) keeps it hidden."""
    from denpex_nb.widgets.fallback import FALLBACK_CLASS, fallback_html

    html = fallback_html("<p>tables & <b>ranks</b></p>")
    assert html.count("<style>") == 1 and html.startswith(f"<div class='{FALLBACK_CLASS}' style='display:none'><style>")
    assert "<p>tables & <b>ranks</b></p>" in html  # the static view itself, untouched
    failed = ".jp-OutputArea-output.jupyter-widgets"
    assert f".jp-OutputArea:has({failed}) .{FALLBACK_CLASS}{{display:block !important}}" in html
    assert f".jp-OutputArea-child:has({failed}){{display:none}}" in html
    assert ":has(:has(" not in html  # nested :has() is invalid CSS: the whole rule would be dropped


def test_at_kernel_shutdown_a_live_explorer_becomes_its_static_tables(tmp_path):
    """A real kernel: the explorer is displayed with a display id, and when the kernel is asked to
    shut down it replaces that output by its static tables (what a notebook saved afterwards keeps)."""
    jupyter_client = pytest.importorskip("jupyter_client")
    pytest.importorskip("ipywidgets")
    km = jupyter_client.KernelManager(kernel_name="python3")
    env = dict(__import__("os").environ, PYTHONPATH=str(ROOT), MPLBACKEND="Agg")
    km.start_kernel(env=env, cwd=str(tmp_path))
    kc = km.client()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=60)
        code = (
            "import denpex_nb as dx\n"
            "from denpex_nb.teach import synthetic_incident\n"
            "dx.widgets.explorer(synthetic_incident(8, 10, mismatch_at=6, culprit=5), interactive=True)"
        )
        msg_id = kc.execute(code)
        shown, fallback, fallback_first, deadline = None, None, False, time.monotonic() + 120
        while time.monotonic() < deadline:
            m = kc.get_iopub_msg(timeout=120)
            if m["parent_header"].get("msg_id") != msg_id:
                continue
            if m["msg_type"] == "error":
                pytest.fail("\n".join(m["content"]["traceback"]))
            if m["msg_type"] == "display_data" and "dx-fallback" in m["content"]["data"].get("text/html", ""):
                fallback, fallback_first = m["content"]["data"], shown is None
            if m["msg_type"] == "display_data" and "application/vnd.jupyter.widget-view+json" in m["content"]["data"]:
                shown = m["content"]
            if m["msg_type"] == "status" and m["content"]["execution_state"] == "idle":
                break
        assert shown is not None, "the explorer was not displayed as a widget"
        # before it, its static view as an output of its own, hidden until the widget cannot render
        assert fallback is not None and fallback_first, "no hidden static view before the widget"
        assert "dx-fallback" in fallback["text/html"] and "display:none" in fallback["text/html"]
        assert "Explorer (static: a snapshot" in fallback["text/html"]
        display_id = shown["transient"]["display_id"]
        assert "Explorer (static: a snapshot" in shown["data"]["text/html"]  # the twin rides along
        kc.shutdown()
        frozen, deadline = None, time.monotonic() + 60
        while frozen is None and time.monotonic() < deadline:
            m = kc.get_iopub_msg(timeout=60)
            if m["msg_type"] == "update_display_data" and m["content"]["transient"].get("display_id") == display_id:
                frozen = m["content"]["data"]
        assert frozen is not None, "no update of the explorer's output at shutdown"
        assert "application/vnd.jupyter.widget-view+json" not in frozen
        assert "Explorer (static: a snapshot of the live explorer" in frozen["text/html"] and "5" in frozen["text/html"]
    finally:
        kc.stop_channels()
        if km.has_kernel:  # reaps the process whether or not it already exited
            km.shutdown_kernel(now=True)


def test_when_most_ranks_have_no_entry_the_few_that_do_are_the_odd_ones():
    from denpex_nb.incident import Incident

    ev = synthetic_incident(4, 6, mismatch_at=None).events
    ev = ev[~((ev["seq"] == 6) & (ev["rank"] != 0))]  # only rank 0 went on to seq 6
    at = widgets.entries_at(Incident(events=ev), 6)
    assert at.iloc[0]["ranks"] == "0" and at.iloc[0]["vs majority"] == "differs"
    assert at.iloc[-1]["ranks"] == "1–3" and at.iloc[-1]["vs majority"] == "missing"
