"""Pins decisions of ``explain`` that the semantic mutation campaign (benchmarks/bench_mutation.py,
issue #15) found unpinned."""

from __future__ import annotations

from denpex_nb import diagnose
from tests.analysis._frames import ev, incident


def test_syncbn_signature_holds_for_one_channel():
    """A 1-D all_gather of 3 floats ([mean, invstd, count] for C = 1 channel) on rank 0 alone, while
    ranks 1 and 2 all_reduce: the smallest SyncBatchNorm statistics gather is recognised."""
    evs = [ev(r, 1, world_size=3) for r in range(3)]
    evs += [ev(0, 2, op="all_gather", shape=(3,), world_size=3)]
    evs += [ev(r, 2, shape=(8,), world_size=3) for r in (1, 2)]
    d = diagnose(incident(events=evs))
    assert d.verdict == "syncbn-eval-hang"


def test_syncbn_signature_holds_for_bfloat16():
    """The statistics gather of a bfloat16 model: 1-D, 3 elements, bfloat16: still SyncBatchNorm's
    signature (bfloat is a floating type)."""
    evs = [ev(r, 1, world_size=3) for r in range(3)]
    evs += [ev(0, 2, op="all_gather", shape=(3,), dtype="bfloat16", world_size=3)]
    evs += [ev(r, 2, shape=(8,), world_size=3) for r in (1, 2)]
    assert diagnose(incident(events=evs)).verdict == "syncbn-eval-hang"


def test_syncbn_signature_holds_for_half():
    """A trace that names the dtype 'half' (not 'float16'): still a floating gather, the signature holds."""
    evs = [ev(r, 1, world_size=3) for r in range(3)]
    evs += [ev(0, 2, op="all_gather", shape=(3,), dtype="half", world_size=3)]
    evs += [ev(r, 2, shape=(8,), world_size=3) for r in (1, 2)]
    assert diagnose(incident(events=evs)).verdict == "syncbn-eval-hang"
