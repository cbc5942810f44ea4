"""The notebooks are the source: clean, thin, shipped in the package, and they run (results read back).

What is checked is what matters to a user, never bytes: a notebook opened and saved in JupyterLab
(which rewrites the kernelspec and language_info metadata) still passes; outputs, execution
counts and widget state must not be committed (``nbstripout`` removes them: see the
README's "Editing the notebooks").
"""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
import sys

import pytest

from denpex_nb import nbfiles, report
from denpex_nb.errors import InputError

from ._nb_runs import ROOT, run_dir, tmp_root

nbformat = pytest.importorskip("nbformat")
pytest.importorskip("papermill")

NB_DIR = ROOT / "notebooks"
NAMES = sorted(p.stem for p in NB_DIR.glob("*.ipynb"))


def _committed(name):
    return nbformat.read(str(NB_DIR / f"{name}.ipynb"), as_version=4)


def test_the_shipped_notebooks_are_the_committed_ones():
    """``nbfiles`` (what ``denpex-nb report`` executes) reads these very files: one source."""
    assert nbfiles.names() == NAMES
    assert {"postmortem", "incident_report"} <= set(NAMES)
    for name in NAMES:
        assert nbfiles.read(name) == _committed(name)
    with pytest.raises(InputError, match="no notebook named 'nope'"):
        nbfiles.path("nope")


def test_the_wheel_ships_the_notebooks_as_package_data(tmp_path):
    """A plain ``pip install`` must carry the report template and the notebooks users open."""
    import zipfile

    src = tmp_path / "src"  # build from a copy: setuptools writes build/ and *.egg-info beside the sources
    src.mkdir()
    for part in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / part, src / part)
    for part in ("denpex_nb", "notebooks"):
        shutil.copytree(ROOT / part, src / part, ignore=shutil.ignore_patterns("__pycache__"))
    build = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            str(src),
            "-w",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert build.returncode == 0, build.stderr[-2000:]
    (wheel,) = tmp_path.glob("denpex_nb-*.whl")
    members = set(zipfile.ZipFile(wheel).namelist())
    assert {f"denpex_nb/notebooks/{n}.ipynb" for n in NAMES} <= members
    assert not any(m.startswith("notebooks/") for m in members)


def test_notebooks_copy_out_and_never_overwrite_without_being_asked(tmp_path):
    written = nbfiles.copy_to(tmp_path / "nbs")
    assert sorted(p.stem for p in written) == NAMES
    (tmp_path / "nbs" / "postmortem.ipynb").write_text("my edits")
    with pytest.raises(InputError, match="already holds .*postmortem.ipynb"):
        nbfiles.copy_to(tmp_path / "nbs")
    assert (tmp_path / "nbs" / "postmortem.ipynb").read_text() == "my edits"
    nbfiles.copy_to(tmp_path / "nbs", overwrite=True)
    assert nbformat.read(str(tmp_path / "nbs" / "postmortem.ipynb"), as_version=4) == _committed("postmortem")


def test_denpex_nb_notebooks_command_copies_them_and_fails_in_one_line(tmp_path):
    cmd = [sys.executable, "-m", "denpex_nb.cli", "notebooks"]
    ok = subprocess.run([*cmd, str(tmp_path / "mine")], capture_output=True, text=True, timeout=60)
    assert ok.returncode == 0, ok.stderr
    assert (tmp_path / "mine" / "postmortem.ipynb").is_file() and "postmortem.ipynb" in ok.stdout
    again = subprocess.run([*cmd, str(tmp_path / "mine")], capture_output=True, text=True, timeout=60)
    assert again.returncode == 2 and len(again.stderr.strip().splitlines()) == 1
    assert "already holds" in again.stderr and "--overwrite" in again.stderr
    (tmp_path / "file").write_text("x")
    bad = subprocess.run([*cmd, str(tmp_path / "file")], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "is not a folder" in bad.stderr and "Traceback" not in bad.stderr


def _as_jupyterlab_saves_it(nb):
    """What JupyterLab 4 writes on save with no edit: its kernelspec and the kernel's language_info."""
    nb = nbformat.from_dict(json.loads(json.dumps(nb)))
    nb.metadata["kernelspec"] = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}
    nb.metadata["language_info"] = {
        "codemirror_mode": {"name": "ipython", "version": 3},
        "file_extension": ".py",
        "mimetype": "text/x-python",
        "name": "python",
        "nbconvert_exporter": "python",
        "pygments_lexer": "ipython3",
        "version": "3.11.7",
    }
    return nb


def _clean_problems(nb) -> list[str]:
    """Why a notebook may not be committed as it is (empty: it may)."""
    problems = []
    for i, c in enumerate(nb.cells):
        if c.cell_type == "code" and (c.outputs or c.execution_count is not None):
            problems.append(f"cell {i} carries outputs or an execution count")
    if "widgets" in nb.metadata:
        problems.append("widget state saved in the metadata")
    params = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    if len(params) != 1 or params[0].cell_type != "code":
        problems.append("not exactly one code cell tagged 'parameters' (papermill's)")
    try:
        nbformat.validate(nb)
    except nbformat.ValidationError as e:
        problems.append(f"invalid notebook: {str(e).splitlines()[0]}")
    return problems


@pytest.mark.parametrize("name", NAMES)
def test_committed_notebooks_are_clean_and_a_jupyterlab_save_keeps_them_so(name):
    nb = _committed(name)
    assert _clean_problems(nb) == [], f"{name}: run nbstripout notebooks/{name}.ipynb"
    assert _clean_problems(_as_jupyterlab_saves_it(nb)) == []


def test_the_cleanliness_check_catches_outputs_widget_state_and_a_lost_parameters_tag():
    nb = _committed("postmortem")
    dirty = json.loads(json.dumps(nb))
    code = next(
        c for c in dirty["cells"] if c["cell_type"] == "code" and "parameters" not in c["metadata"].get("tags", [])
    )
    code["outputs"] = [{"output_type": "stream", "name": "stdout", "text": "x"}]
    code["execution_count"] = 3
    dirty["metadata"]["widgets"] = {"application/vnd.jupyter.widget-state+json": {}}
    for c in dirty["cells"]:
        c["metadata"].pop("tags", None)
    problems = _clean_problems(nbformat.from_dict(dirty))
    assert len(problems) == 3, problems


@pytest.mark.skipif(shutil.which("nbstripout") is None, reason="nbstripout is not installed (the test extra)")
def test_nbstripout_has_nothing_to_strip():
    """The normaliser the README's hook runs agrees that the committed files are clean."""
    res = subprocess.run(
        ["nbstripout", "--verify", *map(str, sorted(NB_DIR.glob("*.ipynb")))],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 0, res.stdout + res.stderr


@pytest.mark.parametrize("name", NAMES)
def test_notebooks_are_thin_one_call_into_denpex_nb_per_cell(name):
    nb = _committed(name)
    for cell in nb.cells:
        if cell.cell_type != "code" or "parameters" in cell.metadata.get("tags", []):
            continue
        tree = ast.parse(cell.source)
        assert len(tree.body) == 1, cell.source
        stmt = tree.body[0]
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            mods = [a.name for a in stmt.names] if isinstance(stmt, ast.Import) else [stmt.module]
            assert all(m.startswith("denpex_nb") for m in mods), cell.source
            continue
        assert not any(
            isinstance(n, (ast.For, ast.While, ast.If, ast.FunctionDef, ast.Lambda, ast.ListComp))
            for n in ast.walk(stmt)
        ), cell.source


def _run(name, params):
    nb, error = report.execute(_committed(name), params, cwd=str(NB_DIR), timeout=300)
    errors = [o for c in nb.cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert error is None and not errors, error or errors[0].get("evalue")
    summary = report.read_summary(nb)
    assert summary is not None, "the notebook did not record its results"
    return nb, summary


def test_postmortem_runs_headless_and_records_the_verdict():
    nb, summary = _run("postmortem", {"logs": [str(run_dir())]})
    assert summary["verdict"] == "shape-mismatch"
    assert summary["op"] == "all_gather" and summary["ranks_seen"] == [0, 1]
    outputs = json.dumps([c.get("outputs", []) for c in nb.cells])
    assert "Explorer (static" in outputs  # widgets fell back to static tables under papermill
    assert outputs.count("image/png") >= 3  # two swimlanes and the progress bars


def test_postmortem_with_logs_pointing_nowhere_shows_one_clear_line_first(tmp_path):
    """Bad input: the first output is one line naming the problem and the fix, no traceback wall,
    and the run stops there (no cascade of NameErrors below)."""
    nowhere = tmp_path / "no-such-run"
    nb, error = report.execute(_committed("postmortem"), {"logs": [str(nowhere)]}, cwd=str(NB_DIR), timeout=300)
    assert error is not None and "InputError" in error
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    first = outputs[0]
    assert first["output_type"] == "error" and first["ename"] == "InputError"
    assert len(first["traceback"]) == 1, first["traceback"]
    line = first["traceback"][0]
    assert str(nowhere) in line and "no such file or folder" in line and "fix:" in line
    assert [o for o in outputs if o["output_type"] == "error"] == [first]


# incident_report.ipynb is executed by tests/test_report.py through `report.render`, which reads it with
# nbfiles (test_the_shipped_notebooks_are_the_committed_ones: the same file).


from denpex_nb import teach  # noqa: E402 - after the importorskips above

#: the catalog classes whose DETAIL run names the mismatch itself (a fingerprint error)
DETAIL_NAMES_IT = {"shape-mismatch", "dtype-mismatch", "op-mismatch"}


def _no_raw_json_shown(nb):
    """A lesson shows no JSON to people: the only JSON output is the hidden record cell's."""
    for cell in nb.cells:
        tags = cell.metadata.get("tags", [])
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            if "denpex-summary" in tags:
                assert set(data) == {"application/json"}, "the record cell shows something besides its JSON"
                continue
            assert "application/json" not in data, cell.source
            text = "".join(data.get("text/plain", "")) + "".join(out.get("text", ""))
            assert not text.lstrip().startswith(("{", "[{")), cell.source


@pytest.mark.slow
@pytest.mark.parametrize("info", teach.LESSONS, ids=lambda i: i.notebook)
def test_each_lesson_runs_broken_debugged_and_fixed_live_and_records_them(info):
    out = tmp_root() / info.notebook
    nb, summary = _run(info.notebook, {"world_size": 2, "timeout": 4.0, "out": str(out)})
    broken, fixed, debugged = summary["broken"], summary["fixed"], summary["debugged"]
    assert broken["verdict"] == info.class_id
    assert any(code != 0 for code in broken["exit_codes"])
    assert fixed["verdict"] == "no-failure" and fixed["exit_codes"] == [0, 0]
    assert fixed["sequences_agree"] is True
    assert "fr" in broken["seq_kinds"]
    if info.scenario != "ddp-unused-parameters":  # DDP's collectives come from C++: the tracer sees none
        assert "trace" in broken["seq_kinds"]
        assert broken["sequences_agree"] is False
    assert debugged["debug"] == info.debug and "fr" in debugged["seq_kinds"]
    if info.class_id in DETAIL_NAMES_IT:
        assert debugged["detail_errors"] >= 1
    assert summary["nccl_source"] in ("recorded", "wild", "illustrative", None)
    html = json.dumps([c.get("outputs", []) for c in nb.cells])
    assert "def broken(" in html and "def fixed(" in html  # the code, side by side
    assert "denpex-predict-static" in html and "Answer" in html  # the question, headless
    if summary["nccl_source"] == "illustrative":
        assert "ILLUSTRATIVE, not a real NCCL run" in html
    if summary["nccl_source"] == "wild":
        assert "https://github.com/" in html
    record = next(c for c in nb.cells if "denpex-summary" in c.metadata.get("tags", []))
    assert {"remove_cell", "remove-cell"} <= set(record.metadata["tags"])
    assert record.metadata["jupyter"] == {"source_hidden": True, "outputs_hidden": True}
    _no_raw_json_shown(nb)


def test_the_course_outline_lists_every_lesson_and_the_mystery():
    nb, error = report.execute(_committed("course"), {}, cwd=str(NB_DIR), timeout=300)
    assert error is None
    html = json.dumps([c.get("outputs", []) for c in nb.cells])
    for info in teach.LESSONS:
        assert f"{info.notebook}.ipynb" in html and (NB_DIR / f"{info.notebook}.ipynb").is_file()
    assert f"{teach.MYSTERY_NOTEBOOK}.ipynb" in html


def test_the_mystery_runs_headless_with_the_explorer_and_a_folded_answer(tmp_path):
    nb, error = report.execute(_committed(teach.MYSTERY_NOTEBOOK), {"out": str(tmp_path)}, cwd=str(NB_DIR), timeout=300)
    errors = [o for c in nb.cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert error is None and not errors, error or errors[0].get("evalue")
    html = json.dumps([c.get("outputs", []) for c in nb.cells])
    assert "denpex-check-static" in html and "<details><summary>Answer</summary>" in html
    shown = html.split("denpex-check-static")[0]
    assert teach.mystery_answer()["class"] not in shown.split("Explorer")[0]  # not given away before the explorer
    _no_raw_json_shown(nb)
