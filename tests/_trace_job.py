"""Single-rank jobs for tests/test_trace.py (gloo, world size 1). ``python _trace_job.py MODE``.

normal: enable() via $DENPEX_TRACE_DIR, run a mix of collectives, one that raises, one nested.
abort:  the collective itself aborts the process (like gloo's EnforceNotMet); the issue line
        written before it must survive.
async:  collectives with async_op=True: done (enqueued) then complete from the work's future.
rotate: 200 all_reduces with a tiny $DENPEX_TRACE_MAX_MB: the file rotates to .1 between them.
"""

import functools
import os
import sys

import torch
import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d

import denpex_nb.trace as trace


def main(mode):
    if mode == "abort":
        real = c10d.all_reduce

        @functools.wraps(real)
        def aborting(*args, **kwargs):
            os.abort()

        c10d.all_reduce = dist.all_reduce = aborting
    assert trace.enable() == os.environ["DENPEX_TRACE_DIR"]
    dist.init_process_group("gloo", rank=0, world_size=1, init_method=f"tcp://127.0.0.1:{os.environ['PORT']}")
    t = torch.ones(3, 2)
    if mode == "async":
        work = dist.all_reduce(t, async_op=True)
        work.wait()
        out = [torch.empty(3, 2)]
        dist.all_gather(out, t, async_op=True).wait()
        dist.barrier()  # synchronous: done is its completion on gloo
        dist.destroy_process_group()
        return 0
    if mode == "rotate":
        for _ in range(200):
            dist.all_reduce(t)
        dist.destroy_process_group()
        return 0
    dist.all_reduce(t)
    if mode == "abort":
        return 1
    out = [torch.empty(3, 2)]
    dist.all_gather(out, t)
    dist.broadcast(torch.zeros(4, dtype=torch.int64), src=0)
    dist.barrier()
    dist.all_gather_object([None], {"a": 1})  # not wrapped itself: its two all_gathers are traced
    try:
        dist.all_gather([torch.empty(3, 2), torch.empty(3, 2)], t)  # wrong list length for world 1
    except Exception:
        pass
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
