"""The report reads at any size: ranks as ranges, the odd ranks first, the majority folded, no None/NaN/NaT.

In memory at 256 ranks (fast), and end to end at 1024 ranks (``denpex-nb report`` on a made-up
incident on disk, then headless Chromium takes a screenshot of it).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import denpex_nb as dx
from denpex_nb import report
from denpex_nb.teach import synthetic_incident

pytest.importorskip("jinja2")

MISSING = ("None", "NaN", "NaT", "<NA>", "&lt;NA&gt;", "nan")


def _cells(html: str) -> list[str]:
    return [c.strip() for c in re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", html, flags=re.S)]


def test_at_256_ranks_the_tables_fold_the_majority_and_show_the_odd_rank_first():
    inc = synthetic_incident(n_ranks=256, n_collectives=8, mismatch_at=6, culprit=217)
    d = dx.diagnose(inc)
    assert d.culprit_ranks == [217]
    div = report.divergence_frame(inc, d)
    assert div["ranks"].tolist() == ["217", "0\u2013216, 218\u2013255"]
    assert div["count"].tolist() == [1, 255] and div["_odd"].tolist() == [True, False]
    html = report.divergence_table(inc, d).to_html()
    assert "0\u2013216, 218\u2013255" in html and html.index(">217<") < html.index("0\u2013216")
    state = report.rank_state_table(d)
    assert len(state) <= 3 and state["ranks"].iloc[0] == "217"
    assert state["count"].sum() == 256
    errors = report.errors_table(inc)
    assert errors["ranks"].tolist() == ["217"] and errors["count"].tolist() == [1]
    for table in (state, errors):
        text = table.to_string()
        assert not any(re.search(rf"\b{re.escape(w)}\b", text) for w in ("None", "NaN", "NaT", "<NA>")), text


def test_one_row_per_distinct_message_with_the_ranks_that_printed_it():
    from denpex_nb.incident import Incident, coerce

    rows = [
        {
            "rank": r,
            "kind": "gloo_timeout",
            "message": f"[rank{r}] Timed out waiting 5000ms for recv from [10.0.0.{r % 200}]:{20000 + r}",
        }
        for r in range(64)
        if r != 9
    ]
    rows.append({"rank": 9, "kind": "exception", "message": "ValueError: corrupt sample on rank 9"})
    rows.append({"rank": 9, "kind": "exit", "message": "rank 9 ended with exit code 1"})
    inc = Incident(errors=coerce("errors", rows))
    t = report.errors_table(inc)
    assert len(t) == 3
    timeout = t[t["kind"] == "gloo_timeout"].iloc[0]
    assert timeout["ranks"] == "0\u20138, 10\u201363" and timeout["count"] == 63
    assert timeout["message"].startswith("[rank<rank>] Timed out waiting 5000ms")
    assert t[t["kind"] == "exit"].iloc[0]["message"] == "rank <rank> ended with exit code 1"
    assert "" in t["first seen"].tolist()  # no time: an empty cell, not NaT
    html = report.sections.plain_table(t).to_html()
    assert not any(c in MISSING for c in _cells(html)), _cells(html)
    assert "[rank&lt;rank&gt;] Timed out" in html  # log text is text, never markup


def test_different_sizes_are_never_folded_into_one_message():
    from denpex_nb.incident import Incident, coerce

    msg = "[Rank {r}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=40, OpType=ALLREDUCE, NumelIn={n})"
    rows = [
        {"rank": r, "kind": "watchdog_timeout", "message": msg.format(r=r, n=4095 if r == 5 else 4096)}
        for r in range(8)
    ]
    t = report.errors_table(Incident(errors=coerce("errors", rows)))
    assert sorted(t["ranks"]) == ["0\u20134, 6, 7", "5"]


def test_where_is_relative_to_the_inputs(tmp_path):
    from denpex_nb.incident import Incident, coerce

    inc = Incident(
        errors=coerce(
            "errors", [{"rank": 0, "kind": "exit", "message": "x", "file": str(tmp_path / "run" / "a.log"), "line": 3}]
        ),
        sources=coerce("sources", {"file": [str(tmp_path / "run" / "a.log"), str(tmp_path / "run" / "b" / "c.log")]}),
    )
    assert report.errors_table(inc)["where"].tolist() == ["a.log:3"]


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.slow
def test_a_1024_rank_report_is_small_readable_and_names_the_culprit(tmp_path):
    pytest.importorskip("papermill")
    from denpex_nb.testing.scale import write_large_incident

    planted = write_large_incident(tmp_path / "incident", world_size=1024, culprit=300)
    html_path = tmp_path / "report.html"
    res = subprocess.run(
        [sys.executable, "-m", "denpex_nb.cli", "report", str(tmp_path / "incident"), "-o", str(html_path)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    html = html_path.read_text(encoding="utf-8")
    assert len(html.encode()) < 2_000_000
    assert "1024 ranks (0\u20131023)" in html  # ranks seen
    assert "0\u2013299, 301\u20131023" in html  # the agreeing majority, folded
    cells = _cells(html)
    assert not [c for c in cells if c in MISSING]
    assert str(tmp_path) not in html  # paths relative to the inputs
    # 1024 copies folded: two rows of the errors and of the rank-state tables, and at most 20 evidence lines
    assert html.count("Watchdog caught collective operation timeout") <= 24
    # 13 MB of dumps would show a progress bar in a notebook; the report's kernel is headless: no
    # bar, so no widget state in the page (nobody saw it; it cost the kernel ipywidgets and updates)
    assert "application/vnd.jupyter.widget" not in html
    assert planted["culprit"] == 300
    if CHROMIUM is None:
        pytest.skip("chromium is not installed (CI installs Debian's chromium): the screenshot part is skipped")
    shot = tmp_path / "report.png"
    cmd = [
        CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage",
        f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1280,4000", f"--screenshot={shot}", "--dump-dom",
        html_path.resolve().as_uri(),
    ]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        dom, err = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        import signal

        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail("chromium did not finish within 120 s")
    assert proc.returncode == 0, err[-2000:]
    assert "0\u2013299, 301\u20131023" in dom
    from matplotlib.image import imread

    img = imread(str(shot))
    assert img.shape[0] >= 3000 and img[..., :3].std() > 0.05, "the screenshot looks blank"
    artifacts = os.environ.get("DENPEX_TEST_ARTIFACTS")  # where CI collects screenshots (kept in tmp_path otherwise)
    if artifacts:
        Path(artifacts).mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, Path(artifacts) / "report_1024_ranks.png")


def test_diagnose_prints_ranges_at_256_ranks_and_the_json_keeps_full_lists(tmp_path):
    from denpex_nb.testing.scale import write_large_incident

    write_large_incident(tmp_path / "incident", world_size=256, culprit=217, entries=12)
    cmd = [sys.executable, "-m", "denpex_nb.cli", "diagnose", str(tmp_path / "incident")]
    text = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert text.returncode == 0, text.stderr[-2000:]
    out = text.stdout
    assert "ranks seen: 256 ranks (0\u2013255)" in out
    assert "0\u2013216, 218\u2013255" in out and "culprit rank(s): 217" in out
    longest = max(len(re.findall(r"\b\d+\b(?:, )", ln)) for ln in out.splitlines())
    assert longest < 20, "a line lists ranks one by one"
    assert len(out.splitlines()) < 120
    js = subprocess.run([*cmd, "--json"], capture_output=True, text=True, timeout=300)
    import json

    d = json.loads(js.stdout)
    assert d["ranks_seen"] == list(range(256)) and d["culprit_ranks"] == [217]


def test_inputs_fold_per_rank_files_into_one_row_and_keep_problem_files_apart(tmp_path):
    from denpex_nb.incident import Incident, coerce

    files = [str(tmp_path / "fr" / f"comm_lib_trace_rank_{r}") for r in range(1024)]
    files += [str(tmp_path / "train.log"), str(tmp_path / "fr" / "comm_lib_trace_rank_2000")]
    inc = Incident(
        sources=coerce(
            "sources",
            {
                "file": files,
                "format": ["fr_pickle"] * 1024 + ["text", "fr_pickle"],
                "lines_total": [0] * 1024 + [10, 0],
                "error": [None] * 1025 + ["truncated pickle"],
            },
        )
    )
    html = report.inputs(inc).html
    assert "fr/comm_lib_trace_rank_{0\u20131023} (1024 files)" in html
    assert "fr/comm_lib_trace_rank_2000" in html and "truncated pickle" in html
    assert str(tmp_path) not in html and html.count("<tr>") == 4
