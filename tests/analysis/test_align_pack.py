"""align's packed gather (_pack_fields / _unpack_fields) gives back exactly the fields it packed,
missing codes (-1 op, dtype and shape; NaN dtype / shape once unpacked) included, and declines
fields too wide to pack."""

import numpy as np
import pytest

from denpex_nb.analysis.align import _nan_codes, _pack_fields, _unpack_fields


@pytest.mark.parametrize("n_ops,n_dtypes,n_shapes", [(1, 1, 1), (5, 3, 700), (300, 40, 1 << 20)])
def test_unpacked_fields_are_the_gathered_fields(n_ops, n_dtypes, n_shapes):
    rng = np.random.default_rng(n_ops + n_shapes)
    n = 5000
    opc = rng.integers(-1, n_ops, n).astype(np.int64)
    dt = rng.integers(0, n_dtypes, n).astype(np.int64)
    dt[rng.random(n) < 0.2] = -1
    shape = rng.integers(0, n_shapes, n).astype(np.int64)
    shape[rng.random(n) < 0.3] = -1
    bad = rng.random(n) < 0.1
    sel = rng.permutation(n)[: n // 2]
    packed = _pack_fields(opc, dt, bad, shape)
    assert packed is not None
    op1, dt1, bad1, shape1 = _unpack_fields(packed[0][sel], *packed[1:])
    assert op1.dtype == np.int64 and np.array_equal(op1, opc[sel])
    assert dt1.dtype == np.float64 and np.array_equal(dt1, _nan_codes(dt[sel]), equal_nan=True)
    assert bad1.dtype == bool and np.array_equal(bad1, bad[sel])
    assert shape1.dtype == np.float64 and np.array_equal(shape1, _nan_codes(shape[sel]), equal_nan=True)


def test_fields_too_wide_are_not_packed():
    n = 10
    opc = np.full(n, (1 << 30) - 2, dtype=np.int64)
    shape = np.full(n, 1 << 31, dtype=np.int64)
    assert _pack_fields(opc, np.zeros(n, dtype=np.int64), np.zeros(n, dtype=bool), shape) is None
