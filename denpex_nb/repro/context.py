"""What a scenario's rank body gets as ``ctx``: who it is, where its tensors live, and helpers that
make the run look like ordinary training (a few normal collectives and log lines before the bug).

Everything here is deterministic: values depend only on rank and step.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class RankContext:
    rank: int
    world_size: int
    local_rank: int
    backend: str
    device: str
    debug: str
    variant: str
    scenario: str

    def log(self, message: str) -> None:
        """One line on stdout, flushed, as a training script would print it."""
        print(message, flush=True)

    def tensor(self, *shape: int, fill: float | None = None, dtype=None):
        """A deterministic tensor on this rank's device (values from rank and shape)."""
        import torch

        dtype = dtype or torch.float32
        if fill is not None:
            return torch.full(shape, float(fill), dtype=dtype, device=self.device)
        n = 1
        for d in shape:
            n *= d
        base = torch.arange(n, dtype=torch.float64).reshape(shape) * 0.01 + self.rank
        return base.to(dtype=dtype, device=self.device)

    def train_steps(self, first: int, last: int, total: int | None = None, numel: int = 16) -> None:
        """Steps ``first..last``: one all_reduce of a gradient-like tensor each, plus a log line."""
        import torch.distributed as dist

        total = total or last
        for step in range(first, last + 1):
            grad = self.tensor(numel, fill=0.01 * step * (self.rank + 1))
            dist.all_reduce(grad)
            loss = 2.5 - 0.15 * step + 0.01 * self.rank
            self.log(f"step {step}/{total} rank {self.rank} loss={loss:.4f} grad_sum={float(grad.sum()):.4f}")
