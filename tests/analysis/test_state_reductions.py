"""rank_state's per-rank reductions agree with the plain pandas / sort they stand for.

A user reads each rank's last collective and whether it failed from ``rank_state``; its helpers
skip work when a key is the same on every row (one counter, one group) or when ranks are 0..N-1.
Were a shortcut wrong, a rank would be shown stopped at the wrong collective (and a laggard
missed). Each helper is compared with the definition its docstring gives, on rows with and
without those shortcuts.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from denpex_nb.analysis.state import _best_rows, _distinct_per_group, _lookup, _rank_slots


def _rows(seed: int, constant: bool):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 300))
    rank = rng.integers(0, 6, n) if seed % 3 else np.repeat(np.arange(6), n // 6 + 1)[:n]
    pref = np.zeros(n, np.int64) if constant else rng.integers(0, 3, n)
    group = np.full(n, 5, np.int64) if constant else rng.integers(0, 4, n)
    seq = rng.integers(0, 20, n)
    return rank, pref, group, seq


@pytest.mark.parametrize("constant", [True, False])
@pytest.mark.parametrize("seed", range(8))
def test_best_rows_is_the_first_row_of_the_four_key_sort(seed, constant):
    rank, pref, group, seq = _rows(seed, constant)
    ranks, slot = _rank_slots(rank)
    assert list(ranks) == sorted(set(rank.tolist()))
    pgsize = _distinct_per_group(group, slot, len(ranks))
    want = pd.Series(slot).groupby(group).transform("nunique").to_numpy()
    assert pgsize.tolist() == want.tolist()
    order = np.lexsort((np.arange(len(rank)), -seq, -pgsize, pref, slot))
    first = order[np.r_[True, slot[order][1:] != slot[order][:-1]]]
    assert _best_rows(slot, len(ranks), pref, pgsize, seq).tolist() == first.tolist()


def test_flag_lookup_of_a_categorical_is_the_table_lookup():
    col = pd.Series(pd.Categorical(["completed", None, "failed", "timed_out", "scheduled", "completed"]))
    table = {"timed_out": True, "failed": True}
    assert _lookup(col, table, False, bool).tolist() == [False, False, True, True, False, False]
    assert _lookup(col, {"completed": 2}, -1).tolist() == [2, -1, -1, -1, -1, 2]
    assert _lookup(col.astype(object), table, False, bool).tolist() == [False, False, True, True, False, False]
