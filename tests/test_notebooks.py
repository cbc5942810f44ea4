"""The committed notebooks: generated from nbtemplates, clean, thin, and they run (results read back)."""

from __future__ import annotations

import ast
import json

import pytest

from denpex_nb import nbtemplates, report

from ._nb_runs import ROOT, run_dir, tmp_root

nbformat = pytest.importorskip("nbformat")
pytest.importorskip("papermill")

NB_DIR = ROOT / "notebooks"
NAMES = list(nbtemplates.NOTEBOOKS)


def _committed(name):
    return nbformat.read(str(NB_DIR / f"{name}.ipynb"), as_version=4)


def test_every_notebook_is_committed_and_equals_its_definition():
    on_disk = sorted(p.stem for p in NB_DIR.glob("*.ipynb"))
    assert on_disk == sorted(NAMES)
    for name in NAMES:
        assert (NB_DIR / f"{name}.ipynb").read_text(encoding="utf-8") == nbtemplates.dumps(name), (
            f"notebooks/{name}.ipynb differs from denpex_nb/nbtemplates.py: run python -m denpex_nb.nbtemplates"
        )


@pytest.mark.parametrize("name", NAMES)
def test_committed_notebooks_carry_no_outputs_and_one_parameters_cell(name):
    nb = _committed(name)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(not c.outputs and c.execution_count is None for c in code)
    params = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(params) == 1 and params[0].cell_type == "code"
    assert nbformat.validate(nb) is None


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


# incident_report.ipynb is executed by tests/test_report.py through `report.render` (the same notebook:
# test_every_notebook_is_committed_and_equals_its_definition ties the committed file to the template).


LESSONS = {
    "teach_allgather_shapes": ("shape-mismatch", True),
    "teach_allreduce_shapes": ("shape-mismatch", True),
    "teach_desync": ("rank-desync", False),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(LESSONS))
def test_teaching_notebook_runs_broken_and_fixed_live_and_records_them(name):
    verdict, detail_names_shapes = LESSONS[name]
    out = tmp_root() / name
    nb, summary = _run(name, {"world_size": 2, "timeout": 4.0, "out": str(out)})
    broken, fixed, debugged = summary["broken"], summary["fixed"], summary["debugged"]
    assert broken["verdict"] == verdict
    assert broken["sequences_agree"] is False
    assert any(code != 0 for code in broken["exit_codes"])
    assert fixed["verdict"] == "no-failure" and fixed["exit_codes"] == [0, 0]
    assert fixed["sequences_agree"] is True
    assert "trace" in broken["seq_kinds"]
    assert "fr" in debugged["seq_kinds"], "no Flight Recorder entries were read from the DETAIL+FR run"
    if detail_names_shapes:
        assert debugged["detail_errors"] >= 1
    assert summary["nccl_source"] in ("recorded", "illustrative")
    html = json.dumps([c.get("outputs", []) for c in nb.cells])
    if summary["nccl_source"] == "illustrative":
        assert "ILLUSTRATIVE, not a real NCCL run" in html
