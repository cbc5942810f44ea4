"""Time per call of denpex_nb.fixes.check_same_shapes on gloo, 2 ranks (vs a plain small all_reduce).

check_same_shapes costs one all_gather of (2 + MAX_DIMS) int64 per rank. Run: python benchmarks/bench_check_same_shapes.py
Writes benchmarks/results/bench_check_same_shapes.json.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

CALLS = 300
REPEATS = 5


def rank_worker():
    import torch
    import torch.distributed as dist

    from denpex_nb.fixes import check_same_shapes

    dist.init_process_group("gloo")
    x = torch.zeros(128, 64)
    small = torch.zeros(16)
    for _ in range(20):
        check_same_shapes(x)
        dist.all_reduce(small)
    per = {"check_same_shapes": [], "all_reduce_16_floats": []}
    for _ in range(REPEATS):
        dist.barrier()
        t = time.perf_counter()
        for _ in range(CALLS):
            check_same_shapes(x)
        per["check_same_shapes"].append((time.perf_counter() - t) / CALLS)
        dist.barrier()
        t = time.perf_counter()
        for _ in range(CALLS):
            dist.all_reduce(small)
        per["all_reduce_16_floats"].append((time.perf_counter() - t) / CALLS)
    if dist.get_rank() == 0:
        with open(os.environ["BENCH_RESULT"], "w") as fh:
            json.dump(
                {k: {"median_us": statistics.median(v) * 1e6, "min_us": min(v) * 1e6} for k, v in per.items()}, fh
            )
    dist.destroy_process_group()


def main():
    from _two_ranks import launch, save

    res = launch(os.path.abspath(__file__), world=2)
    res.update(calls_per_repeat=CALLS, repeats=REPEATS, backend="gloo", world_size=2)
    for k in ("check_same_shapes", "all_reduce_16_floats"):
        print(f"{k:>22}: median {res[k]['median_us']:.1f} us/call, best {res[k]['min_us']:.1f} us/call")
    print("written", save("bench_check_same_shapes", res))


if __name__ == "__main__":
    rank_worker() if "--rank-worker" in sys.argv else main()
