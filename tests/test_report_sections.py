"""The report's sections without a kernel: HTML from the Jinja2 templates, escaped, masks kept as text."""

from __future__ import annotations

import fnmatch
from pathlib import Path
from types import SimpleNamespace

import pytest
import tomllib

import denpex_nb as dx
from denpex_nb import report
from denpex_nb.analysis import catalog
from denpex_nb.incident import Incident
from denpex_nb.teach import synthetic_incident

pytest.importorskip("jinja2")

ROOT = Path(__file__).resolve().parents[1]
TEMPLATES = ROOT / "denpex_nb" / "report" / "templates"


def _diagnosis_with_evidence(*texts):
    lines = [
        SimpleNamespace(rank=r, file="[inputs]/rank<0>.log", line=i + 1, text=t)
        for i, (r, t) in enumerate(zip((0, None, 1), texts))
    ]
    return SimpleNamespace(first=SimpleNamespace(evidence=lines))


def test_evidence_is_text_not_markup_and_redaction_masks_stay_visible():
    html = report.evidence(_diagnosis_with_evidence("<script>alert(1)</script> on [host-1]", "a & b", "'q' \"d\"")).html
    assert "<script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt; on [host-1]" in html
    assert "a &amp; b" in html and "[inputs]/rank&lt;0&gt;.log:1" in html
    assert "<host" not in html and "&lt;host" not in html
    assert html.startswith("<h2>Evidence</h2>")


def test_evidence_without_lines_says_why():
    assert "nothing failed" in report.evidence(SimpleNamespace(first=None)).html
    assert "carries no evidence lines" in report.evidence(SimpleNamespace(first=SimpleNamespace(evidence=[]))).html


def test_long_evidence_is_cut_with_a_count():
    html = report.evidence(_diagnosis_with_evidence("x", "y", "z"), max_lines=1).html
    assert html.count("dx-evidence") == 1 and "and 2 more lines" in html


@pytest.mark.parametrize("class_id", catalog.IDS)
def test_fix_shows_the_catalog_entry(class_id):
    from markupsafe import escape  # the escaping Jinja2's autoescape applies

    entry = catalog.get(class_id)
    html = report.fix(SimpleNamespace(verdict=class_id)).html
    assert f"<h2>Fix: {escape(entry.title)}</h2>" in html
    assert f"<b>Root cause.</b> {escape(entry.root_cause)}" in html and "How to confirm." in html
    for backend, what in entry.mechanism.items():
        assert f"<li><b>{escape(backend)}</b>: {escape(what)}</li>" in html
    for item in entry.confirm["checklist"]:
        assert f"<li>{escape(item)}</li>" in html
    code = entry.fix["code"]
    assert (f">{escape(code)}</pre>" in html) if code else "<pre" not in html


def test_fix_for_an_id_the_catalog_lacks_says_so_escaped():
    html = report.fix(SimpleNamespace(verdict="made-up<b>")).html
    assert "The catalog has no entry for <code>made-up&lt;b&gt;</code>." in html


def test_headline_names_the_verdict_and_escapes_the_title():
    incident = synthetic_incident(n_ranks=4, mismatch_at=6, culprit=1)
    diagnosis = dx.diagnose(incident)
    html = report.headline(incident, diagnosis, title="job on [host-3] <b>").html
    assert "<h1>job on [host-3] &lt;b&gt;</h1>" in html
    assert f'<span class="dx-verdict-id">{diagnosis.verdict}</span>' in html
    assert f"{diagnosis.confidence} confidence" in html and "<style>" in html
    assert html.index("Verdict:") < html.index("culprit rank(s)")


def test_headline_of_an_empty_incident_says_there_is_no_distributed_content():
    incident = Incident(notes=["no log paths were given"])
    html = report.headline(incident, dx.diagnose(incident)).html
    assert "No distributed content found" in html and "<li>no log paths were given</li>" in html
    assert "Verdict:" not in html


def test_other_findings_and_inputs():
    incident = synthetic_incident(n_ranks=4, mismatch_at=6, culprit=1)
    diagnosis = dx.diagnose(incident)
    others = report.other_findings(diagnosis).html
    assert others == "" if len(diagnosis.findings) <= 1 else others.startswith("<h2>Other findings</h2>")
    html = report.inputs(incident).html
    assert html.startswith("<h2>Inputs</h2>") and f"{incident.lines.total} lines" in html


def test_every_template_ships_as_package_data_and_is_used():
    globs = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["denpex_nb"]
    names = sorted(p.name for p in TEMPLATES.iterdir() if p.is_file())
    assert names
    for name in names:
        assert any(fnmatch.fnmatch(f"report/templates/{name}", g) for g in globs), name
    source = "".join(p.read_text() for p in (ROOT / "denpex_nb" / "report").glob("*.py"))
    source += "".join((TEMPLATES / n).read_text() for n in names)
    unused = [n for n in names if f'"{n}"' not in source]
    assert not unused, f"templates nothing renders: {unused}"
