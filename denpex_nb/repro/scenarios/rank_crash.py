"""One rank raises mid-run (a corrupt sample); the others wait in the next collective.

The crashing rank prints a Python traceback and exits 1; the survivors' all_reduce fails
("Connection closed by peer" on gloo) or times out. The first error in time is the culprit's;
the survivors' errors are consequences. Fixed: validate the batch and skip it without leaving
the collective schedule (every rank still reduces).
"""

from __future__ import annotations

from ..registry import no_failure, planted

ID = "rank-crash"
TITLE = "one rank raises mid-run, the others wait"
TEACHES = "the earliest error is the cause; 'connection closed' and timeouts on the others are symptoms"

WARMUP_STEPS = 2
CULPRIT = 1
BAD_STEP = WARMUP_STEPS + 1


def _load_batch(rank, step):
    if rank == CULPRIT and step == BAD_STEP:
        return None
    return step


def broken(rank, world_size, ctx):
    ctx.train_steps(1, WARMUP_STEPS, total=BAD_STEP)
    if _load_batch(rank, BAD_STEP) is None:
        raise ValueError(f"corrupt sample in batch {BAD_STEP} on rank {rank}: expected 16 features, got 15")
    ctx.train_steps(BAD_STEP, BAD_STEP)


def fixed(rank, world_size, ctx):
    ctx.train_steps(1, WARMUP_STEPS, total=BAD_STEP)
    if _load_batch(rank, BAD_STEP) is None:
        ctx.log(f"rank {rank}: skipping corrupt sample in batch {BAD_STEP} (still joining the all_reduce)")
    ctx.train_steps(BAD_STEP, BAD_STEP)


def expected(variant, world_size, debug="off"):
    if variant == "fixed":
        return no_failure()
    return planted("rank-crash", "all_reduce", [CULPRIT], debug=debug, trace=BAD_STEP, fr=BAD_STEP, detail=BAD_STEP - 1)
