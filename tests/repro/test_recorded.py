"""The recorded runs under data/recorded agree with their manifests' ``expected`` (no processes).

This is what the closed-loop diagnosis tests rely on: for every broken run, each evidence kind
that ``expected.seq`` names really shows the planted collective at that seq.
"""

from __future__ import annotations

import json
import pickle
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2] / "data" / "recorded" / "gloo"
RUNS = sorted(p.parent for p in ROOT.glob("*/*/manifest.json")) if ROOT.is_dir() else []


class _PlainData(pickle.Unpickler):
    def find_class(self, module, name):
        raise pickle.UnpicklingError(f"refusing {module}.{name}")


def _ops(expected):
    return {expected["op"], expected.get("peer_op")} - {None}


def _trace_issues(run):
    out = []
    for f in sorted((run / "trace").glob("denpex_trace_rank*.jsonl")):
        out += [d for d in map(json.loads, f.read_text().splitlines()) if d.get("event") == "issue"]
    return out


def _fr_entries(run):
    out = []
    for f in sorted((run / "fr").glob("comm_lib_trace_rank_*")):
        with open(f, "rb") as fh:
            out += [e for e in _PlainData(fh).load()["entries"] if e["pg_id"] == 0]
    return out


def test_recorded_tree_is_complete_and_small():
    if not RUNS:
        pytest.skip("data/recorded/gloo is absent (regenerate with: denpex-nb repro record)")
    index = json.loads((ROOT / "index.json").read_text())
    assert len(RUNS) == len(index) == 64
    scenarios = {r.parent.name for r in RUNS}
    assert len(scenarios) == 8
    total = sum(f.stat().st_size for f in ROOT.parent.rglob("*") if f.is_file())
    assert total < 5 * 1024 * 1024


@pytest.mark.parametrize("run", RUNS, ids=[f"{r.parent.name}/{r.name}" for r in RUNS])
def test_recorded_run_matches_expected(run):
    m = json.loads((run / "manifest.json").read_text())
    exp = m["expected"]
    assert m["scenario"] == run.parent.name and run.name.startswith(m["variant"])
    assert run.name.endswith(f"-w{m['world_size']}")
    for rel in m["files"]:
        assert (run / rel).is_file(), rel
    if m["variant"] == "fixed":
        assert exp["class"] == "no-failure" and m["exit_codes"] == [0] * m["world_size"]
        return
    assert any(c != 0 for c in m["exit_codes"]), "a broken run must fail on at least one rank"
    seq = exp["seq"]
    if seq["trace"] is not None:
        hits = [d for d in _trace_issues(run) if d["seq"] == seq["trace"] and d["op"] in _ops(exp)]
        assert hits, f"no trace issue line for {exp['op']} at seq {seq['trace']}"
    if seq["fr"] is not None:
        hits = [
            e
            for e in _fr_entries(run)
            if e["collective_seq_id"] == seq["fr"] and e["profiling_name"].split(":", 1)[1] in _ops(exp)
        ]
        assert hits, f"no Flight Recorder entry for {exp['op']} at seq {seq['fr']}"
    if seq["detail"] is not None:
        text = (run / "combined.log").read_text(encoding="utf-8")
        assert re.search(rf"SequenceNumber={seq['detail']}\b", text), f"no DETAIL SequenceNumber={seq['detail']}"
