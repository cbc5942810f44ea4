"""incident.coerce: every numeric field of every frame takes any value a log can hold; a value
that is not a number, or does not fit the column, becomes missing for that row (never an exception)."""

from __future__ import annotations

import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from denpex_nb.incident import SCHEMAS, coerce

NUMERIC = [
    (frame, col, dtype)
    for frame, cols in SCHEMAS.items()
    for col, dtype in cols.items()
    if dtype in ("Int32", "Int64", "Float64")
]
BOUNDS = {"Int32": 2**31, "Int64": 2**63}

values = st.one_of(
    st.integers(min_value=-(2**80), max_value=2**80),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(alphabet="0123456789-+.eE xyz", max_size=30),
    st.none(),
)


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_any_value_in_any_numeric_field(data):
    frame, col, dtype = data.draw(st.sampled_from(NUMERIC))
    vals = data.draw(st.lists(values, min_size=1, max_size=8))
    out = coerce(frame, [{col: v} for v in vals])[col]
    assert str(out.dtype) == dtype and len(out) == len(vals)
    for v, got in zip(vals, out):
        if pd.isna(got):
            continue
        if dtype == "Float64":
            assert abs(float(got)) < float("inf")
        else:
            assert -BOUNDS[dtype] <= int(got) < BOUNDS[dtype]
            if isinstance(v, int):
                assert int(got) == v  # in range: kept exactly


def test_out_of_range_examples_from_real_fuzzing():
    rows = coerce(
        "errors",
        [
            {"rank": 2147483648, "seq": 99999999999999999999, "exit_code": -(2**40)},
            {"rank": 3, "seq": 12, "exit_code": 1},
        ],
    )
    assert rows["rank"].isna()[0] and rows["seq"].isna()[0] and rows["exit_code"].isna()[0]
    assert (rows["rank"][1], rows["seq"][1], rows["exit_code"][1]) == (3, 12, 1)
    big = coerce("events", pd.DataFrame({"seq": pd.array([2**62, None], dtype="Int64"), "rank": [1, 2**33]}))
    assert big["seq"][0] == 2**62 and big["rank"].isna()[1] and big["rank"][0] == 1
