"""A seeded subset of the log fuzz campaign (benchmarks/bench_fuzz.py) as a regression test.

The full campaign (10 000 cases) is the benchmark; here 300 cases of every kind run in worker
subprocesses (address space capped, a per-case alarm): no exception escapes ``load`` + ``diagnose``,
every line is accounted for, no reader or diagnosis rule fails, no case hangs (the 5 s bar is
the benchmark's).
"""

from __future__ import annotations

import os

from ._fuzz import campaign


def _campaign(cases: int, seed: int) -> dict:
    env = dict(os.environ)
    env.pop("DENPEX_STRICT", None)  # as the CLI runs; reader failures are counted apart
    return campaign("bench_fuzz.py", cases, seed, workers=2, chunk=cases // 2, env=env)


def test_seeded_fuzz_subset_loads_every_case_and_conserves_lines():
    got = _campaign(300, seed=20261201)
    t = got["totals"]
    assert t["cases"] == 300
    assert all(row["cases"] > 0 for row in got["by_kind"].values()), got["by_kind"]
    assert t["crashes"] == 0, got["examples"]["crashes"]
    assert t["escaped_exceptions"] == 0, got["examples"]["escaped"]
    assert t["conservation_failures"] == 0, got["examples"]["conservation"]
    assert t["timeouts"] == 0 and t["memory_errors"] == 0, got["examples"]["timeouts"]
    # the < 5 s bar is the benchmark's (benchmarks/bench_fuzz.py); here only "nothing hangs"
    assert t["slowest_load_s"] < 60, got["examples"]["slowest_loads"]
    # no reader and no diagnosis rule raised on any case (both are contained, and both are defects)
    assert t["reader_failures"] == 0, got["examples"]["reader_failures"]
    assert t["rule_failures"] == 0, got["examples"]["rule_failures"]
    assert t["peak_rss_mb"] < 1536, t
