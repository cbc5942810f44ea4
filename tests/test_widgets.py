"""The explorer: pickers and a seq slider in JupyterLab, static tables when headless."""

from __future__ import annotations

import pytest

from denpex_nb import widgets
from denpex_nb.teach import synthetic_incident


def test_headless_explorer_is_static_and_shows_every_rank_around_the_divergence():
    inc = synthetic_incident(4, 10, mismatch_at=6, culprit=2, kind="skip")
    ex = widgets.explorer(inc, interactive=False)
    assert isinstance(ex, widgets.StaticExplorer)
    html = ex._repr_html_()
    assert "Explorer (static" in html and "seq 6 (divergence)" in html
    titles = [t for t, _ in ex.tables()]
    assert titles == ["seq 4", "seq 5", "seq 6 (divergence)"]
    at6 = dict(ex.tables())["seq 6 (divergence)"]
    assert list(at6.index) == [0, 1, 2, 3]
    assert at6.loc[2, "op"] == "missing" and at6.loc[0, "op"] == "all_reduce"
    assert "seq 6" in repr(ex)


def test_headless_is_detected_from_the_environment(monkeypatch):
    monkeypatch.setenv("DENPEX_NB_HEADLESS", "1")
    assert widgets.is_headless()
    assert isinstance(widgets.explorer(synthetic_incident(2, 3)), widgets.StaticExplorer)


def test_interactive_explorer_has_rank_and_pg_pickers_and_a_seq_slider():
    w = pytest.importorskip("ipywidgets")
    inc = synthetic_incident(4, 10, mismatch_at=6, culprit=1)
    box = widgets.explorer(inc, interactive=True)
    assert isinstance(box, w.VBox)
    (pg_pick, rank_pick), slider, out = box.children[0].children, box.children[1], box.children[2]
    assert isinstance(slider, w.IntSlider) and (slider.min, slider.max, slider.value) == (1, 6, 6)
    assert list(pg_pick.options) == ["0"]
    assert [v for _, v in rank_pick.options] == [-1, 0, 1, 2, 3]
    slider.value = 3  # moving the pickers re-renders without error
    rank_pick.value = 1
    pg_pick.value = "0"
    assert isinstance(out, w.Output)


def test_entries_at_and_rank_sequence():
    inc = synthetic_incident(3, 8, mismatch_at=5, culprit=0)
    at = widgets.entries_at(inc, 5)
    assert at.loc[0, "in_shapes"] == "[3,4]" and at.loc[1, "in_shapes"] == "[5,4]"
    seq = widgets.rank_sequence(inc, 1, around=3, width=1)
    assert list(seq.index) == [2, 3, 4]
    empty = widgets.entries_at(inc, 99)
    assert set(empty["op"]) == {"missing"}
