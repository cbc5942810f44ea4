"""Pictures: readable at 2..512 ranks, divergence highlighted, culprits marked, never pyplot."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure

from denpex_nb import plot
from denpex_nb.analysis.model import Diagnosis, Finding, RankView
from denpex_nb.incident import Incident
from denpex_nb.teach import synthetic_incident

ROOT = Path(__file__).resolve().parents[1]


def _texts(fig: Figure) -> str:
    out = []
    for ax in fig.axes:
        out += [t.get_text() for t in ax.texts]
        out += [t.get_text() for t in ax.get_yticklabels()]
        out.append(ax.get_title(loc="left"))
        leg = ax.get_legend()
        if leg is not None:
            out += [t.get_text() for t in leg.get_texts()]
    return "\n".join(out)


def _png_ok(fig: Figure) -> bytes:
    png = plot.to_png(fig)
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000
    return png


@pytest.mark.parametrize("n_ranks", [2, 8, 64])
def test_swimlane_lanes_show_every_rank_and_the_divergence(n_ranks):
    inc = synthetic_incident(n_ranks, 10, mismatch_at=6, culprit=1, kind="shape")
    fig = plot.swimlane(inc)
    assert isinstance(fig, Figure)
    _png_ok(fig)
    text = _texts(fig)
    assert "diverges at seq 6" in text
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert labels == [f"rank {r}" for r in range(n_ranks)]
    # the shapes are readable at the divergence: rank 1's odd shape is written on the picture
    assert "[3,4]" in text
    if n_ranks > 2:  # a strict majority exists: rank 1 is the culprit and its label is red
        red = [t.get_text() for t in fig.axes[0].get_yticklabels() if t.get_color() == plot.CULPRIT_COLOR]
        assert red == ["rank 1"]


def test_swimlane_marks_gaps_errors_and_timeouts():
    inc = synthetic_incident(8, 10, mismatch_at=6, culprit=3, kind="skip")
    fig = plot.swimlane(inc)
    text = _texts(fig)
    assert "missing" in text  # rank 3 never issued seq 6: a dotted gap
    assert "timeout" in text  # the others' recv timeouts sit on their lanes
    assert "timed out / failed" in text
    shapes = plot.shapes_frame(inc)
    assert shapes.loc[3, "op"] == "missing" and bool(shapes.loc[3, "minority"])


def test_swimlane_time_axis_and_annotations():
    inc = synthetic_incident(4, 8, mismatch_at=5, culprit=2)
    fig = plot.swimlane(inc, x="time")
    assert "time since first event" in fig.axes[0].get_xlabel()
    _png_ok(fig)
    with pytest.raises(ValueError):
        plot.swimlane(inc, x="wallclock")


def test_swimlane_becomes_a_heatmap_beyond_the_threshold_and_names_the_culprit():
    inc = synthetic_incident(512, 200, mismatch_at=200, culprit=300)
    fig = plot.swimlane(inc)
    assert len(fig.axes) == 2  # per-seq "odd ranks" strip + the ranks x seq image
    assert fig.axes[1].get_images(), "expected an image, one row per rank"
    text = _texts(fig)
    assert "rank 300 ◀" in text and "diverges at seq 200" in text
    _png_ok(fig)


def test_diagnosis_decides_the_highlight_and_the_counter():
    inc = synthetic_incident(2, 6, mismatch_at=4, culprit=1)
    diag = Diagnosis(
        findings=[
            Finding(
                "shape-mismatch",
                "x",
                pg="0",
                seq=4,
                seq_kind="trace",
                op="all_reduce",
                culprit_ranks=[1],
                ranks={0: RankView("all_reduce", 4, [[1024, 4]]), 1: RankView("all_reduce", 4, [[3, 4]])},
            )
        ]
    )
    fig = plot.swimlane(inc, diag)
    assert "diverges at seq 4" in _texts(fig)
    styled = plot.shapes_table(inc, diag)
    html = styled.to_html()
    assert "background-color: #fdd" in html
    df = plot.shapes_frame(inc, diag)
    assert df["minority"].tolist() == [False, True]
    assert df.loc[1, "in_shapes"] == "[3,4]"


def test_choose_seq_kind_prefers_trace_then_fr_and_lets_the_caller_pick():
    a = synthetic_incident(2, 4, mismatch_at=None, seq_kind="work")
    b = synthetic_incident(2, 4, mismatch_at=None, seq_kind="fr")
    c = synthetic_incident(2, 4, mismatch_at=None, seq_kind="trace")
    inc = Incident(events=pd.concat([a.events, b.events, c.events], ignore_index=True))
    assert plot.choose_seq_kind(inc) == "trace"
    inc2 = Incident(events=pd.concat([a.events, b.events], ignore_index=True))
    assert plot.choose_seq_kind(inc2) == "fr"
    assert plot.choose_seq_kind(inc2, prefer="work") == "work"
    assert plot.lanes(inc2, "work").seq_kind == "work"


def test_progress_bars_name_the_rank_that_is_behind():
    inc = synthetic_incident(8, 10, mismatch_at=6, culprit=5, kind="skip")
    df = plot.progress_frame(inc)
    assert df.index[df["behind"]].tolist() == [5]
    fig = plot.progress_bars(inc)
    red = [t.get_text() for t in fig.axes[0].get_yticklabels() if t.get_color() == plot.CULPRIT_COLOR]
    assert red == ["rank 5"]
    _png_ok(plot.progress_bars(synthetic_incident(512, 20, mismatch_at=10, culprit=7, kind="skip")))


def test_empty_incident_draws_a_message_not_an_exception():
    inc = Incident()
    for fig in (plot.swimlane(inc), plot.progress_bars(inc)):
        assert isinstance(fig, Figure)
        plot.to_png(fig)
    assert "no collective events" in _texts(plot.swimlane(inc))
    assert plot.shapes_frame(inc).empty


def test_real_nccl_style_log_without_shapes_shows_element_counts():
    import warnings

    import denpex_nb as dx

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        inc = dx.load(str(ROOT / "data/illustrative/nccl/allgather-shape-mismatch"))
    if inc.events.empty:
        pytest.skip("the NCCL/c10d readers produced no events from the illustrative log")
    fig = plot.swimlane(inc)
    text = _texts(fig)
    assert "numel=20" in text and "numel=12" in text


def test_plots_never_import_pyplot_and_figures_show_themselves():
    code = (
        "import sys; from denpex_nb import plot; from denpex_nb.teach import synthetic_incident;"
        "i = synthetic_incident(4, 6); f = plot.swimlane(i); png = f._repr_png_();"
        "plot.progress_bars(i); plot.shapes_table(i).to_html();"
        "assert png[:4] == b'\\x89PNG'; assert 'matplotlib.pyplot' not in sys.modules, 'pyplot imported'"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]


def test_lanes_keep_one_row_per_rank_and_seq_with_the_shapes_of_the_issue_line():
    inc = synthetic_incident(2, 3, mismatch_at=None)
    done = inc.events.copy()
    done["in_shapes"] = None
    done["state"] = "completed"
    issued = inc.events.copy()
    issued["state"] = "scheduled"
    both = Incident(events=pd.concat([issued, done], ignore_index=True).pipe(lambda d: d))
    from denpex_nb.incident import coerce

    both.events = coerce("events", both.events)
    ln = plot.lanes(both)
    assert len(ln.frame) == 6
    assert set(ln.frame["state"]) == {"completed"}
    assert all(lab != "?" for lab in ln.frame["label"]), "shapes from the issue line were lost"
    assert np.array_equal(ln.seqs, [1, 2, 3])


def test_heatmap_x_time_really_plots_time_and_says_so_without_a_clock():
    inc = synthetic_incident(80, 30, mismatch_at=20, culprit=7)
    by_seq, by_time = plot.swimlane(inc), plot.swimlane(inc, x="time")
    assert by_seq.axes[1].get_xlabel() == "sequence number"
    assert "time since first event" in by_time.axes[1].get_xlabel()
    # the x range is seconds (30 collectives 50 ms apart), not seq numbers 1..30
    lo, hi = by_time.axes[1].get_xlim()
    assert hi - lo < 3.0 and lo < 0.1
    no_clock = Incident(events=inc.events.assign(t_wall=pd.NaT, t_mono=pd.NA))
    few = synthetic_incident(4, 8)
    few_no_clock = Incident(events=few.events.assign(t_wall=pd.NaT, t_mono=pd.NA))
    for fig in (plot.swimlane(no_clock, x="time"), plot.swimlane(few_no_clock, x="time")):
        said = "\n".join(a.get_xlabel() for a in fig.axes) + _texts(fig)
        assert "x='time' cannot be drawn" in said


def _scatter_points(ax, label):
    for coll in ax.collections:
        if coll.get_label() == label:
            return coll.get_offsets()
    return None


@pytest.mark.parametrize("x", ["seq", "time"])
def test_exit_markers_are_never_drawn_before_the_ranks_collectives(x):
    """The launcher's exit time is a whole-second start plus a duration: it can read earlier than
    the collectives the rank ran. An ending is drawn after the rank's last collective."""
    from denpex_nb import load

    inc = load(str(ROOT / "data/recorded/gloo/allgather-shape-mismatch/broken-detail-w4"))
    exits = inc.errors[inc.errors["kind"].astype(str) == "exit"]
    ev = inc.events[inc.events["seq_kind"].astype(str) == "trace"]
    assert (exits["t_wall"] < ev["t_wall"].min()).any(), "the recorded run no longer shows the early exit time"
    fig = plot.swimlane(inc, x=x, seq_kind="trace")
    ax = fig.axes[0]
    errs = _scatter_points(ax, "error")
    assert errs is not None and len(errs)
    marks = np.concatenate(
        [c.get_offsets() for c in ax.collections if c.get_label() not in ("error", "timeout") and len(c.get_offsets())]
    )
    for ex, ey in errs:  # each rank's ending sits after that rank's own last collective
        lane = marks[np.isclose(marks[:, 1], ey)]
        assert len(lane) and ex >= lane[:, 0].max() - 1e-9, (ex, ey, lane[:, 0].max())
