"""Real runs and rendered reports shared by the notebook/report/browser tests (made once per session).

A recorded gloo run from ``data/recorded/gloo/`` is used when the repository has one; otherwise
the reproducer runs live (bounded: 2 ranks, 5 s collective timeout, hard kill).
"""

from __future__ import annotations

import atexit
import functools
import shutil
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_TMP = Path(tempfile.mkdtemp(prefix="denpex-nbtests-"))
atexit.register(shutil.rmtree, _TMP, True)


def tmp_root() -> Path:
    return _TMP


@functools.cache
def run_dir(scenario: str = "allgather-shape-mismatch", fixed: bool = False, world_size: int = 2) -> Path:
    """A folder holding one real run of ``scenario`` (recorded if available, else run now)."""
    variant = "fixed" if fixed else "broken"
    rec = ROOT / "data" / "recorded" / "gloo" / scenario
    for mode in ("plain", "trace", "off"):
        cand = rec / f"{variant}-{mode}-w{world_size}"
        if (cand / "manifest.json").exists():
            return cand
    from denpex_nb import repro

    out = _TMP / f"{scenario}-{variant}-w{world_size}"
    repro.run(scenario, fixed=fixed, world_size=world_size, trace=True, timeout=5.0, out=out)
    return out


@functools.cache
def rendered_report():
    """``denpex_nb.report.render`` of the all_gather run, HTML and executed notebook kept."""
    from denpex_nb import report

    out = _TMP / "report"
    return report.render(
        [str(run_dir())], out / "report.html", ipynb=out / "report.ipynb", title="Test incident report"
    )
