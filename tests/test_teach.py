"""The course's building blocks, on recorded runs (fast; the lessons themselves run in test_notebooks.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from denpex_nb import diagnose, load, teach
from denpex_nb.errors import MissingDependencyError
from denpex_nb.repro import registry

ROOT = Path(__file__).resolve().parents[1]
REC = ROOT / "data" / "recorded" / "gloo"
SCENARIOS = list(registry.scenarios())


def test_every_scenario_of_the_zoo_has_a_lesson_notebook_and_a_question():
    assert sorted(i.scenario for i in teach.LESSONS) == sorted(SCENARIOS)
    for info in teach.LESSONS:
        nb = (ROOT / "notebooks" / f"{info.notebook}.ipynb").read_text()
        assert f'"{info.scenario}"' in nb.replace('\\"', '"'), info.notebook
        q = teach.question(info.scenario)
        assert len(q.options) == 4 and 0 <= q.answer < 4 and q.why


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_the_diff_is_read_from_the_scenario_module_and_marks_what_changed(scenario):
    b, f = teach.function_source(scenario, "broken"), teach.function_source(scenario, "fixed")
    assert b.text.startswith("def broken(") and f.text.startswith("def fixed(")
    rows = teach.diff_rows(b.text, f.text)
    assert any(tag != "equal" for tag, _, _ in rows[1:]), "broken and fixed differ beyond their names"
    html = teach.code_diff(scenario)._repr_html_()
    assert "background:#fdd" in html or "background:#dfd" in html
    assert f"{b.file}:{b.first_line}" in html and "denpex_nb/repro/scenarios/" in b.file


def test_the_ddp_diff_is_the_one_argument_and_the_shared_helper_is_shown():
    rows = teach.diff_rows(*(teach.function_source("ddp-unused-parameters", v).text for v in ("broken", "fixed")))
    changed = [(a.strip(), b.strip()) for tag, a, b in rows if tag == "replace" and "find_unused" in a + b]
    assert changed == [
        ("_train(rank, world_size, ctx, find_unused=False)", "_train(rank, world_size, ctx, find_unused=True)")
    ]
    assert [h.name for h in teach.helpers("ddp-unused-parameters")] == ["_model", "_train"]
    assert "DDP(" in teach.code_diff("ddp-unused-parameters")._repr_html_()


def test_a_question_grades_right_wrong_and_no_answer():
    q = teach.question("rank-crash")
    right, text = teach.grade("rank-crash", q.answer)
    assert right is True and text.startswith("Right.")
    wrong, text = teach.grade("rank-crash", (q.answer + 1) % 4)
    assert wrong is False and text.startswith("Not quite.") and q.options[q.answer] in text
    assert teach.grade("rank-crash", None) == (None, "Pick an answer first.")
    assert teach.grade("rank-crash", q.options[q.answer])[0] is True
    with pytest.raises(KeyError, match="lessons:"):
        teach.question("nope")


def test_headless_the_question_is_static_with_the_answer_folded():
    html = teach.predict("op-mismatch", interactive=False)._repr_html_()
    assert "denpex-predict-static" in html and "<details><summary>Answer</summary>" in html
    assert html.index("<ol") < html.index("<details>")


def test_the_question_widget_has_the_documented_structure_and_answers_a_click():
    pytest.importorskip("ipywidgets")
    box = teach.predict("skipped-collective", interactive=True)
    prompt, options, check, feedback = box.children
    assert "denpex-predict" in box._dom_classes
    assert [c._dom_classes for c in box.children] == [
        ("denpex-predict-prompt",),
        ("denpex-predict-options",),
        ("denpex-predict-check",),
        ("denpex-predict-feedback",),
    ]
    assert options.value is None and check.description == "Check my answer"
    check.click()
    assert "Pick an answer first." in feedback.value
    q = teach.question("skipped-collective")
    options.value = q.options[(q.answer + 1) % 4]
    check.click()
    assert "Not quite." in feedback.value
    options.value = q.options[q.answer]
    check.click()
    assert "Right." in feedback.value
    bundle = box._repr_mimebundle_()
    assert "denpex-predict-static" in bundle["text/html"]  # saved pages without a kernel still show it


def test_the_question_displays_its_hidden_static_view_before_itself():
    """Shown in a notebook, the question is two outputs: its static view, hidden until JupyterLab's
    widget renderer fails (a lesson reopened without its kernel), then the widget itself."""
    pytest.importorskip("ipywidgets")
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.utils.capture import capture_output

    InteractiveShell.instance()
    box = teach.predict("skipped-collective", interactive=True)
    with capture_output() as shown:
        box._ipython_display_()
    first, second = (o.data for o in shown.outputs)
    assert "dx-fallback" in first["text/html"] and "denpex-predict-static" in first["text/html"]
    assert "application/vnd.jupyter.widget-view+json" not in first
    assert "application/vnd.jupyter.widget-view+json" in second and "denpex-predict-static" in second["text/html"]


def _lesson(run: Path, debug: str):
    manifest = json.loads((run / "manifest.json").read_text())
    incident = load(str(run))
    result = SimpleNamespace(out_dir=run, exit_codes=manifest["exit_codes"], signals=manifest.get("signals", []))
    return teach.Lesson(manifest["scenario"], "broken", debug, result, incident, diagnose(incident))


def test_detail_fingerprint_all_gathers_are_left_out_counted_and_explained():
    lesson = _lesson(REC / "allgather-shape-mismatch" / "broken-detail-w2", "detail")
    mask = teach.fingerprint_mask(lesson.incident.events)
    fp = lesson.incident.events[mask]
    assert len(fp) >= 4 and set(fp["dtype"].astype(str)) == {"int64"} and set(fp["op"]) == {"all_gather"}
    table, hidden = teach.flight_recorder_frame(lesson)
    assert hidden == len(fp)
    assert not table.empty and not table.apply(lambda c: c.str.contains("int64")).any().any()
    assert table.apply(lambda c: c.str.contains(r"all_reduce \[16\] float32")).any().any()
    html = teach.flight_recorder_view(lesson)._repr_html_()
    assert f"{hidden} fingerprint all_gathers" in html and "DETAIL's own" in html


def test_without_detail_the_flight_recorder_shows_the_diverging_collective():
    lesson = _lesson(REC / "syncbn-eval-single-rank" / "broken-plain-w4", "off")
    table, hidden = teach.flight_recorder_frame(lesson)
    assert hidden == 0 and list(table.columns) == ["rank 0", "rank 1", "rank 2", "rank 3"]
    odd = table[table.nunique(axis=1) > 1]
    assert odd.iloc[0]["rank 0"].startswith("all_gather") and not odd.iloc[0]["rank 1"].startswith("all_gather")
    assert "fingerprint" not in teach.flight_recorder_view(lesson)._repr_html_()


def test_detail_view_groups_messages_by_rank_and_drops_device_boilerplate():
    lesson = _lesson(REC / "dtype-mismatch" / "broken-detail-w4", "detail")
    html = teach.detail_view(lesson)._repr_html_()
    assert "Detected mismatch between collectives" in html
    assert "TensorDeviceTypes" not in html and "TensorDtypes=Double" in html
    assert "ranks 0:" not in html  # one rank reads "rank 0"


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_nccl_evidence_is_recorded_else_a_scored_public_thread_else_illustrative(scenario):
    src = teach.nccl_source(scenario)
    case = teach.wild_case(scenario)
    if case is not None:
        assert src == ("wild", case["dir"])
        scored = {p.stem for p in (ROOT / "benchmarks" / "results" / "blind").glob("*.json")}
        assert not case.get("batch") or case["batch"] in scored  # never a case whose truth is still blind
        assert case["source"]["url"].startswith("https://github.com/")
        html = teach.nccl(scenario)._repr_html_()
        assert case["source"]["url"] in html and "A real log from a GPU (NCCL) job" in html
    elif src is not None:
        assert src[0] in ("recorded", "illustrative")
    else:
        html = teach.nccl(scenario)._repr_html_()
        assert "No NCCL log of this failure is available here" in html and "NCCL" in html


def test_every_lesson_now_shows_a_real_nccl_side_log_with_the_rule_behind_it():
    """The dtype and SyncBN lessons had no NCCL log; each now shows a scored public-thread case, and
    the rule NCCL states (same count and dtype; every rank calls SyncBN alike), each with its thread."""
    from denpex_nb.teach.evidence import NCCL_RULES

    for scenario in ("dtype-mismatch", "syncbn-eval-single-rank"):
        assert teach.nccl_source(scenario)[0] == "wild", scenario
        html = teach.nccl(scenario)._repr_html_()
        assert "What NCCL promises here" in html
        for _text, url in NCCL_RULES[scenario]:
            assert f"href='{url}'" in html
    # a lesson with no stated rule shows none (the heading is not boilerplate)
    assert "What NCCL promises here" not in teach.nccl("rank-crash")._repr_html_()


def test_the_mystery_copy_names_no_answer_and_the_checker_grades_each_part(tmp_path):
    folder = teach.mystery(tmp_path)
    manifest = json.loads((folder / "manifest.json").read_text())
    assert not {"scenario", "title", "variant", "command", "expected"} & set(manifest)
    answer = teach.mystery_answer()
    for f in folder.rglob("*"):
        if f.is_file() and f.suffix in (".log", ".json", ".jsonl"):
            text = f.read_text(errors="replace")
            assert "repro/scenarios/" not in text and "syncbn-eval-single-rank" not in text, f
    d = diagnose(load(str(folder)))
    assert d.verdict == answer["class"] and d.culprit_ranks == answer["culprit_ranks"]
    ok, lines = teach.check_mystery(
        answer["class"], ", ".join(map(str, answer["culprit_ranks"])), answer["seq"]["trace"]
    )
    assert ok and all("right" in x for x in lines)
    ok, lines = teach.check_mystery("rank-crash", "1", "")
    assert not ok and sum("right" in x for x in lines) == 0
    assert "<details><summary>Answer</summary>" in teach.checker(interactive=False)._repr_html_()


def test_the_checker_widget_has_the_documented_structure():
    pytest.importorskip("ipywidgets")
    box = teach.checker(interactive=True)
    cls, cul, seq, button, feedback = box.children
    assert "denpex-check" in box._dom_classes and "denpex-check-button" in button._dom_classes
    answer = teach.mystery_answer()
    cls.value, cul.value, seq.value = answer["class"], str(answer["culprit_ranks"][0]), str(answer["seq"]["trace"])
    button.click()
    assert "Solved." in feedback.value
    seq.value = "1"
    button.click()
    assert "Not yet." in feedback.value


def test_without_torch_a_lesson_says_how_to_install_it_in_one_line():
    code = (
        "import sys; sys.modules['torch'] = None\n"
        "from IPython.core.interactiveshell import InteractiveShell\n"
        "sh = InteractiveShell.instance()\n"
        "sh.run_cell('from denpex_nb import teach\\nteach.require_torch()')\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    out = res.stdout + res.stderr
    assert "MissingDependencyError" in out and "denpex_nb[repro]" in out and "pip install torch==2.13.0" in out
    assert "Traceback" not in out and "File " not in out
    assert len([ln for ln in res.stdout.splitlines() if ln.strip()]) == 1


def test_require_torch_raises_a_one_line_error_naming_the_extra(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "torch" else real(name, *a))
    with pytest.raises(MissingDependencyError) as err:
        teach.require_torch()
    assert "\n" not in str(err.value) and "denpex_nb[repro]" in str(err.value)


def test_without_ipywidgets_the_question_and_checker_say_so_above_the_static_answer(monkeypatch):
    monkeypatch.setitem(sys.modules, "ipywidgets", None)  # import ipywidgets -> ImportError
    html = teach.predict("rank-crash", interactive=True)._repr_html_()
    assert "ipywidgets is not installed" in html and "denpex-predict-static" in html
    html = teach.checker(interactive=True)._repr_html_()
    assert "ipywidgets is not installed" in html and "denpex-check-static" in html
    assert "ipywidgets is not installed" not in teach.predict("rank-crash", interactive=False)._repr_html_()
