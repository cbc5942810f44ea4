"""The 16 semantic changes of issue #15, re-applied by hand: each must be killed by the suite.

A random mutation sample measures how many mutants die, not whether the diagnosis's decisions are
pinned: most random mutants break something every test touches. These 16 changes are the ones a
reviewer tried (a flipped comparison, a boundary moved by one, min for max, a tie broken one way, a
case dropped) that once survived all of ``tests/analysis/``; each changes what a user is told.

Each mutation is (file, exact old snippet, new snippet, one-line description, test selection, the
test that pins the decision on a small input). The bench copies the working tree to a temporary
folder once (the worktree is never edited in place), checks the unmutated copy passes every pin,
then per mutation: applies it to the copy, runs the pinning test first and, only if the pin does
not fail, the whole selection (``-x``: the first failure is enough), and restores the file.

Verdicts: ``killed`` (by the pin, or by another test of the selection, which is reported),
``survived``, ``STALE`` (the old snippet is no longer found exactly once: the code moved and the
mutation must be rewritten; the bench exits non-zero so it cannot pass silently), ``timeout``
(counted as survived: a hang is not a kill). Writes ``benchmarks/results/bench_hand_mutations.json``.

    python benchmarks/bench_hand_mutations.py                 # all 16 (pins first, selections on survival)
    python benchmarks/bench_hand_mutations.py --only 4 11     # some of them
    python benchmarks/bench_hand_mutations.py --full          # run every selection in full (all killers)
    python benchmarks/bench_hand_mutations.py --tests tests/analysis/test_properties_*.py  # do these kill them?
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
OUT = os.path.join(HERE, "results", "bench_hand_mutations.json")

ANALYSIS = ("tests/analysis/",)
READERS = ("tests/ingest/",)
FIXES = ("tests/test_fixes.py",)
D = "tests/analysis/test_decisions_"  # the modules that pin each rule's decisions
P = "tests/analysis/test_properties_"


@dataclass(frozen=True)
class Mutation:
    n: int
    file: str
    old: str
    new: str
    what: str  # the change, and what a user would be told on a small input
    selection: tuple[str, ...]
    pin: str  # the test that pins the decision on a small input (a pytest node id)


MUTATIONS = [
    Mutation(
        1,
        "denpex_nb/analysis/align.py",
        '        "reduce",\n        "broadcast",\n',
        "",
        "align._SAME_SHAPE without broadcast/reduce: a broadcast of (2, 4) on one rank and (4, 2) on two "
        "becomes no-failure",
        ANALYSIS,
        D + "align.py::test_same_count_other_shape_is_a_shape_divergence_for_every_same_shape_op",
    ),
    Mutation(
        2,
        "denpex_nb/analysis/align.py",
        # the best row first: 3 - quality; the worst first, with the same low bit (1 - done) that
        # the packed sort key carries past the sort: quality ^ 1
        "sort_key = (key << 2) | (3 - quality)",
        "sort_key = (key << 2) | (quality ^ 1)",
        "align's row de-duplication keeping the worst row: a duplicate row with no size hides a size mismatch",
        ANALYSIS,
        D + "align.py::test_a_duplicate_row_without_size_never_hides_the_sized_one",
    ),
    Mutation(
        3,
        "denpex_nb/analysis/align.py",
        "local_div = ~op_div & ~dt_div & ~size_div & bad_any",
        "local_div = multi & ~op_div & ~dt_div & ~size_div & bad_any",
        "align's local all_gather rule requiring >= 2 ranks: one rank's all_gather with out != in x group is "
        "no longer a shape mismatch",
        ANALYSIS,
        D + "align.py::test_one_ranks_all_gather_with_the_wrong_output_size_is_a_local_size_divergence",
    ),
    Mutation(
        4,
        "denpex_nb/analysis/rules.py",
        "extra = len(d.present) < len(d.missing)",
        "extra = len(d.present) <= len(d.missing)",
        "from_divergences with < turned into <=: a 2-vs-2 split says 'extra collective' instead of 'never reached'",
        ANALYSIS,
        D + "divergences.py::test_an_even_split_says_never_reached_not_extra_collective",
    ),
    Mutation(
        5,
        "denpex_nb/analysis/rules.py",
        "        side, other = (ahead, behind) if len(ahead) < len(behind) else (behind, ahead)\n"
        "        culprits = side if len(other) * 2 > group else []\n",
        "        side, other = (ahead, behind) if len(ahead) <= len(behind) else (behind, ahead)\n"
        "        culprits = side if len(other) * 2 >= group else []\n",
        "from_progress breaking 1-vs-1 ties towards the rank ahead (> loosened to >=): a culprit appears",
        ANALYSIS,
        D + "positions.py::test_progress_one_against_one_names_no_culprit",
    ),
    Mutation(
        6,
        "denpex_nb/ingest/c10d.py",
        "state = State.STARTED if m.group(2) == State.STARTED else State.COMPLETED",
        "state = State.STARTED",
        "the c10d desync snapshot reading 'finished' rows as 'started'",
        READERS,
        "tests/ingest/test_properties_readers.py::test_every_desync_snapshot_word_maps_to_its_state",
    ),
    Mutation(
        7,
        "denpex_nb/ingest/prefixes.py",
        "limit = ref.replace(tzinfo=None) + _ZONE_SLACK",
        "limit = ref.replace(tzinfo=None)",
        "prefixes._year_of without its slack past the file's time (the '+ 1' of the issue): a line of a zone "
        "ahead of UTC, just past the file's time, is dated a year early",
        READERS,
        "tests/ingest/test_properties_readers.py::test_a_line_one_month_past_the_files_month_keeps_its_year",
    ),
    Mutation(
        8,
        "denpex_nb/fixes.py",
        "(longest - out.shape[0],) + tuple(out.shape[1:]), pad_value, dtype=out.dtype",
        "(longest - out.shape[0],) + tuple(out.shape[1:]), 0, dtype=out.dtype",
        "fixes.all_reduce_padded padding with 0 instead of pad_value: MAX over negative data returns zeros",
        FIXES,
        "tests/test_fixes.py::test_all_reduce_padded_pads_with_the_ops_identity",
    ),
    Mutation(
        9,
        "denpex_nb/analysis/rules.py",
        "return bool(_NCCL_WARN_FAILURE.search(m)) and not _NCCL_WARN_BENIGN.search(m)",
        "return bool(_NCCL_WARN_FAILURE.search(m))",
        "is_failure without its benign-WARN filter: a clean run with NCCL's plugin-not-found WARN becomes nccl-error",
        ANALYSIS,
        D + "failures.py::test_a_benign_nccl_warn_is_not_a_failure",
    ),
    Mutation(
        10,
        "denpex_nb/analysis/rules.py",
        "in collective_at for d in range(_WRAP_LINES + 1))",
        "in collective_at for d in range(_WRAP_LINES))",
        "own_failures with a wrap window one line shorter: a cut-off exception becomes rank-crash",
        ANALYSIS,
        D + "failures.py::test_an_exception_cut_off_three_lines_before_its_collective_error_is_not_a_crash",
    ),
    Mutation(
        11,
        "denpex_nb/analysis/rules.py",
        "lo = min(s for s, _ in pos.values())",
        "lo = max(s for s, _ in pos.values())",
        "stuck_points taking the max position instead of the min: the summary names the wrong rank as behind",
        ANALYSIS,
        D + "positions.py::test_stuck_points_names_the_lowest_positions_behind",
    ),
    Mutation(
        12,
        "denpex_nb/analysis/rules.py",
        "            (ClassId.OP_MISMATCH, lambda v: v.op),\n"
        "            (ClassId.DTYPE_MISMATCH, lambda v: (v.dtypes or [None])[0]),\n"
        "            (ClassId.SHAPE_MISMATCH, lambda v: None if v.shapes is None else str(v.shapes)),\n"
        "            (ClassId.RANK_DESYNC, lambda v: v.seq),\n",
        "            (ClassId.RANK_DESYNC, lambda v: v.seq),\n"
        "            (ClassId.OP_MISMATCH, lambda v: v.op),\n"
        "            (ClassId.DTYPE_MISMATCH, lambda v: (v.dtypes or [None])[0]),\n"
        "            (ClassId.SHAPE_MISMATCH, lambda v: None if v.shapes is None else str(v.shapes)),\n",
        "fingerprint_pairs comparing seq before op: a pair that differs in both is no longer op-mismatch",
        ANALYSIS,
        D + "nccl.py::test_a_fingerprint_pair_differing_in_op_and_seq_is_an_op_mismatch",
    ),
    Mutation(
        13,
        "denpex_nb/analysis/rules.py",
        "if len(ranked) == len(known):",
        "if ranked:",
        "_nccl_cell accepting a partial rank map: with one process known only by host:pid, rank 3 is named "
        "culprit at high confidence",
        ANALYSIS,
        D + "nccl.py::test_a_process_known_only_by_host_pid_leaves_the_culprit_undetermined",
    ),
    Mutation(
        14,
        "denpex_nb/analysis/state.py",
        "return GroupSize(int(ws.max()), \"the collective records'",
        "return GroupSize(int(ws.min()), \"the collective records'",
        "group_size taking min instead of max: world size 8 plus a 2-rank subgroup lets a 3-vs-1 split name a culprit",
        ANALYSIS,
        D + "state.py::test_a_subgroups_size_never_lowers_the_world_size",
    ),
    Mutation(
        15,
        "denpex_nb/analysis/initiator.py",
        "            if len(first) == 1:\n                return first.pop()\n",
        "            if first:\n                return min(first)\n",
        "initiating_rank breaking a time tie towards the lowest rank: two OOMs at one timestamp name rank 0 first",
        ANALYSIS,
        D + "initiator.py::test_two_own_failures_at_one_instant_name_no_initiator",
    ),
    Mutation(
        16,
        "denpex_nb/analysis/explain.py",
        "behind <= crashed:",
        "behind & crashed:",
        "crash_behind_desync with <= turned into &: laggards {3, 4} where only 3 ran out of memory blames 4 too",
        ANALYSIS,
        D + "explain.py::test_a_crash_explains_a_desync_only_when_every_laggard_crashed",
    ),
]

_IGNORE = shutil.ignore_patterns(".git", "__pycache__", ".hypothesis", ".pytest_cache", "*.egg-info", ".mutmut-cache")


@dataclass
class Result:
    n: int
    file: str
    what: str
    verdict: str  # killed | survived | STALE | timeout
    killed_by: list
    pin: str
    pin_failed: bool | None
    seconds: float
    detail: str = ""


def _pytest(copy: str, args: list[str], timeout: float) -> tuple[int | None, str]:
    env = dict(os.environ, PYTHONPATH=copy, PYTHONDONTWRITEBYTECODE="1")
    env.pop("PYTEST_ADDOPTS", None)
    cmd = [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "-rf", *args]
    try:
        run = subprocess.run(cmd, cwd=copy, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        return None, out
    return run.returncode, run.stdout + run.stderr


def _failed(out: str) -> list[str]:
    return sorted(set(re.findall(r"^(?:FAILED|ERROR) (\S+)", out, re.M)))


def run_one(m: Mutation, copy: str, full: bool, timeout: float, tests: list[str] | None = None) -> Result:
    path = os.path.join(copy, m.file)
    with open(path, encoding="utf-8") as fh:
        original = fh.read()
    t0 = time.monotonic()
    if original.count(m.old) != 1:
        return Result(
            m.n, m.file, m.what, "STALE", [], m.pin, None, 0.0, f"old snippet found {original.count(m.old)} times"
        )
    try:
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(original.replace(m.old, m.new))
        if tests:  # another selection instead of pin + selection (e.g. do the properties alone kill it?)
            rc, out = _pytest(copy, tests, timeout)
            verdict = "timeout" if rc is None else "killed" if rc != 0 else "survived"
            return Result(m.n, m.file, m.what, verdict, _failed(out), m.pin, None, time.monotonic() - t0)
        rc, out = _pytest(copy, [m.pin], timeout)
        if rc in (4, 5):  # usage error / nothing collected: the pin is missing, which is not a kill
            return Result(m.n, m.file, m.what, "STALE", [], m.pin, None, time.monotonic() - t0, "pin test not found")
        pin_failed = rc not in (0, None)
        killers = _failed(out) if pin_failed else []
        if full or not pin_failed:
            rc2, out2 = _pytest(copy, list(m.selection), timeout)
            if rc2 is None:
                return Result(
                    m.n,
                    m.file,
                    m.what,
                    "killed" if pin_failed else "timeout",
                    killers,
                    m.pin,
                    pin_failed,
                    time.monotonic() - t0,
                    "selection timed out",
                )
            if rc2 != 0:
                killers = sorted(set(killers) | set(_failed(out2)))
        verdict = "killed" if killers or pin_failed else "survived"
        return Result(m.n, m.file, m.what, verdict, killers, m.pin, pin_failed, time.monotonic() - t0)
    finally:
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(original)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", type=int, nargs="*", help="mutation numbers to run (default: all)")
    ap.add_argument("--full", action="store_true", help="run every selection in full, not only on survival")
    ap.add_argument("--timeout", type=float, default=1800.0, help="seconds per pytest run")
    ap.add_argument("--no-write", action="store_true", help="do not write the results file")
    ap.add_argument("--tests", nargs="+", help="run only these tests per mutation (not the pins; nothing is written)")
    a = ap.parse_args(argv)
    todo = [m for m in MUTATIONS if not a.only or m.n in a.only]
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=False
    ).stdout.strip()
    t_start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="hand_mutations_") as tmp:
        copy = os.path.join(tmp, "tree")
        shutil.copytree(ROOT, copy, ignore=_IGNORE, symlinks=True)
        # the unmutated tree must pass every pin, or a "kill" would prove nothing
        pins = a.tests or sorted({m.pin for m in todo})
        rc, out = _pytest(copy, pins, a.timeout)
        if rc != 0:
            print(f"baseline: the unmutated tree fails its pins (rc {rc}):\n{out[-3000:]}", file=sys.stderr)
            return 2
        results = []
        for m in todo:
            r = run_one(m, copy, a.full, a.timeout, a.tests)
            results.append(r)
            by = ", ".join(r.killed_by[:3]) + (" ..." if len(r.killed_by) > 3 else "")
            print(
                f"{m.n:>2} {r.verdict:<8} {r.seconds:6.1f}s  {m.file}: {m.what[:70]}"
                + (f"\n      by {by}" if by else "")
            )
            if r.detail:
                print(f"      {r.detail}")
    counts = {v: sum(r.verdict == v for r in results) for v in ("killed", "survived", "timeout", "STALE")}
    pinned = sum(bool(r.pin_failed) for r in results)
    print(
        f"\n{counts['killed']}/{len(results)} killed ({pinned} by their pin); survived {counts['survived']}, "
        f"timeout {counts['timeout']}, STALE {counts['STALE']}"
    )
    if not a.no_write and not a.only and not a.tests:
        doc = {
            "bench": "bench_hand_mutations",
            "issue": 15,
            "commit": commit,
            "python": platform.python_version(),
            "full_selections": a.full,
            "wall_s": round(time.monotonic() - t_start, 1),
            "totals": {**counts, "total": len(results), "killed_by_pin": pinned},
            "mutations": [
                {
                    **asdict(r),
                    "old": m.old,
                    "new": m.new,
                    "selection": list(m.selection),
                    "seconds": round(r.seconds, 1),
                }
                for r, m in zip(results, todo)
            ],
        }
        os.makedirs(os.path.dirname(OUT), exist_ok=True)
        with open(OUT, "w", encoding="utf-8") as fh:
            json.dump(doc, fh, indent=2)
            fh.write("\n")
    return 0 if counts["killed"] == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
