"""Regenerate the real gloo Flight Recorder dumps under tests/ingest/data/fr (torch 2.13 CPU).

Two ranks run 3 all_reduce, 1 all_gather and 1 broadcast on the default group, then dump their
rings with ``_dump_fr_trace`` (pickle) and ``_dump_fr_trace_json`` (JSON). Run:
``timeout 120 python tests/ingest/data/make_fr_fixtures.py``.
"""

import os
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fr")


def worker(rank, world, init):
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world)
    x = torch.ones(8)
    for _ in range(3):
        dist.all_reduce(x)
    outs = [torch.zeros(5, 4) for _ in range(world)]
    dist.all_gather(outs, torch.ones(5, 4))
    dist.broadcast(torch.ones(2, dtype=torch.float64), src=0)
    from torch._C._distributed_c10d import _dump_fr_trace, _dump_fr_trace_json

    with open(os.path.join(HERE, f"comm_lib_trace_rank_{rank}"), "wb") as f:
        f.write(_dump_fr_trace())
    os.makedirs(os.path.join(HERE, "json"), exist_ok=True)
    with open(os.path.join(HERE, "json", f"comm_lib_trace_rank_{rank}.json"), "wb") as f:
        f.write(_dump_fr_trace_json())
    dist.destroy_process_group()


if __name__ == "__main__":
    os.makedirs(HERE, exist_ok=True)
    init = f"file:///tmp/denpex_fr_fixture_{os.getpid()}"
    mp.spawn(worker, args=(2, init), nprocs=2, join=True)
    sys.exit(0)
