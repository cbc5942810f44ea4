"""Alternatives, not one guess (issue 16, deliverable 4).

``Diagnosis.alternatives`` lists the other classes the evidence is consistent with (one finding per
class, never the verdict's class, with its evidence and confidence); the verdict stays the single
best one. Every view shows them as "also consistent with": ``summary()``, ``str()``, ``to_dict()``
(the ``--json`` contract), the notebook HTML, the report's headline, the CLI.
"""

from __future__ import annotations

import json

import pytest

import denpex_nb as dx
from denpex_nb.analysis import alternatives
from denpex_nb.analysis.model import Diagnosis, Evidence, Finding

_TIMEOUT = (
    "[rank{r}]:[E501 10:00:00.000000 1 ProcessGroupNCCL.cpp:632] [Rank {r}] Watchdog caught collective operation "
    "timeout: WorkNCCL(SeqNum=12, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600013 "
    "milliseconds before timing out."
)
_EXIT = "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: 1) local_rank: 1 (pid: 99) of binary: x"


def _f(cls, conf="medium", **kw):
    return Finding(class_id=cls, summary=f"{cls} summary", confidence=conf, **kw)


def test_one_per_class_never_the_verdicts_and_no_consequences():
    found = [
        _f("rank-desync", "high"),
        _f("rank-desync"),
        _f("op-mismatch", consequence_of="rank-desync@work:3"),
        _f("nccl-error"),
    ]
    side = [_f("rank-crash", "low"), _f("nccl-error", "low")]
    alts = alternatives(found, side)
    assert [a.class_id for a in alts] == ["nccl-error", "rank-crash"]
    assert alternatives([], side)[0].class_id == "rank-crash"  # beside a no-failure verdict too
    assert alternatives(found[:1], []) == []


def test_every_view_shows_them(tmp_path):
    p = tmp_path / "job.log"
    p.write_text("\n".join([_TIMEOUT.format(r=r) for r in (0, 2, 3)] + [_EXIT]) + "\n")
    d = dx.diagnose(dx.load(str(p), progress=False), strict=True)
    assert d.verdict != "rank-crash" and d.alternatives
    alt = d.alternatives[0]
    assert alt.class_id == "rank-crash" and alt.evidence and alt.confidence in ("low", "medium")
    assert "also consistent with: rank-crash" in d.summary()
    assert "also consistent with (1, not the verdict):" in str(d)
    data = json.loads(d.to_json())
    assert data["verdict"] == d.verdict
    assert data["alternatives"][0]["class"] == "rank-crash"
    assert data["alternatives"][0]["evidence"][0]["line"] == 4
    assert "also consistent with" in d._repr_html_()


def test_a_diagnosis_without_alternatives_says_nothing_of_them():
    d = Diagnosis(findings=[_f("rank-crash")])
    assert d.also() == "" and "also consistent" not in d.summary() + str(d) + d._repr_html_()
    assert d.to_dict()["alternatives"] == []


def test_the_html_escapes_them():
    d = Diagnosis(
        findings=[_f("rank-desync")],
        alternatives=[
            Finding(
                class_id="rank-crash",
                summary="<script>x</script>",
                confidence="low",
                evidence=(Evidence("a<b>.log", 3, "<i>t</i>"),),
            )
        ],
    )
    html = d._repr_html_()
    assert "<script>" not in html and "&lt;script&gt;" in html and "a&lt;b&gt;.log" in html


def test_the_report_headline_and_the_cli_show_them(tmp_path, capsys):
    pytest.importorskip("jinja2")
    from denpex_nb import cli, report

    p = tmp_path / "job.log"
    p.write_text("\n".join([_TIMEOUT.format(r=r) for r in (0, 2)] + [_EXIT]) + "\n")
    inc = dx.load(str(p), progress=False)
    d = dx.diagnose(inc)
    html = report.headline(inc, d).html
    assert "Also consistent with" in html and "<b>rank-crash</b>" in html
    assert cli.main(["diagnose", str(p), "--quiet"]) == 0
    assert "also consistent with" in capsys.readouterr().out
    assert cli.main(["diagnose", str(p), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["alternatives"][0]["class"] == "rank-crash"
