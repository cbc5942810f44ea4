"""The fixes as a library: collectives that tolerate per-rank sizes, and a cheap pre-flight check.

Why: every rank must pass the same number of elements (and dtype) to a collective. When the
leading dimension depends on the data (detections per image, tokens per sequence), a plain
``all_gather`` or ``all_reduce`` aborts, hangs or silently returns garbage. These helpers agree
on sizes first (one tiny collective), pad to the largest, run the real collective, and trim.

All functions take ``group=None`` (the default process group) and work on gloo (CPU tensors) and
NCCL (CUDA tensors: the small size tensors are created on the input's device). Imports torch.
"""

from __future__ import annotations

from .errors import DenpexError

#: Most dimensions a tensor may have for the size exchange (fixed so that every rank sends the
#: same number of elements even when ranks disagree on ndim).
MAX_DIMS = 16

_DTYPE_NAMES = (
    "float32",
    "float64",
    "float16",
    "bfloat16",
    "int64",
    "int32",
    "int16",
    "int8",
    "uint8",
    "bool",
    "complex64",
    "complex128",
    "float8_e4m3fn",
    "float8_e5m2",
    "uint16",
    "uint32",
    "uint64",
)


class CollectiveMismatchError(DenpexError, RuntimeError):
    """Ranks disagree on what they pass to a collective; the message names every rank's tensor."""


def _dtype_code(dtype) -> int:
    name = str(dtype).replace("torch.", "")
    return _DTYPE_NAMES.index(name) if name in _DTYPE_NAMES else len(_DTYPE_NAMES)


def _dtype_name(code: int) -> str:
    return _DTYPE_NAMES[code] if 0 <= code < len(_DTYPE_NAMES) else "other"


def _describe(tensor):
    """[ndim, dtype code, d0, d1, ..., padded with -1] as an int64 tensor on the input's device."""
    import torch

    if tensor.dim() > MAX_DIMS:
        raise DenpexError(
            f"tensor has {tensor.dim()} dimensions, more than {MAX_DIMS}", fix="reshape it before the collective"
        )
    row = [tensor.dim(), _dtype_code(tensor.dtype)] + list(tensor.shape) + [-1] * (MAX_DIMS - tensor.dim())
    return torch.tensor(row, dtype=torch.int64, device=tensor.device)


def _gather_descriptions(tensor, group) -> list[tuple[tuple[int, ...], str]]:
    """One all_gather of a (2 + MAX_DIMS)-element int64 tensor: every rank's (shape, dtype)."""
    import torch
    import torch.distributed as dist

    world = dist.get_world_size(group)
    mine = _describe(tensor)
    table = torch.empty((world, mine.numel()), dtype=torch.int64, device=tensor.device)
    dist.all_gather(list(table.unbind(0)), mine, group=group)
    out = []
    for row in table.cpu().tolist():
        ndim, code = row[0], row[1]
        out.append((tuple(row[2 : 2 + ndim]), _dtype_name(code)))
    return out


def _group_ranks(group, world: int) -> list[int]:
    import torch.distributed as dist

    if group is None:
        return list(range(world))
    try:
        return [dist.get_global_rank(group, i) for i in range(world)]
    except Exception:
        return list(range(world))


def _format_table(descs, ranks) -> str:
    return ", ".join(f"rank {r} {dt}{list(shape)}" for r, (shape, dt) in zip(ranks, descs))


def check_same_shapes(tensor, group=None) -> tuple[int, ...]:
    """Raise :class:`CollectiveMismatchError` unless every rank passes the same shape and dtype.

    Costs one small all_gather (``2 + MAX_DIMS`` int64 per rank). Call it right before a
    collective that needs equal sizes (all_reduce, all_gather, broadcast ...) while debugging,
    or permanently where sizes come from data. Every rank raises the same error, which names
    every rank's shape and dtype. Returns the common shape.
    """
    import torch.distributed as dist

    descs = _gather_descriptions(tensor, group)
    if len(set(descs)) > 1:
        ranks = _group_ranks(group, dist.get_world_size(group))
        raise CollectiveMismatchError(
            f"check_same_shapes: ranks disagree on the tensor passed to the next collective: {_format_table(descs, ranks)}",
            fix="make every rank pass the same shape and dtype, or use denpex_nb.fixes.all_gather_uneven / "
            "all_reduce_padded when the leading dimension depends on the data",
        )
    return descs[0][0]


def all_gather_uneven(tensor, group=None) -> list:
    """``all_gather`` for tensors whose leading dimension differs per rank.

    Gathers every rank's shape (one small all_gather), pads the local tensor along dim 0 to the
    largest length, gathers, and trims each piece back. Any leading length (0 included), any
    number of trailing dimensions; trailing dimensions and dtype must agree across ranks (else
    :class:`CollectiveMismatchError` naming each rank). Returns one tensor per rank of ``group``.
    """
    import torch
    import torch.distributed as dist

    if tensor.dim() == 0:
        raise DenpexError(
            "all_gather_uneven needs a tensor with at least one dimension",
            fix="use tensor.reshape(1) or a plain all_gather for scalars",
        )
    descs = _gather_descriptions(tensor, group)
    world = len(descs)
    tails = {(shape[1:], dt) for shape, dt in descs}
    if len(tails) > 1 or any(len(shape) != tensor.dim() for shape, _ in descs):
        raise CollectiveMismatchError(
            "all_gather_uneven: ranks disagree on the trailing dimensions or dtype: "
            + _format_table(descs, _group_ranks(group, world)),
            fix="only the leading dimension may differ between ranks",
        )
    lengths = [shape[0] for shape, _ in descs]
    longest = max(lengths)
    if longest == 0:
        return [tensor.new_empty(tensor.shape) for _ in range(world)]
    local = tensor.contiguous()
    if local.shape[0] < longest:
        pad = torch.zeros((longest - local.shape[0],) + tuple(local.shape[1:]), dtype=local.dtype, device=local.device)
        local = torch.cat([local, pad], dim=0)
    padded = [torch.empty_like(local) for _ in range(world)]
    dist.all_gather(padded, local, group=group)
    return [piece[:n] for piece, n in zip(padded, lengths)]


def all_reduce_padded(tensor, op=None, group=None, pad_value=0):
    """``all_reduce`` for tensors whose leading dimension (e.g. sequence length) differs per rank.

    Agrees on the longest length with one ``all_reduce(MAX)`` of a one-element tensor, pads the
    local tensor along dim 0 with ``pad_value`` (0 is right for SUM; use the op's identity for
    others), reduces, and returns the reduced tensor of the longest length. Trailing dimensions
    must agree (check them with :func:`check_same_shapes` on ``tensor[0]`` while debugging).
    """
    import torch
    import torch.distributed as dist

    if tensor.dim() == 0:
        raise DenpexError(
            "all_reduce_padded needs a tensor with at least one dimension", fix="use a plain all_reduce for scalars"
        )
    op = dist.ReduceOp.SUM if op is None else op
    length = torch.tensor([tensor.shape[0]], dtype=torch.int64, device=tensor.device)
    dist.all_reduce(length, op=dist.ReduceOp.MAX, group=group)
    longest = int(length.item())
    out = tensor.contiguous().clone()
    if out.shape[0] < longest:
        pad = torch.full(
            (longest - out.shape[0],) + tuple(out.shape[1:]), pad_value, dtype=out.dtype, device=out.device
        )
        out = torch.cat([out, pad], dim=0)
    dist.all_reduce(out, op=op, group=group)
    return out
