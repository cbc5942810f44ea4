"""The notebooks, defined once, as data: ``notebooks/*.ipynb`` are generated from here.

Why: ``denpex-nb report`` must find its template in an installed package, where ``notebooks/``
(beside the package in a source checkout) does not exist. Shipping a copy as package data would
let the two drift. So each notebook is a short list of cells here; :func:`build` makes the
notebook in memory (what ``report`` executes), and ``python -m denpex_nb.nbtemplates`` writes
the committed files in ``notebooks/``. A test checks the committed files equal :func:`build`'s
output, so an edit to one without the other fails CI.

Notebooks stay thin: every code cell is a call into ``denpex_nb``; explanations are markdown.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

# A cell: ("md" | "code", source, tags). Tag "parameters" marks papermill's parameter cell;
# "remove_cell" cells are dropped from the rendered HTML report (kept in the .ipynb).
Cell = tuple

TEACH_PARAMS = """# papermill parameters: keep runs small (2 ranks, short timeouts)
world_size = 2
timeout = 5.0
out = None  # folder for the runs; None: a new temporary folder"""


def _q(text: str) -> str:
    """A string literal as the formatter writes it in the notebooks' code (double quotes)."""
    return json.dumps(text)


def _teach(scenario: str, catalog_id: str, title: str, story: str, mechanism: str, fix: str) -> list[Cell]:
    return [
        (
            "md",
            f"# {title}\n\n{story}\n\nEvery run below is a real multi-process job on the gloo backend, started as "
            "separate OS processes with a short collective timeout and a hard kill, never inside this kernel.",
        ),
        ("code", TEACH_PARAMS, ["parameters"]),
        ("code", "from denpex_nb import teach"),
        (
            "md",
            "## 1. Run the broken reproducer\n\nEach rank runs the same training step; the tracer "
            "(`denpex_nb.trace`) writes every collective to a file before it is issued, so we see what "
            "each rank asked for even when a rank is aborted mid-collective.",
        ),
        (
            "code",
            f"broken = teach.run_lesson({_q(scenario)}, fixed=False, world_size=world_size, timeout=timeout, out=out)",
        ),
        ("code", "teach.outcome(broken)"),
        (
            "md",
            "## 2. Each rank's collectives, side by side\n\nOne column per rank, one row per collective "
            "(the tracer's sequence number). The row where the columns differ is the bug.",
        ),
        ("code", "teach.sequences(broken)"),
        ("code", "teach.swimlane(broken)"),
        ("code", "broken.diagnosis"),
        ("md", f"## 3. Why it fails\n\n{mechanism}"),
        ("code", f"teach.mechanism({_q(catalog_id)})"),
        (
            "md",
            "## 4. What NCCL does with the same bug\n\nOn GPUs the same program fails differently. "
            "If this repository holds a recorded NCCL run it is shown; otherwise an NCCL-side log written "
            "from NCCL's and PyTorch's documented message templates, **labelled as illustrative**: it was "
            "not produced by a real NCCL run.",
        ),
        ("code", f"teach.nccl_view({_q(scenario)})"),
        (
            "md",
            "## 5. What DETAIL mode and Flight Recorder would have told you\n\n"
            "`TORCH_DISTRIBUTED_DEBUG=DETAIL` checks every collective's fingerprint (op, shape, dtype) across "
            "ranks before running it. Flight Recorder keeps a ring buffer of each rank's recent collectives "
            "(dumped per rank); comparing the dumps across ranks shows the odd one out.",
        ),
        (
            "code",
            # written as ruff formats it (the committed notebooks pass the format check)
            f"debugged = teach.run_lesson(\n    {_q(scenario)},\n    fixed=False,\n    world_size=world_size,\n"
            '    timeout=timeout,\n    out=out,\n    debug="detail",\n    flight_recorder=True,\n)',
        ),
        ("code", "teach.detail_view(debugged)"),
        ("code", "teach.flight_recorder_view(debugged)"),
        ("md", f"## 6. The fix\n\n{fix}"),
        (
            "code",
            f"fixed = teach.run_lesson({_q(scenario)}, fixed=True, world_size=world_size, timeout=timeout, out=out)",
        ),
        ("code", "teach.sequences(fixed)"),
        ("code", "teach.compare(broken, fixed)"),
        ("code", "teach.record(broken=broken, debugged=debugged, fixed=fixed)", ["denpex-summary"]),
    ]


def _allgather() -> list[Cell]:
    return _teach(
        "allgather-shape-mismatch",
        "shape-mismatch",
        "Lesson: `all_gather` with a different number of detections per rank",
        "A detector finds a different number of boxes on each rank's images: rank 0 finds 5, rank 1 finds 3. "
        "Each rank then calls `dist.all_gather` on its `[n, 4]` box tensor. The code looks symmetric; the "
        "shapes are not.",
        "`all_gather` moves a fixed number of bytes from every rank into pre-sized buffers on every other "
        "rank, and neither backend asks the others what size they are about to send. On **gloo** the rank "
        "whose receive buffer is too small aborts from a C++ thread (`EnforceNotMet ... 40 vs 24`, exit -6, "
        "no Python traceback) and its peer either gets a connection reset or returns **silently corrupt** "
        "data. On **NCCL** the ranks' kernels wait for bytes that never come (or a list `all_gather` turns "
        "into per-root broadcasts of different sizes): the job **hangs** until the watchdog times out, and "
        "every rank then reports the same timeout, which hides the culprit.",
        "Exchange the lengths first, pad every rank's tensor to the maximum, gather the equal-sized tensors, "
        "then trim each one back to its true length: `denpex_nb.fixes.all_gather_uneven(boxes)` does exactly "
        "that. A cheap pre-flight check, `denpex_nb.fixes.check_same_shapes(t)`, raises an error naming every "
        "rank's shape instead of hanging.",
    )


def _allreduce() -> list[Cell]:
    return _teach(
        "allreduce-shape-mismatch",
        "shape-mismatch",
        "Lesson: `all_reduce` over dynamic sequence lengths",
        "Each rank pads its batch to *its own* longest sequence, so rank 0 reduces a tensor of 8 tokens and "
        "rank 1 one of 6. `dist.all_reduce` is called with tensors of different sizes.",
        "`all_reduce` assumes every rank passes the same number of elements. On **gloo** the smaller rank "
        "often returns a **wrong result without any error**, and the larger one waits for data that never "
        'arrives: it fails when the peer exits ("Connection closed by peer") or **hangs until the '
        "collective timeout**. On **NCCL** the mismatch is a hang until the watchdog fires "
        "(`Watchdog caught collective operation timeout: WorkNCCL(SeqNum=..., OpType=ALLREDUCE, "
        "NumelIn=...)`): only the different `NumelIn` across ranks at the same SeqNum reveals the cause.",
        "Agree on one length before reducing: `all_reduce(MAX)` of the local lengths, pad every rank's "
        "tensor to that length, then reduce (or pad every batch to a fixed maximum length).",
    )


def _desync() -> list[Cell]:
    return _teach(
        "skipped-collective",
        "rank-desync",
        "Lesson: a skipped collective (ranks out of step)",
        "The data is split unevenly, so one rank runs one training step fewer than the others. The ranks with "
        "the extra step issue a collective that the short rank never joins.",
        "Collectives are matched by **order**, not by name: the n-th collective on one rank is paired with the "
        "n-th on every other. When one rank skips a collective, the others wait in it forever. On **gloo** "
        'they fail with a recv timeout (or "Connection closed by peer" if the short rank has already '
        "exited). On **NCCL** they hang until the watchdog fires, and the ranks' `last enqueued` counters "
        "differ: the rank that is behind is the culprit, even though it reports nothing itself.",
        "Make every rank run the same number of collectives: drop or pad the uneven tail of the data "
        "(`DistributedSampler(drop_last=True)`), or wrap the loop in `torch.distributed.algorithms.Join` so "
        "finished ranks shadow the others' collectives.",
    )


def _postmortem() -> list[Cell]:
    return [
        (
            "md",
            "# Post-mortem: why did this multi-rank job fail?\n\nSet `logs` to the files or folders of the "
            "failed job (torchrun output, per-rank logs, Flight Recorder dumps, `denpex_nb.trace` files) and "
            "run all cells.",
        ),
        (
            "code",
            "# papermill parameters\n"
            'logs = ["../data/recorded/gloo/allgather-shape-mismatch/broken-plain-w2"]\n'
            "interactive = None  # None: widgets in JupyterLab, static tables when run headless (papermill)",
            ["parameters"],
        ),
        ("code", "import denpex_nb as dx"),
        ("code", "incident = dx.load(*logs)"),
        ("code", "incident"),
        ("code", "diagnosis = dx.diagnose(incident)"),
        ("code", "diagnosis"),
        (
            "md",
            "## Every rank's collectives\n\nOne lane per rank, one mark per collective coloured by op; the "
            "divergent collective is outlined in red, missing entries are dotted, errors (✖) and timeouts (▼) "
            "sit on the lane of the rank that reported them.",
        ),
        ("code", "dx.plot.swimlane(incident, diagnosis)"),
        ("code", 'dx.plot.swimlane(incident, diagnosis, x="time")'),
        (
            "md",
            "## Where each rank stopped\n\nOne row per rank from every source that speaks of it: its last "
            "collective issued and completed, where it timed out, the last collective call in its traceback, "
            "its first error and how it ended. Ranks known to exist but silent are rows too (`absent`).",
        ),
        ("code", "diagnosis.rank_state"),
        ("md", "## At the divergence"),
        ("code", "dx.plot.shapes_table(incident, diagnosis)"),
        ("code", "dx.plot.progress_bars(incident)"),
        ("md", "## Errors, per rank"),
        ("code", "dx.report.errors_frame(incident)"),
        (
            "md",
            "## Explore\n\nPick a rank and a process group, slide through the sequence numbers: every rank's "
            "entry at that seq. Executed headless (papermill, nbconvert) this shows a static table instead.",
        ),
        ("code", "dx.widgets.explorer(incident, diagnosis, interactive=interactive)"),
        ("code", "dx.report.record(incident, diagnosis)", ["denpex-summary"]),
    ]


def _incident_report() -> list[Cell]:
    return [
        (
            "md",
            "This notebook is the template of `denpex-nb report`: it is executed by papermill with the "
            "parameters below and rendered to HTML without its input cells.",
            ["remove_cell"],
        ),
        ("code", "# papermill parameters\nlogs = []\ntitle = None\nredact = False", ["parameters"]),
        ("code", "import denpex_nb as dx"),
        ("code", "incident, diagnosis = dx.report.prepare(logs, redact=redact)"),
        ("code", "dx.report.headline(incident, diagnosis, title=title)"),
        ("code", "dx.report.evidence(diagnosis)"),
        ("code", "dx.report.fix(diagnosis)"),
        ("code", "dx.report.pictures(incident, diagnosis)"),
        ("code", "dx.report.rank_state_section(diagnosis)"),
        ("code", "dx.report.errors_section(incident)"),
        ("code", "dx.report.other_findings(diagnosis)"),
        ("code", "dx.report.inputs(incident)"),
        ("code", "dx.report.record(incident, diagnosis)", ["denpex-summary", "remove_cell"]),
    ]


NOTEBOOKS = {
    "postmortem": _postmortem,
    "incident_report": _incident_report,
    "teach_allgather_shapes": _allgather,
    "teach_allreduce_shapes": _allreduce,
    "teach_desync": _desync,
}


def build(name: str):
    """The notebook ``name`` as an ``nbformat`` NotebookNode, without outputs."""
    import nbformat

    if name not in NOTEBOOKS:
        raise KeyError(f"unknown notebook {name!r}; known: {', '.join(NOTEBOOKS)}")
    cells = []
    for i, spec in enumerate(NOTEBOOKS[name]()):
        kind, source = spec[0], spec[1]
        tags = list(spec[2]) if len(spec) > 2 else []
        meta = {"tags": tags} if tags else {}
        cid = f"{name[:20]}-{i:02d}".replace("_", "-")
        if kind == "md":
            cell = nbformat.v4.new_markdown_cell(source, metadata=meta, id=cid)
        else:
            cell = nbformat.v4.new_code_cell(source, metadata=meta, id=cid)
        cells.append(cell)
    nb = nbformat.v4.new_notebook(cells=cells)
    nb.metadata = {
        "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
        "language_info": {"name": "python"},
    }
    return nb


def dumps(name: str) -> str:
    """The committed file's exact text (nbformat's own layout, one trailing newline)."""
    import nbformat

    return nbformat.writes(build(name)) + "\n"


def write_all(folder: str | Path = "notebooks") -> list[Path]:
    """(Re)write every notebook into ``folder``; returns the paths written."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for name in NOTEBOOKS:
        path = folder / f"{name}.ipynb"
        path.write_text(dumps(name), encoding="utf-8")
        paths.append(path)
    return paths


if __name__ == "__main__":  # python -m denpex_nb.nbtemplates [folder]
    for p in write_all(sys.argv[1] if len(sys.argv) > 1 else "notebooks"):
        print(p)
