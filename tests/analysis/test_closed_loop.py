"""Closed loop: every reproducer scenario, broken and fixed, diagnosed against what it planted.

Two sources of real runs:

* the recorded runs under ``data/recorded/`` (every scenario x broken/fixed x plain/detail x 2/4
  ranks, with trace and Flight Recorder dumps), one test per run;
* a lean set of LIVE runs made now with :func:`denpex_nb.repro.run` (2 ranks, every scenario
  broken and fixed, trace + Flight Recorder) in a session fixture under a temp dir.

For each run: the verdict, the seq (in the counter the finding uses), the op and the culprit must
match the manifest's ``expected``; fixed variants must be ``no-failure``. A culprit may be
undetermined ([]) only where the evidence is a tie: two ranks that disagree.

Then the same run diagnosed from its TEXT LOGS ONLY (no trace, no Flight Recorder, no manifest)
must give the class those logs support. What plain logs can and cannot tell, on gloo, torch 2.13:

==========================  ======================================  =====================================
scenario                    plain (no debug variables)              DETAIL (INFO for DDP)
==========================  ======================================  =====================================
allgather-shape-mismatch    shape-mismatch: gloo aborts 'X vs Y'     shape-mismatch, both shapes named
allreduce-shape-mismatch    shape-mismatch ('X vs Y'), or only      shape-mismatch, both shapes named
                            timeouts with live peers (4 ranks)
dtype-mismatch              a size mismatch ('16 vs 8'): shape or   dtype-mismatch
                            dtype cannot be told -> shape-mismatch
op-mismatch                 op-mismatch when the tracebacks end in  op-mismatch ('Op type: Xvs Y')
                            different collective calls, else
                            timeout-undetermined
skipped-collective          timeout-undetermined: 'Connection       rank-desync (monitoredBarrier names
                            closed by peer' names no rank           the missing rank)
ddp-unused-parameters       unused-parameters (the reducer error)   unused-parameters
rank-crash                  rank-crash (the exception)              rank-crash
syncbn-eval-single-rank     op-mismatch (the tracebacks end in      syncbn-eval-hang (fingerprints show
                            all_gather on one rank, barrier on the
                            other; syncbn-eval-hang when a frame
                            names SyncBatchNorm), or
                            timeout-undetermined
                                                                    the 2C+1 statistics all_gather)
==========================  ======================================  =====================================
"""

from __future__ import annotations

import glob
import json
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import denpex_nb as dx
from tests.diagnosed import diagnosed

ROOT = Path(__file__).resolve().parents[2]
RECORDED = sorted(glob.glob(str(ROOT / "data/recorded/**/manifest.json"), recursive=True))

TEXT_ONLY = {  # scenario -> debug mode -> verdicts the text logs alone support
    "allgather-shape-mismatch": {"off": {"shape-mismatch"}, "detail": {"shape-mismatch"}},
    "allreduce-shape-mismatch": {"off": {"shape-mismatch", "timeout-undetermined"}, "detail": {"shape-mismatch"}},
    "dtype-mismatch": {"off": {"shape-mismatch", "dtype-mismatch"}, "detail": {"dtype-mismatch"}},
    "op-mismatch": {"off": {"timeout-undetermined", "op-mismatch"}, "detail": {"op-mismatch"}},
    # without DETAIL the survivors only read "Connection closed by peer": the rank that returned early
    # went away first, a crash of the peer at low confidence is what those lines establish
    "skipped-collective": {"off": {"timeout-undetermined", "rank-crash"}, "detail": {"rank-desync"}},
    "ddp-unused-parameters": {
        "off": {"unused-parameters"},
        "info": {"unused-parameters"},
        "detail": {"unused-parameters"},
    },
    "rank-crash": {"off": {"rank-crash"}, "detail": {"rank-crash"}, "info": {"rank-crash"}},
    "syncbn-eval-single-rank": {
        "off": {"timeout-undetermined", "syncbn-eval-hang", "op-mismatch"},
        "detail": {"syncbn-eval-hang"},
    },
}


def _family(op: str | None) -> str | None:
    if op is None:
        return None
    return "all_gather" if op.startswith("all_gather") else op.replace("_tensor", "")


def check_against_expected(diagnosis, manifest: dict) -> None:
    """The verdict, seq, op and culprit against the run's ``expected`` (see the module docstring)."""
    exp = manifest["expected"]
    world = int(manifest.get("world_size", 0))
    desc = (
        f"{manifest.get('scenario')} {manifest.get('variant')} debug={manifest.get('debug')} w{world}: "
        f"{diagnosis.summary()} | findings={[f.to_dict()['class'] for f in diagnosis.findings]}"
    )
    if exp["class"] == "no-failure":
        assert diagnosis.verdict == "no-failure", desc
        return
    assert diagnosis.verdict == exp["class"], desc
    f = diagnosis.first
    seqs = exp.get("seq") or {}
    if f.seq_kind in seqs and seqs[f.seq_kind] is not None:
        assert f.seq == seqs[f.seq_kind], desc
    assert f.seq is not None or not any(v is not None for v in seqs.values()), desc
    if f.op is not None:
        assert _family(f.op) == _family(exp["op"]), desc
    else:
        assert f.class_id == "op-mismatch" and not f.culprit_ranks, desc  # a tie names no op
    if f.culprit_ranks:
        assert sorted(f.culprit_ranks) == sorted(exp["culprit_ranks"]), desc
    else:
        # a culprit needs a strict majority of the group (or a statement): with the planted ranks
        # half of the group or more, the rest are no majority, so undetermined is the honest answer
        no_majority = 2 * len(exp["culprit_ranks"]) >= world
        assert no_majority, "culprit undetermined although the others are a strict majority: " + desc


def text_logs(run_dir: Path) -> list[str]:
    return sorted(glob.glob(str(run_dir / "**" / "*.log"), recursive=True))


def check_text_only(run_dir: Path, manifest: dict) -> None:
    exp = manifest["expected"]
    d = dx.diagnose(dx.load(*text_logs(run_dir), progress=False))
    desc = f"text only, {run_dir}: {d.summary()}"
    if exp["class"] == "no-failure":
        assert d.verdict in ("no-failure", "no-evidence"), desc
        return
    allowed = set(TEXT_ONLY[manifest["scenario"]][manifest.get("debug", "off")])
    if not d.findings and _no_errors(run_dir):
        # the logs hold no error at all (e.g. a hang cut short by the harness before any timeout):
        # saying "no-failure" is then all these logs support
        allowed.add("no-failure")
    assert d.verdict in allowed, desc
    if d.culprit_ranks and d.verdict == exp["class"]:
        assert sorted(d.culprit_ranks) == sorted(exp["culprit_ranks"]), desc


def _no_errors(run_dir: Path) -> bool:
    return dx.load(*text_logs(run_dir), progress=False).errors.empty


# --- recorded runs ----------------------------------------------------------------------------


def _rid(path: str) -> str:
    return str(Path(path).parent.relative_to(ROOT / "data/recorded"))


@pytest.mark.skipif(not RECORDED, reason="no recorded runs under data/recorded yet")
@pytest.mark.parametrize("manifest_path", RECORDED, ids=[_rid(p) for p in RECORDED])
def test_recorded_run(manifest_path):
    run_dir = Path(manifest_path).parent
    manifest = json.loads(Path(manifest_path).read_text())
    check_against_expected(diagnosed(run_dir), manifest)  # strict, made once per process (test_catalog too)
    check_text_only(run_dir, manifest)


# --- live runs --------------------------------------------------------------------------------

#: the lean live set: scenarios that fail fast (no collective timeout to wait for), broken + one fixed.
#: DENPEX_LIVE_ALL=1 runs every scenario broken and fixed (about 16 runs; minutes on 2 cores).
LEAN_LIVE = [
    ("allgather-shape-mismatch", False),
    ("allgather-shape-mismatch", True),
    ("allreduce-shape-mismatch", False),
    ("dtype-mismatch", False),
    ("skipped-collective", False),
    ("rank-crash", False),
]


def _live_plan():
    if os.environ.get("DENPEX_LIVE_ALL") == "1":
        from denpex_nb.repro import registry

        return [(sid, fixed) for sid in registry.scenarios() for fixed in (False, True)]
    return LEAN_LIVE


@pytest.fixture(scope="session")
def live_runs(tmp_path_factory):
    pytest.importorskip("torch")
    from denpex_nb.repro import run

    base = tmp_path_factory.mktemp("closed_loop_live")

    def one(item):
        sid, fixed = item
        out = base / f"{sid}-{'fixed' if fixed else 'broken'}"
        res = run(sid, fixed=fixed, world_size=2, flight_recorder=True, trace=True, timeout=2.0, out=out)
        return item, res.out_dir, res.manifest

    with ThreadPoolExecutor(max_workers=2) as pool:
        return {item: (Path(d), m) for item, d, m in pool.map(one, _live_plan())}


def _live_ids():
    try:
        return [f"{sid}-{'fixed' if fixed else 'broken'}" for sid, fixed in _live_plan()]
    except Exception:  # pragma: no cover - registry import problem shows in the fixture
        return None


@pytest.mark.slow
@pytest.mark.parametrize("item", _live_plan(), ids=_live_ids())
def test_live_run(live_runs, item):
    run_dir, manifest = live_runs[item]
    check_against_expected(diagnosed(run_dir), manifest)  # strict, made once per process (test_catalog too)
    check_text_only(run_dir, manifest)
