"""One rank of a healthy, uneven job for ``bench_watch.py --healthy``: jittery steps, a real checkpoint.

Each step sleeps a random 20-300 ms (data loading, uneven batches) before its all_reduce; every
``--ckpt-every`` steps rank 0 writes a real checkpoint (``torch.save`` of ``--ckpt-mb`` MB to
disk, then ``fsync``) while the others already wait in the next all_reduce. Runs until
``--minutes`` have passed, then every rank leaves through a barrier. Started by the benchmark
with RANK / WORLD_SIZE / MASTER_ADDR / MASTER_PORT / DENPEX_TRACE_DIR set.
"""

from __future__ import annotations

import argparse
import os
import random
import time
from datetime import timedelta


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--ckpt-every", type=int, default=10)
    ap.add_argument("--ckpt-mb", type=int, default=200)
    ap.add_argument("--ckpt-dir", required=True)
    args = ap.parse_args()

    import torch
    import torch.distributed as dist

    import denpex_nb.trace

    denpex_nb.trace.enable()
    dist.init_process_group("gloo", timeout=timedelta(seconds=300))
    rank = dist.get_rank()
    rng = random.Random(1234 + rank)
    grad = torch.ones(1 << 16)
    state = {"w": torch.randn(args.ckpt_mb * (1 << 18))} if rank == 0 else None  # float32: 4 bytes each
    end = time.monotonic() + 60 * args.minutes
    step = 0
    while True:
        step += 1
        time.sleep(rng.uniform(0.02, 0.3))
        if rank == 0 and step % args.ckpt_every == 0:
            path = os.path.join(args.ckpt_dir, "ckpt.pt")
            torch.save(state, path)
            with open(path, "rb+") as fh:
                os.fsync(fh.fileno())
        dist.all_reduce(grad)
        flag = torch.tensor([1 if time.monotonic() < end else 0])
        dist.all_reduce(flag, op=dist.ReduceOp.MIN)
        if not int(flag.item()):
            break
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
