"""The post-mortem lived in a real JupyterLab, in a real browser (Debian's chromium, driven by Playwright).

A JupyterLab server is started on a free port with a token, rooted in a temporary folder holding a
copy of ``notebooks/postmortem.ipynb`` and a small recorded run (``data/recorded``); Chromium opens
the notebook, runs all cells, operates the explorer (a counter, a finding, a rank, a seq, a step)
and checks that the picture and the tables follow. A screenshot is saved in ``$DENPEX_ARTIFACTS``
(else the test's temporary folder). The server and its kernels are shut down and no process may be
left. Interaction latency is printed here; the 512-rank bar is measured by
``benchmarks/bench_explorer.py`` (a benchmark, not a timed test).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from denpex_nb.testing.jupyterlab import LabServer, Notebook, browser, chromium

ROOT = Path(__file__).resolve().parents[1]
RUN = ROOT / "data/recorded/gloo/allgather-shape-mismatch/broken-detail-w4"

pytestmark = [
    pytest.mark.browser,
    pytest.mark.timeout(900),  # a JupyterLab start, a kernel, a browser: minutes on a loaded 2-core machine
    pytest.mark.skipif(chromium() is None, reason="chromium is not installed (CI installs Debian's chromium)"),
]


def _needs():
    pytest.importorskip("playwright.sync_api", reason="playwright is not installed (the test extra)")
    pytest.importorskip("jupyterlab")
    pytest.importorskip("ipympl")
    pytest.importorskip("psutil")


def _artifacts(tmp_path: Path) -> Path:
    base = os.environ.get("DENPEX_ARTIFACTS")
    out = (Path(base) if base else tmp_path) / "jupyterlab"
    out.mkdir(parents=True, exist_ok=True)
    return out


def _lab_root(tmp_path: Path, logs: str) -> Path:
    """A folder as a user would have it: the shipped post-mortem, its ``logs`` set to a run beside it."""
    import nbformat

    root = tmp_path / "lab"
    root.mkdir()
    nb = nbformat.read(str(ROOT / "notebooks/postmortem.ipynb"), as_version=4)
    (params,) = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    params.source = f"# papermill parameters\nlogs = [{logs!r}]\ninteractive = None"
    nbformat.write(nb, str(root / "postmortem.ipynb"))
    return root


def test_postmortem_explorer_in_jupyterlab_follows_every_choice(tmp_path):
    _needs()
    root = _lab_root(tmp_path, "run")
    shutil.copytree(RUN, root / "run")
    shots = _artifacts(tmp_path)
    server = LabServer(root)
    with server:
        with browser() as page:
            nb = Notebook(page, server, "postmortem.ipynb")
            ran_s = nb.run_all()
            server.remember_children()
            assert (
                page.locator(".jp-OutputArea-output [class*='Traceback'], .jp-OutputArea-output .ansi-red-fg").count()
                == 0
            )
            assert not [t for t in nb.errors() if "Error" in t or "Traceback" in t], nb.errors()
            # the live explorer rendered: widgets, an ipympl canvas, linked tables
            assert page.locator(".dx-explorer").count() == 1
            page.wait_for_selector(".dx-explorer .dx-picture canvas")
            nb.wait_text("status", "counter trace")
            assert "4 ranks" in nb.text("status")
            assert "Every rank at seq 3" in nb.text("at-seq")
            # live, so its static view (an output of its own, for a reopening without kernel) is hidden
            assert page.locator(_STATIC_OUTPUT, has_text="Explorer (static").count() == 0
            assert page.locator(".dx-fallback").count() == 1 and page.locator(".dx-fallback").first.is_hidden()
            page.locator(".dx-explorer").first.scroll_into_view_if_needed()
            start_pic = nb.wait_picture_settled()
            assert start_pic

            # a counter: the DETAIL fingerprints have their own seqs; picture and tables change
            nb.select("counter", "detail")
            nb.wait_text("status", "counter detail")
            nb.wait_text("at-seq", "counter detail")
            assert nb.wait_picture_change(start_pic) != start_pic

            # a finding: back to its counter, its collective and (when named) its culprit
            label = nb.widget("finding").locator("select").input_value()
            assert label.startswith("1. shape-mismatch at trace seq 3"), label
            nb.click("go")
            nb.wait_text("status", "counter trace")
            nb.wait_text("at-seq", "Every rank at seq 3 ")
            at3 = nb.text("at-seq")
            assert "differs" in at3 and "[3,4]" in at3 and "[5,4]" in at3

            # a rank and a seq, typed: every rank at that seq, the rank's window, its evidence lines
            nb.type_int("rank", 2)
            nb.wait_text("status", "chosen: rank 2")
            nb.type_int("seq", 2)
            nb.wait_text("at-seq", "Every rank at seq 2 ")
            nb.wait_text("window", "Rank 2 around seq 2")
            nb.wait_text("evidence", "denpex_trace_rank2.jsonl:")
            evidence = nb.text("evidence")
            assert "Evidence: rank 2 at seq 2" in evidence
            where = next(w for w in evidence.split() if w.startswith("run/trace/denpex_trace_rank2.jsonl:"))
            line_no = int(where.rsplit(":", 1)[1])
            line = (root / "run/trace/denpex_trace_rank2.jsonl").read_text().splitlines()[line_no - 1]
            assert (
                '"seq":2' in line.replace(" ", "") and line[:60] in evidence
            )  # the rank's own line, read from the file
            assert "0–3" in nb.text("at-seq")  # the agreeing ranks collapsed into one row
            # a step: seq 3 again, the picture's outline moves
            before_step = nb.wait_picture_settled()  # the redraw for seq 2 comes after the tables
            nb.click("next")
            nb.wait_text("at-seq", "Every rank at seq 3 ")
            nb.wait_picture_change(before_step)
            assert nb.wait_picture_settled() != before_step

            # latency of choosing a seq (printed; the 512-rank bar is benchmarks/bench_explorer.py)
            lat = [nb.choose_seq_latency(s) for s in (1, 2, 3)]
            print(f"run all {ran_s:.1f} s; choose-a-seq latency at 4 ranks: {[round(x * 1000) for x in lat]} ms")
            nb.wait_text("status", "chosen: rank 2, seq 3")
            nb.wait_text("evidence", "rank 2 at seq 3")
            page.wait_for_timeout(1000)  # the picture's last redraw
            page.locator(".dx-explorer").first.screenshot(path=str(shots / "explorer.png"))
            page.screenshot(path=str(shots / "postmortem.png"), full_page=True)

            _saved_live_then_killed(page, nb, server, root, shots)
    assert server.alive() == [], f"processes left behind: {server.alive()}"
    assert len(server.pids) >= 2, "the kernel was never seen under the server"
    png = (shots / "explorer.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 20_000
    from matplotlib.image import imread

    img = imread(str(shots / "explorer.png"))
    assert img.shape[0] > 300 and img[..., :3].std() > 0.05, "the explorer screenshot looks blank"


#: the explorer's static view as shown in place of the widget (its output, not the hidden twin)
_STATIC_OUTPUT = ".jp-OutputArea-output:not(:has(.dx-fallback))"
_SNAPSHOT = "Explorer (static: a snapshot of the live explorer"


def _saved_live_then_killed(page, nb, server, root, shots):
    """Saved while the explorer is live, then the server dies (SIGKILL, its kernel too: no shutdown
    hook runs). A new server opens the file: the widget's model is gone, the widget renderer gives
    up, and the static view shows in its place instead of "Error displaying widget: model not
    found". Run again, the explorer is live and the static view hidden; then the user shuts the
    kernel down (:func:`_shut_down_save_and_reload`)."""
    page.keyboard.press("Control+s")
    page.wait_for_function("() => !document.querySelector('.lm-TabBar-tab.jp-mod-dirty')", timeout=30_000)
    page.wait_for_timeout(1000)
    server.kill()
    assert server.alive() == [], f"processes left after the kill: {server.alive()}"
    saved = (root / "postmortem.ipynb").read_text()
    assert "application/vnd.jupyter.widget-view+json" in saved and "dx-fallback" in saved
    chromium_, viewport = page.context.browser, page.viewport_size
    page.close()
    reopened = LabServer(root)
    with reopened:
        page = chromium_.new_page(viewport=viewport)  # a fresh tab: nothing of the old session in memory
        nb = Notebook(page, reopened, "postmortem.ipynb")
        reopened.remember_children()
        failed = page.locator(".jp-OutputArea-output.jupyter-widgets", has_text="model not found")
        failed.first.wait_for(state="attached")  # the renderer did give up: no such model in this kernel
        fallback = page.locator(".dx-fallback", has_text=_SNAPSHOT)
        fallback.first.wait_for(state="visible")
        assert failed.first.is_hidden(), "the error line shows beside the static view"
        assert "0, 2" in fallback.first.inner_text()  # the culprits, from the saved snapshot
        fallback.first.scroll_into_view_if_needed()
        fallback.first.screenshot(path=str(shots / "reopened-after-kill.png"))
        # live again: the explorer renders and its static view hides
        nb.run_all()
        reopened.remember_children()
        page.wait_for_selector(".dx-explorer .dx-picture canvas")
        nb.wait_text("status", "counter trace")
        assert page.locator(".dx-fallback").first.is_hidden()
        _shut_down_save_and_reload(page, nb)
    assert reopened.alive() == [], f"processes left behind: {reopened.alive()}"


def _shut_down_save_and_reload(page, nb):
    """The user shuts the kernel down: the live view becomes its static tables, which a save keeps,
    so the notebook reloaded shows them, never "Error displaying widget: model not found"."""
    nb.menu("Kernel", "Shut Down Kernel")
    nb.accept_dialogs(wait_s=2.0)
    page.wait_for_function("() => !document.querySelector('.dx-explorer')")
    page.locator(_STATIC_OUTPUT, has_text=_SNAPSHOT).first.wait_for()
    page.keyboard.press("Control+s")
    page.wait_for_function("() => !document.querySelector('.lm-TabBar-tab.jp-mod-dirty')", timeout=30_000)
    page.wait_for_timeout(1000)
    page.reload()
    page.wait_for_selector(".jp-NotebookPanel .jp-Notebook .jp-Cell")
    nb.accept_dialogs(wait_s=3.0)
    shown = page.locator(_STATIC_OUTPUT, has_text=_SNAPSHOT).first
    shown.wait_for()
    page.wait_for_timeout(2000)
    assert page.get_by_text("model not found").count() == 0
    assert "0, 2" in shown.inner_text()


def test_postmortem_with_logs_pointing_nowhere_in_jupyterlab_says_one_line(tmp_path):
    _needs()
    root = _lab_root(tmp_path, "no-such-run")
    server = LabServer(root)
    with server:
        with browser() as page:
            nb = Notebook(page, server, "postmortem.ipynb")
            nb.menu("Run", "Run All Cells")
            nb.accept_dialogs(wait_s=2.0)
            page.wait_for_selector(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']")
            nb.wait_idle()
            server.remember_children()
            outputs = page.locator(".jp-OutputArea-output").all_inner_texts()
            page.screenshot(path=str(_artifacts(tmp_path) / "bad-input.png"), full_page=True)
    assert server.alive() == []
    shown = [o for o in outputs if o.strip()]
    assert len(shown) == 1, shown  # one output, the first one, and nothing ran after it
    (msg,) = shown
    assert "InputError" in msg and "no-such-run: no such file or folder" in msg and "fix:" in msg
    assert len(msg.strip().splitlines()) == 1 and "Traceback" not in msg


def test_a_lesson_question_widget_is_answered_in_jupyterlab(tmp_path):
    """A learner opens a lesson, runs it up to its "predict before you run" question and answers it."""
    _needs()
    pytest.importorskip("torch", reason="the lessons need torch (the repro extra)")
    lesson = ROOT / "notebooks/teach_desync.ipynb"
    if not lesson.exists():
        pytest.skip("no lesson notebook with a question widget")
    root = tmp_path / "lab"
    root.mkdir()
    shutil.copy(lesson, root / lesson.name)
    server = LabServer(root)
    with server:
        with browser() as page:
            nb = Notebook(page, server, lesson.name)
            # everything above "3. Run the broken code": the code, then the question
            page.locator(".jp-Notebook .jp-MarkdownCell", has_text="3. Run the broken code").first.click()
            nb.menu("Run", "Run All Above Selected Cell")
            nb.accept_dialogs(wait_s=2.0)
            page.wait_for_selector(".denpex-predict .denpex-predict-options")
            nb.wait_idle()
            server.remember_children()
            quiz = page.locator(".denpex-predict").first
            feedback = quiz.locator(".denpex-predict-feedback")
            check = quiz.locator(".denpex-predict-check button, button.denpex-predict-check").first
            check.click()
            page.wait_for_function(
                "() => (document.querySelector('.denpex-predict-feedback')?.innerText || '').includes('Pick an answer first')"
            )
            quiz.locator(".denpex-predict-options label", has_text="Neither").first.click()
            check.click()
            page.wait_for_function(
                "() => (document.querySelector('.denpex-predict-feedback')?.innerText || '').startsWith('Not quite.')"
            )
            quiz.locator(".denpex-predict-options label", has_text="Only rank 0:").first.click()
            check.click()
            page.wait_for_function(
                "() => (document.querySelector('.denpex-predict-feedback')?.innerText || '').startsWith('Right.')"
            )
            answered = feedback.inner_text()
            quiz.screenshot(path=str(_artifacts(tmp_path) / "lesson-question.png"))
            # saved with the question live, the server killed, the lesson reopened by a new one:
            # the question's static view (its options and the folded answer) in the widget's place
            page.keyboard.press("Control+s")
            page.wait_for_function("() => !document.querySelector('.lm-TabBar-tab.jp-mod-dirty')", timeout=30_000)
            page.wait_for_timeout(1000)
            server.kill()
            chromium_, viewport = page.context.browser, page.viewport_size
            page.close()
            reopened = LabServer(root)
            with reopened:
                page = chromium_.new_page(viewport=viewport)
                Notebook(page, reopened, lesson.name)
                reopened.remember_children()
                failed = page.locator(".jp-OutputArea-output.jupyter-widgets", has_text="model not found")
                failed.first.wait_for(state="attached")
                static = page.locator(".dx-fallback .denpex-predict-static").first
                static.wait_for(state="visible")
                assert failed.first.is_hidden() and "Answer" in static.inner_text()
            assert reopened.alive() == [], f"processes left behind: {reopened.alive()}"
    assert server.alive() == [], f"processes left behind: {server.alive()}"
    assert answered.startswith("Right.")
