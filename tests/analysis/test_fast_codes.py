"""The shortcuts the analysis takes on 2M-row frames give what the plain pandas calls give."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from denpex_nb.analysis.align import _factorize_shared
from denpex_nb.analysis.state import _codes, _rank_slots


def _objects(values) -> np.ndarray:
    arr = np.empty(len(values), dtype=object)
    for i, v in enumerate(values):
        arr[i] = v
    return arr


@pytest.mark.parametrize("n", [10, 20_000])
def test_factorize_shared_gives_pandas_codes_for_shared_and_distinct_equal_objects(n):
    rng = np.random.default_rng(3)
    shared = [((32,),), ((31,),), ((64, 16),), None, float("nan")]
    values = []
    for i in rng.integers(0, 7, n).tolist():
        if i < 5:
            values.append(shared[i])
        elif i == 5:
            values.append(((32,),)[0:1])  # equal to shared[0], another object
        else:
            values.append(tuple([tuple([31])]))  # equal to shared[1], built anew
    arr = _objects(values)
    expected = pd.factorize(arr, use_na_sentinel=True)[0]
    np.testing.assert_array_equal(_factorize_shared(arr), expected)


@pytest.mark.parametrize(
    "rank",
    [
        np.repeat(np.array([5, 0, 1023, 17]), 3),  # small non-negative: the table path
        np.array([3, -1, 3, 7, -1]),  # negative: the hash path
        np.array([2**40, 1, 2**40, 0]),  # huge numbers: the hash path
        np.array([], dtype=np.int64),
    ],
)
def test_rank_slots_are_the_sorted_distinct_ranks_and_each_rows_index(rank):
    uniq, slot = _rank_slots(rank)
    np.testing.assert_array_equal(uniq, np.unique(rank))
    np.testing.assert_array_equal(uniq[slot], rank)


def test_codes_tell_values_apart_like_factorize_with_missing_as_its_own_value():
    s = pd.Series(["b", None, "a", "b", None], dtype="category")
    for col in (s, s.astype(object)):
        c = _codes(col)
        assert c[0] == c[3] and c[1] == c[4] and len({c[0], c[1], c[2]}) == 3
