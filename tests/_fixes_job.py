"""One rank of the denpex_nb.fixes checks (run by tests/test_fixes.py as N real gloo processes).

Every check runs on every rank in the same order; each rank writes its results as JSON to
``$FIXES_OUT/rank<R>.json`` for the test to assert on.
"""

import json
import os
import sys
from datetime import timedelta

import torch
import torch.distributed as dist

from denpex_nb.errors import DenpexError
from denpex_nb.fixes import CollectiveMismatchError, all_gather_uneven, all_reduce_padded, check_same_shapes


def rows(rank, n, *tail, dtype=torch.float32):
    """Deterministic rows: value = 100 * rank + row index."""
    base = torch.arange(n, dtype=torch.float64).reshape((n,) + (1,) * len(tail)) + 100 * rank
    return base.expand((n,) + tail).to(dtype).contiguous()


def main():
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("gloo", timeout=timedelta(seconds=20))
    res = {"rank": rank, "world": world}

    lengths = [5, 3, 0, 2, 7, 1][:world]
    out = all_gather_uneven(rows(rank, lengths[rank], 4))
    res["uneven_shapes"] = [list(t.shape) for t in out]
    res["uneven_correct"] = all(torch.equal(t, rows(r, lengths[r], 4)) for r, t in enumerate(out))

    md_lengths = [1, 4, 2, 0, 3, 3][:world]
    out = all_gather_uneven(rows(rank, md_lengths[rank], 2, 3, dtype=torch.int64))
    res["multidim_shapes"] = [list(t.shape) for t in out]
    res["multidim_dtypes"] = sorted({str(t.dtype) for t in out})
    res["multidim_correct"] = all(
        torch.equal(t, rows(r, md_lengths[r], 2, 3, dtype=torch.int64)) for r, t in enumerate(out)
    )

    out = all_gather_uneven(torch.zeros(0, 3))
    res["all_empty_shapes"] = [list(t.shape) for t in out]

    try:
        all_gather_uneven(torch.zeros(2, 3 + rank))
        res["tail_mismatch"] = "no error"
    except CollectiveMismatchError as e:
        res["tail_mismatch"] = str(e)

    res["same_ok"] = list(check_same_shapes(torch.zeros(4, 2)))
    try:
        check_same_shapes(torch.zeros(5 if rank == 0 else 3, 4))
        res["shape_error"] = "no error"
    except CollectiveMismatchError as e:
        res["shape_error"] = str(e)
        res["shape_error_is_runtime_error"] = isinstance(e, RuntimeError)
    try:
        check_same_shapes(torch.zeros(8, dtype=torch.float64 if rank == world - 1 else torch.float32))
        res["dtype_error"] = "no error"
    except CollectiveMismatchError as e:
        res["dtype_error"] = str(e)
    try:
        check_same_shapes(torch.zeros((2,) * (1 + rank % 2)))
        res["ndim_error"] = "no error"
    except CollectiveMismatchError as e:
        res["ndim_error"] = str(e)

    seq_lengths = [3, 5, 1, 4][:world]
    reduced = all_reduce_padded(torch.ones(seq_lengths[rank], 2))
    res["padded_shape"] = list(reduced.shape)
    res["padded_column"] = reduced[:, 0].tolist()
    # MAX over negative data: the padding must be MAX's identity (pad_value), not 0
    neg = all_reduce_padded(
        -torch.ones(seq_lengths[rank], 2) * (rank + 1), op=dist.ReduceOp.MAX, pad_value=float("-inf")
    )
    res["padded_max_column"] = neg[:, 0].tolist()

    try:
        all_gather_uneven(torch.tensor(1.0))
        res["scalar_error"] = "no error"
    except DenpexError as e:
        res["scalar_error"] = str(e)

    # still in step after all of the above: one ordinary collective must agree
    t = torch.ones(1)
    dist.all_reduce(t)
    res["final_all_reduce"] = float(t)
    with open(os.path.join(os.environ["FIXES_OUT"], f"rank{rank}.json"), "w") as fh:
        json.dump(res, fh)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
