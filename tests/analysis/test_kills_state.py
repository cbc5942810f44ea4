"""Pins decisions of ``state.rank_state`` that the semantic mutation campaign
(benchmarks/bench_mutation.py, issue #15) found unpinned."""

from __future__ import annotations

import pandas as pd

from denpex_nb.analysis.state import rank_state
from tests.analysis._frames import ev, incident


def test_a_rank_that_completed_nothing_has_no_last_completed_seq():
    """Rank 1's only record (seq 5) was scheduled, never completed; rank 0 completed seq 0."""
    st = rank_state(incident(events=[ev(0, 0), ev(1, 5, state="scheduled")])).set_index("rank")
    assert st.loc[0, "last_completed_seq"] == 0
    assert pd.isna(st.loc[1, "last_completed_seq"])
