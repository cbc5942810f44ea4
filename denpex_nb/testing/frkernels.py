"""The two builds of the Flight Recorder decoder's kernels, side by side (tests and benchmarks).

:mod:`denpex_nb.ingest.pickle_nodes` decodes with C kernels (the ``frdecode`` extension, built
with the package) or with the same functions compiled by numba. :func:`kernels_disagree` runs one
pickle through both and says how they differ (None: they agree on everything the decoder hands
on: status, stop position, the node table, and for a dump the entries walker's arrays). Used by
tests/ingest/test_fr_native.py and by the differential fuzz (benchmarks/bench_fuzz_pickles.py).
"""

from __future__ import annotations

import numpy as np

from denpex_nb.ingest import fr_columns
from denpex_nb.ingest import pickle_nodes as pn


def both_available() -> bool:
    """Both builds can run here: the extension was built and numba is installed."""
    return pn.native is not None and pn.NATIVE_OK and pn.AVAILABLE


def _run(data: bytes, kernels: str):
    """(decode result, entries walker result or None) with ``kernels`` ("native" / "numba")."""
    saved = pn.backend
    pn.backend = lambda: kernels  # both builds in one process: no environment to flip
    try:
        nodes = pn.decode(data)
        if isinstance(nodes, tuple):
            return nodes, None
        walked = None
        if nodes.kind[nodes.root] == pn.K_DICT:
            for k, v in nodes.items(nodes.root):
                if (
                    nodes.kind[k] == pn.K_STR
                    and nodes.text(k) == "entries"
                    and nodes.kind[v] in (pn.K_LIST, pn.K_TUPLE)
                ):
                    got = fr_columns.entry_arrays(nodes, v)
                    walked = "declined" if got is None else got
        return nodes, walked
    finally:
        pn.backend = saved


def kernels_disagree(data: bytes) -> str | None:
    """None when the C and numba kernels agree on ``data``, else a line saying where they differ."""
    pn.jit_kernels()
    a, wa = _run(data, "native")
    b, wb = _run(data, "numba")
    if isinstance(a, tuple) or isinstance(b, tuple):
        return None if a == b else f"decode: native {_brief(a)}, numba {_brief(b)}"
    for name in pn.Nodes.__slots__:
        x, y = np.asarray(getattr(a, name)), np.asarray(getattr(b, name))
        if name == "first_edge":  # set only for a container that has children (else never read)
            x, y = x[_parents(a)], y[_parents(b)]
        if x.shape != y.shape or not np.array_equal(x, y):
            return f"node table differs in {name}"
    if (wa is None) != (wb is None) or isinstance(wa, str) != isinstance(wb, str):
        return f"entries walker: native {_brief(wa)}, numba {_brief(wb)}"
    if isinstance(wa, tuple):
        for i, (x, y) in enumerate(zip(wa, wb)):
            if x.dtype != y.dtype or not np.array_equal(x, y):
                return f"entries walker output {i} differs"
    return None


def _parents(nodes) -> np.ndarray:
    return np.isin(nodes.kind, pn.CONTAINERS) & (nodes.size > 0)


def _brief(x) -> str:
    if isinstance(x, tuple) and len(x) == 2 and all(isinstance(v, int) for v in x):
        return pn.message(*x)
    if x is None or isinstance(x, str):
        return str(x)
    return "a table"
