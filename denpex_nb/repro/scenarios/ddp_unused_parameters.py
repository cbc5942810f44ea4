"""DDP where an auxiliary branch is skipped on one rank only (data-dependent control flow).

With ``find_unused_parameters=False`` DDP waits for a gradient from every parameter before it
all-reduces the bucket. On the rank that skipped the branch the bucket never becomes ready: it
never issues that all_reduce, and its next forward raises "Expected to have finished reduction
in the prior iteration ...". The other ranks wait in the bucket all_reduce. The bucket
all_reduces are issued by DDP's C++ reducer, so the denpex_nb tracer cannot see them (only the
per-step loss all_reduce); the Flight Recorder does. Fixed: ``find_unused_parameters=True``.

Known torch 2.13 (CPU) problem: under TORCH_DISTRIBUTED_DEBUG=DETAIL, DDP's constructor
segfaults on every rank (``dist.Logger.set_construction_data_and_log``, SIGSEGV, both variants),
before the planted bug is reached. The recorded data use INFO for this scenario instead.
"""

from __future__ import annotations

from ..registry import no_failure, planted

ID = "ddp-unused-parameters"
TITLE = "DDP with a branch unused on one rank"
TEACHES = "DDP needs every parameter to get a gradient on every rank each step, or find_unused_parameters=True"

STEPS = 3
SKIP_STEP = 2
CULPRIT = 1
#: Flight Recorder collective_seq_id of the bucket all_reduce the culprit never issues (measured,
#: torch 2.13 gloo): DDP's construction issues 3 collectives (parameter shape all_gather, two
#: state broadcasts), step 1 one bucket all_reduce, step 2 two bucket-rebuild broadcasts before
#: its bucket all_reduce.
FR_SEQ = 3 + 1 + 2 + 1


def _model():
    import torch
    from torch import nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.trunk = nn.Linear(8, 8)
            self.head = nn.Linear(8, 2)
            self.aux_head = nn.Linear(8, 2)

        def forward(self, x, use_aux: bool):
            h = torch.relu(self.trunk(x))
            out = self.head(h)
            if use_aux:
                out = out + 0.1 * self.aux_head(h)
            return out

    torch.manual_seed(0)
    return Net()


def _train(rank, world_size, ctx, find_unused):
    import torch
    from torch.nn.parallel import DistributedDataParallel as DDP

    device_ids = [ctx.local_rank] if ctx.backend == "nccl" else None
    model = DDP(_model().to(ctx.device), device_ids=device_ids, find_unused_parameters=find_unused)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(1, STEPS + 1):
        use_aux = not (rank == CULPRIT and step == SKIP_STEP)
        x = (torch.arange(32, dtype=torch.float32).reshape(4, 8) * 0.01 * (rank + step)).to(ctx.device)
        loss = model(x, use_aux).pow(2).mean()
        ctx.log(f"step {step}/{STEPS} rank {rank} loss={loss.item():.4f} aux={'on' if use_aux else 'off'}")
        opt.zero_grad()
        loss.backward()
        opt.step()


def broken(rank, world_size, ctx):
    _train(rank, world_size, ctx, find_unused=False)


def fixed(rank, world_size, ctx):
    _train(rank, world_size, ctx, find_unused=True)


def expected(variant, world_size, debug="off"):
    if variant == "fixed":
        return no_failure()
    if debug == "detail":  # DDP's constructor segfaults first (see the module docstring)
        return planted(
            "unused-parameters",
            "all_reduce",
            [CULPRIT],
            debug=debug,
            trace=None,
            fr=None,
            detail=None,
            note="torch 2.13 CPU: DDP construction segfaults under DETAIL before the planted bug",
        )
    return planted("unused-parameters", "all_reduce", [CULPRIT], debug=debug, trace=None, fr=FR_SEQ, detail=None)
