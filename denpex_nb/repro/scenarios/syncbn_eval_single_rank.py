"""SyncBatchNorm run in training mode on rank 0 only (validation on rank 0 without ``model.eval()``).

In training mode SyncBatchNorm all-gathers its batch statistics in every forward. Rank 0
validates alone while the others wait at a barrier: rank 0's statistics all_gather meets their
barrier and both hang until the timeout. Fixed: ``model.eval()`` for the rank-0-only
validation (running statistics, no collective), or validate on every rank.

``torch.nn.SyncBatchNorm`` refuses CPU tensors, so on gloo the model uses
:class:`CpuSyncBatchNorm1d`, which issues exactly the collective that ``nn.SyncBatchNorm``
issues on gloo (``dist.all_gather`` of ``[mean, invstd, count]`` per rank). Under NCCL the real
``nn.SyncBatchNorm`` is used.
"""

from __future__ import annotations

from ..registry import no_failure, planted

ID = "syncbn-eval-single-rank"
TITLE = "SyncBatchNorm forward in training mode on rank 0 only"
TEACHES = "SyncBatchNorm is a collective in training mode; single-rank evaluation needs model.eval()"

TRAIN_STEPS = 2
CULPRIT = 0
#: each training step: the BN statistics all_gather, then the loss all_reduce
PLANTED_SEQ = 2 * TRAIN_STEPS + 1


def _cpu_sync_bn_class():
    import torch
    import torch.distributed as dist
    from torch import nn

    class CpuSyncBatchNorm1d(nn.BatchNorm1d):
        """BatchNorm1d that synchronises batch statistics like nn.SyncBatchNorm does on gloo."""

        def forward(self, x):
            if not self.training:
                return super().forward(x)
            with torch.no_grad():
                mean = x.mean(0)
                invstd = torch.rsqrt(x.var(0, unbiased=False) + self.eps)
                count = torch.full((1,), float(x.shape[0]), dtype=x.dtype)
                combined = torch.cat([mean, invstd, count])
                gathered = [torch.empty_like(combined) for _ in range(dist.get_world_size())]
                dist.all_gather(gathered, combined)
                stats = torch.stack(gathered)
                c = self.num_features
                counts = stats[:, -1:]
                g_mean = (stats[:, :c] * counts).sum(0) / counts.sum()
                g_var = ((1.0 / stats[:, c : 2 * c] ** 2 + (stats[:, :c] - g_mean) ** 2) * counts).sum(0) / counts.sum()
                self.running_mean.mul_(1 - self.momentum).add_(self.momentum * g_mean)
                self.running_var.mul_(1 - self.momentum).add_(self.momentum * g_var)
            return (x - g_mean) / torch.sqrt(g_var + self.eps) * self.weight + self.bias

    return CpuSyncBatchNorm1d


def _model(ctx):
    from torch import nn

    norm = nn.SyncBatchNorm(4) if ctx.backend == "nccl" else _cpu_sync_bn_class()(4)
    return nn.Sequential(nn.Linear(6, 4), norm, nn.ReLU()).to(ctx.device)


def _batch(ctx, step):
    import torch

    return (torch.arange(48, dtype=torch.float32).reshape(8, 6) * 0.01 * (ctx.rank + step)).to(ctx.device)


def _run(rank, world_size, ctx, eval_mode):
    import torch
    import torch.distributed as dist

    model = _model(ctx)
    for step in range(1, TRAIN_STEPS + 1):
        with torch.no_grad():
            out = model(_batch(ctx, step))
            loss = out.pow(2).mean().reshape(1)
        dist.all_reduce(loss)
        ctx.log(f"step {step}/{TRAIN_STEPS} rank {rank} loss={float(loss) / world_size:.4f}")
    if rank == CULPRIT:
        if eval_mode:
            model.eval()
        ctx.log(f"rank {rank}: validating on rank {CULPRIT} only (model.training={model.training})")
        with torch.no_grad():
            val = model(_batch(ctx, 99)).pow(2).mean()
        ctx.log(f"rank {rank}: val_loss={float(val):.4f}")
        model.train()
    else:
        ctx.log(f"rank {rank}: waiting for rank {CULPRIT} to finish validation")
    dist.barrier()
    ctx.log(f"rank {rank}: validation done")


def broken(rank, world_size, ctx):
    _run(rank, world_size, ctx, eval_mode=False)


def fixed(rank, world_size, ctx):
    _run(rank, world_size, ctx, eval_mode=True)


def expected(variant, world_size, debug="off"):
    if variant == "fixed":
        return no_failure()
    return planted(
        "syncbn-eval-hang",
        "all_gather",
        [CULPRIT],
        debug=debug,
        trace=PLANTED_SEQ,
        fr=PLANTED_SEQ,
        detail=PLANTED_SEQ - 1,
        peer_op="barrier",
    )
