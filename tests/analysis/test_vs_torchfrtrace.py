"""Side by side with torchfrtrace on the same Flight Recorder dumps.

denpex_nb must agree wherever torchfrtrace answers, and answer where it crashes (gloo's pg_config,
a missing dump) or stays silent (all dumps match). torchfrtrace runs as a bounded subprocess; all
runs of this module start together in a small thread pool to keep the wall time down.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import denpex_nb as dx
from denpex_nb.testing.frcompare import (
    parse_torchfrtrace,
    run_torchfrtrace,
    torchfrtrace_command,
    write_synthetic_dumps,
)

pytestmark = pytest.mark.skipif(torchfrtrace_command() is None, reason="torchfrtrace (torch) is not installed")

ROOT = Path(__file__).resolve().parents[2]
SYNTHETIC = {  # name: (world, entries, plant, kwargs)
    "size-w8": (8, 40, "size", {"plant_rank": 5}),
    "dtype-w4": (4, 30, "dtype", {"plant_rank": 2}),
    "op-w4": (4, 30, "op", {"plant_rank": 3}),
    "skip-w4": (4, 30, "skip", {"plant_rank": 1}),
    "none-w16": (16, 30, "none", {}),
    "two-w4": (4, 30, "two", {"plant_rank": 2}),
    "gloo-pgconfig-w4": (4, 30, "size", {"plant_rank": 1, "gloo_pg_config": True}),
    "missing-dump-w4": (4, 30, "size", {"plant_rank": 1, "missing_ranks": (3,)}),
}


RECORDED_PICKS = [
    "op-mismatch/broken-plain-w4",
    "skipped-collective/broken-plain-w4",
    "allgather-shape-mismatch/fixed-plain-w2",
]


def _recorded_fr_dirs() -> list[Path]:
    """A few recorded gloo runs whose Flight Recorder dumps every rank wrote."""
    out = []
    for pick in RECORDED_PICKS:
        d = ROOT / "data/recorded/gloo" / pick / "fr"
        if d.is_dir() and any(d.iterdir()):
            out.append(d)
    return out


@pytest.fixture(scope="module")
def cases(tmp_path_factory):
    base = tmp_path_factory.mktemp("frcompare")
    jobs = {}
    for name, (world, entries, plant, kw) in SYNTHETIC.items():
        planted = write_synthetic_dumps(base / name, world, entries, plant, **kw)
        jobs[name] = (base / name, planted)
    for i, d in enumerate(_recorded_fr_dirs()):
        from denpex_nb.ingest.flight_recorder import write_repaired_dumps

        repaired = base / f"recorded-{i}-repaired"
        write_repaired_dumps(d, repaired)
        jobs[f"recorded-{i}-repaired"] = (repaired, None)
        jobs[f"recorded-{i}-raw"] = (d, None)
    # the raw gloo dumps crash torchfrtrace the same way every time: run it on the first recorded set only
    skip_frt = {n for n in jobs if n.endswith("-raw") and not n.startswith("recorded-0-")}
    with ThreadPoolExecutor(max_workers=3) as pool:
        futs = {n: pool.submit(run_torchfrtrace, d, timeout=180) for n, (d, _) in jobs.items() if n not in skip_frt}
        results = {n: f.result() for n, f in futs.items()}
    return {
        n: (d, planted, results.get(n), dx.diagnose(dx.load(d, progress=False))) for n, (d, planted) in jobs.items()
    }


def _agrees(frt_finding: dict, diagnosis) -> bool:
    """Some denpex finding at the same Flight Recorder seq, same class, same culprit (ours may be wider)."""
    for f in diagnosis.findings:
        if f.seq_kind == "fr" and f.seq == frt_finding["seq"] and f.class_id == frt_finding["class"]:
            if list(f.culprit_ranks) == frt_finding["culprit_ranks"]:
                return True
    return False


@pytest.mark.parametrize("name", ["size-w8", "dtype-w4", "op-w4", "skip-w4"])
def test_denpex_agrees_where_torchfrtrace_answers(cases, name):
    _, planted, frt, diag = cases[name]
    assert not frt.crashed and not frt.timed_out, frt.stderr[-500:]
    assert frt.findings, "torchfrtrace should answer on this case"
    for f in frt.findings:
        assert _agrees(f, diag), (f, [x.to_dict() for x in diag.findings])
    assert diag.verdict == planted.expected_class
    assert diag.culprit_ranks == [planted.rank] and diag.first.seq == planted.seq


def test_silent_when_all_match_and_denpex_says_so(cases):
    _, _, frt, diag = cases["none-w16"]
    assert frt.rc == 0 and frt.silent
    assert diag.verdict == "no-failure" and diag.findings == []


def test_every_mismatch_in_a_group_is_reported(cases):
    _, planted, frt, diag = cases["two-w4"]
    seqs = [f.seq for f in diag.findings if f.class_id == "shape-mismatch"]
    assert seqs == [planted.seq, planted.second_seq]
    assert diag.first.seq == planted.seq and diag.culprit_ranks == [planted.rank]
    for f in frt.findings:  # whatever torchfrtrace reports, we report too
        assert _agrees(f, diag)


def test_denpex_answers_where_torchfrtrace_crashes_on_gloo_pg_config(cases):
    _, planted, frt, diag = cases["gloo-pgconfig-w4"]
    assert frt.crashed and "KeyError" in frt.stderr
    assert (diag.verdict, diag.culprit_ranks, diag.first.seq) == ("shape-mismatch", [planted.rank], planted.seq)


def test_denpex_answers_when_a_dump_is_missing(cases):
    _, planted, frt, diag = cases["missing-dump-w4"]
    assert frt.crashed and "Missing dump files" in frt.stdout + frt.stderr
    # rank 3 is known to exist (pg_config) but silent: 2 against 1 of a group of 4 is no majority
    assert (diag.verdict, diag.culprit_ranks, diag.first.seq) == ("shape-mismatch", [], planted.seq)
    assert "not a majority" in diag.first.culprit_basis and planted.rank in diag.first.ranks
    assert any("rank 3" in n for n in diag.notes)


def test_recorded_gloo_dumps(cases):
    names = sorted(n for n in cases if n.startswith("recorded-") and n.endswith("-raw"))
    if not names:
        pytest.skip("no recorded Flight Recorder dumps under data/recorded yet")
    for raw in names:
        d, _, frt_raw, diag = cases[raw]
        _, _, frt_rep, _ = cases[raw.replace("-raw", "-repaired")]
        expected = json.loads((d.parent / "manifest.json").read_text())["expected"]
        # the stock analyzer cannot read raw gloo dumps (pg_config keyed ''); denpex_nb reads them as they are
        assert frt_raw is None or frt_raw.crashed, (raw, frt_raw.stderr[-300:])
        assert diag.verdict == expected["class"], (raw, diag.summary())
        if expected["class"] != "no-failure":
            assert diag.first.seq == expected["seq"]["fr"] and diag.culprit_ranks == expected["culprit_ranks"]
        # on the repaired dumps, wherever torchfrtrace answers, we found the same class at the same seq
        # (its culprit may differ: it assumes the first rank is right; ours is checked against the manifest)
        for f in frt_rep.findings:
            if f["class"] in ("shape-mismatch", "dtype-mismatch", "op-mismatch", "rank-desync"):
                assert any(
                    x.seq_kind == "fr" and x.seq == f["seq"] and x.class_id == f["class"] for x in diag.findings
                ), (raw, f, diag.summary())
        if frt_rep.silent:
            assert diag.verdict == "no-failure" or expected["class"] != "no-failure"


def test_parser_reads_the_documented_blocks():
    text = (
        "Not all ranks joining collective, sequence number: 2\ninternal record id: 1\ngroup info: 0:default_pg\n"
        "collective: gloo:all_reduce\nmissing ranks: {1}\ninput sizes: [[8]]\n"
        "Collective sequence number: 5 has errors\ncollective: nccl:all_gather\n"
        "error msg: Culprit rank 5; Error type: SIZE_OR_SYNTAX_MISMATCH, Expected input sizes: '[[16, 64]]' "
        "does not match found input sizes: '[[12, 64]]'\n"
    )
    got = parse_torchfrtrace(text)
    assert got == [
        {"seq": 2, "class": "rank-desync", "culprit_ranks": [1], "error_type": "NOT_JOINING", "op": "all_reduce"},
        {
            "seq": 5,
            "class": "shape-mismatch",
            "culprit_ranks": [5],
            "error_type": "SIZE_OR_SYNTAX_MISMATCH",
            "op": "all_gather",
        },
    ]
    assert parse_torchfrtrace("tabulate is not installed. Proceeding without it.\n") == []
