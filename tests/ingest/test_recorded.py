"""Recorded reproducer runs load with the ranks, ops, seqs and shapes their manifests say were planted.

Runs come from ``data/recorded/`` (written by ``denpex-nb repro record``). When none are there yet,
one real 2-rank gloo run is made with :func:`denpex_nb.repro.run` (slow: real processes).
"""

from __future__ import annotations

import glob
import json
import os

import pytest

import denpex_nb as dx
from denpex_nb.incident import FRAMES, check_schema

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RECORDED = os.path.join(ROOT, "data", "recorded")


def recorded_runs() -> list[str]:
    return sorted(os.path.dirname(m) for m in glob.glob(os.path.join(RECORDED, "**", "manifest.json"), recursive=True))


@pytest.fixture(scope="session")
def fresh_run(tmp_path_factory):
    if recorded_runs():
        pytest.skip("recorded runs cover this")
    pytest.importorskip("torch")
    from denpex_nb import repro

    out = tmp_path_factory.mktemp("h3run") / "allgather"
    repro.run("allgather-shape-mismatch", world_size=2, flight_recorder=True, trace=True, out=str(out))
    return str(out)


def check_run(run: str) -> None:
    m = json.load(open(os.path.join(run, "manifest.json")))
    inc = dx.load(run, progress=False)
    # every line accounted for, every frame on schema
    s = inc.sources
    assert (s["lines_total"] == s["lines_parsed"] + s["lines_unparsed"]).all()
    for name in FRAMES:
        assert check_schema(name, getattr(inc, name)) == [], name
    assert not s["error"].notna().any(), s[s["error"].notna()]
    world = m["world_size"]
    assert set(range(world)) <= set(inc.ranks_seen)
    ranks = inc.ranks.set_index("rank")
    for r in m.get("ranks", []):
        assert ranks.loc[r["rank"], "exit_code"] == r["exit_code"], r
    exp = m.get("expected") or {}
    seqs = exp.get("seq") or {}
    ev = inc.events
    for kind in ("trace", "fr"):
        want = seqs.get(kind)
        have = ev[ev["seq_kind"] == kind]
        if not want or have.empty:
            continue
        at = have[have["seq"] == want]
        assert len(at), (run, kind, want)
        if exp.get("op"):
            assert exp["op"] in set(at["op"]) or exp["op"].replace("_into_tensor", "") in set(at["op"]), (run, kind)
        for rank, shape in (exp.get("shapes") or {}).items():
            row = at[at["rank"] == int(rank)]
            if len(row):
                assert row["in_shapes"].iloc[0] == tuple(tuple(d) for d in shape), (run, kind, rank)
    # one run's duplicated lines (combined.log + attempt_0/<R>/*) were folded
    if os.path.exists(os.path.join(run, "combined.log")):
        key = ["rank", "kind", "message"]
        assert not inc.errors.duplicated(subset=key).any()


@pytest.mark.parametrize(
    "run",
    recorded_runs() or [pytest.param(None, marks=pytest.mark.skip("no data/recorded yet"))],
    ids=lambda r: os.path.relpath(r, RECORDED) if r else "none",
)
def test_recorded_run_loads_with_what_was_planted(run):
    check_run(run)


@pytest.mark.slow
def test_a_fresh_reproducer_run_loads_with_what_was_planted(fresh_run):
    check_run(fresh_run)
    inc = dx.load(fresh_run, progress=False)
    # the rank that aborted in the all_gather (gloo EnforceNotMet) never completed it
    tr = inc.events[(inc.events["seq_kind"] == "trace") & (inc.events["op"] == "all_gather")]
    assert set(tr[tr["state"] == "scheduled"]["rank"]) == {1}
    assert inc.ranks.set_index("rank").loc[1, "signal"] == "SIGABRT"
