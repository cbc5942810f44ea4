"""One spelling per collective: map every name a source uses onto :data:`denpex_nb.incident.OPS`.

Sources spell the same collective many ways: ``ALLGATHER`` (WorkNCCL, DETAIL), ``_ALLGATHER_BASE``
(all_gather_into_tensor), ``gloo:all_gather`` / ``nccl:all_gather`` (Flight Recorder),
``AllGather`` (NCCL COLL lines), ``allgather`` (ProcessGroupGloo errors).
"""

from __future__ import annotations

import re
from functools import lru_cache

_ALIASES = {
    "allreduce": "all_reduce",
    "allreducecoalesced": "all_reduce_coalesced",
    "allreducesparse": "all_reduce_sparse",
    "allgather": "all_gather",
    "allgatherbase": "all_gather_into_tensor",
    "allgatherintotensor": "all_gather_into_tensor",
    "allgathersingle": "all_gather_into_tensor",
    "allgatherintotensorcoalesced": "all_gather_coalesced",
    "allgathercoalesced": "all_gather_coalesced",
    "reducescatter": "reduce_scatter",
    "reducescatterbase": "reduce_scatter_tensor",
    "reducescattertensor": "reduce_scatter_tensor",
    "reducescattertensorcoalesced": "reduce_scatter",
    "broadcast": "broadcast",
    "reduce": "reduce",
    "gather": "gather",
    "scatter": "scatter",
    "barrier": "barrier",
    "alltoall": "all_to_all",
    "alltoallbase": "all_to_all_single",
    "alltoallsingle": "all_to_all_single",
    "send": "send",
    "recv": "recv",
    "recvanysource": "recv_anysource",
    "coalesced": "coalesced",
    "unknown": "unknown",
}

_STRIP = re.compile(r"[^a-z]")


#: the spelling of an op name no alias knows (a cut or garbled field)
UNKNOWN = "unknown"


@lru_cache(maxsize=1024)
def normalize_op(name: str | None) -> str | None:
    """``'nccl:_ALLGATHER_BASE'`` -> ``'all_gather_into_tensor'``; unknown names -> ``'unknown'``.

    The backend prefix (``gloo:``/``nccl:``) and a p2p suffix (``send 0->1``) are dropped.
    """
    if name is None:
        return None
    text = str(name).strip()
    if not text:
        return None
    if ":" in text:
        text = text.split(":", 1)[1]
    text = text.split(" ", 1)[0]
    key = _STRIP.sub("", text.lower())
    return _ALIASES.get(key, UNKNOWN)


#: ops whose output is the inputs of all ranks stacked: out numel = in numel * world size
GATHER_LIKE = frozenset({"all_gather", "all_gather_into_tensor", "all_gather_coalesced"})
#: ops whose input is split over ranks: in numel = out numel * world size
SCATTER_LIKE = frozenset({"reduce_scatter", "reduce_scatter_tensor"})
#: ops where every rank must pass the same numel in and out
SAME_SIZE = frozenset({"all_reduce", "all_reduce_coalesced", "broadcast", "reduce", "barrier"})
#: ops that complete on no rank before every rank of the group has issued them (each rank's
#: output needs every rank's input, on every backend). A broadcast, scatter or reduce can return
#: on its root with the others not there (gloo sends eagerly), so they are not here.
EVERY_RANK_NEEDED = frozenset(
    GATHER_LIKE
    | SCATTER_LIKE
    | {"all_reduce", "all_reduce_coalesced", "all_reduce_sparse", "barrier", "all_to_all", "all_to_all_single"}
)
#: point-to-point ops: never aligned across the whole group
P2P = frozenset({"send", "recv", "recv_anysource"})
