"""A seeded subset of the differential pickle fuzz (benchmarks/bench_fuzz_pickles.py) as a regression test.

The full campaign (100 000 cases) is the benchmark; here a few hundred cases of every kind run in
a worker subprocess, so a segfault shows as a crashed worker instead of killing pytest.
"""

from __future__ import annotations

import os

import pytest

from ._fuzz import ROOT, campaign

pytest.importorskip("numba")


def _campaign(cases: int, seed: int, env_extra: dict | None = None) -> dict:
    return campaign(
        "bench_fuzz_pickles.py", cases, seed, workers=1, chunk=cases, env=dict(os.environ, **(env_extra or {}))
    )


def test_seeded_fuzz_subset_has_no_crash_escape_or_disagreement():
    got = _campaign(400, seed=20261201)
    t = got["totals"]
    assert t["cases"] == 400
    assert all(row["cases"] > 0 for row in got["by_kind"].values()), got["by_kind"]
    assert t["crashes"] == 0, got["examples"]["crashes"]
    assert t["escaped_exceptions"] == 0, got["examples"]["escaped"]
    assert t["disagreements"] == 0, got["examples"]["disagreements"]
    assert t["memory_errors"] == 0
    # the < 5 s bar is the benchmark's (benchmarks/bench_fuzz_pickles.py); here only "nothing hangs"
    assert t["slowest_case_s"] < 60 and t["peak_rss_mb"] < 1536, t


def test_a_crashing_worker_is_counted_and_its_case_saved(tmp_path):
    got = _campaign(30, seed=5, env_extra={"FUZZ_SELFTEST_SEGFAULT_AT": "17"})
    t = got["totals"]
    assert t["cases"] == 30 and t["crashes"] == 1, t  # the other 29 ran in fresh workers
    crash = got["examples"]["crashes"][0]
    assert crash["i"] == 17 and crash["rc"] == -11
    saved = os.path.join(ROOT, crash["saved"])
    assert os.path.isfile(saved)
    os.unlink(saved)
    try:
        os.rmdir(os.path.dirname(saved))
    except OSError:
        pass
