"""The decisions of the explain rules (``crash-behind-desync``, ``syncbn``, ``ddp-buckets``) and of
how findings are combined (``merge``, ``order``), pinned on small inputs.

Decisions of rule ``crash-behind-desync``:

- a desync becomes a rank crash only when every rank behind crashed on its own; a crash explains
  only the ranks it stopped: laggards {3, 4} where only 3 ran out of memory stay a desync and 4
  is never blamed for a crash (test_a_crash_explains_a_desync_only_when_every_laggard_crashed).
- the crash finding it absorbs is not reported twice (test_the_absorbed_crash_is_reported_once).

Decisions of rule ``syncbn``:

- an all_gather issued by some ranks only is SyncBatchNorm's hang when a SyncBatchNorm stack is
  in the evidence or the gather has its signature (1-D, 2C+1 floats); the gatherers are named
  only when the ranks elsewhere are a strict majority (test_syncbn_needs_a_mention_or_its_signature).

Decisions of rule ``ddp-buckets``: DDP's unused-parameter error explains the earliest all_reduce
divergence, which keeps its own culprit (test_ddp_explains_the_all_reduce_divergence).

Decisions of ``merge``: one divergence in several counters is one finding, the preferred
counter's view first; two cells of one counter stay two findings (test_merge_keeps_two_cells_of_one_counter).

Decisions of ``order``: by time, then seq; a later divergence in the same counter is a possible
consequence of the first, at low confidence (test_a_later_divergence_is_a_consequence_of_the_first).
"""

from __future__ import annotations

from denpex_nb import diagnose

from ._frames import err, ev, incident, steps

OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"


def test_a_crash_explains_a_desync_only_when_every_laggard_crashed():
    rows = steps(6, 3) + [ev(r, 4) for r in range(4)]  # ranks 4 and 5 never reached seq 4
    d = diagnose(incident(rows, [err(4, "oom", OOM, t=1)]))
    for f in d.findings:
        if f.class_id == "rank-crash":
            assert list(f.culprit_ranks) == [4], f
    desync = next(f for f in d.findings if f.class_id == "rank-desync")
    assert list(desync.culprit_ranks) == [4, 5]
    both = diagnose(incident(rows, [err(4, "oom", OOM, t=1), err(5, "oom", OOM, t=1)]))
    assert (both.verdict, both.culprit_ranks, both.first.rule) == ("rank-crash", [4, 5], "crash-behind-desync")


def test_the_absorbed_crash_is_reported_once():
    rows = steps(4, 2) + [ev(r, 3) for r in (0, 1, 3)]
    d = diagnose(incident(rows, [err(2, "oom", OOM, t=1)]))
    assert (d.verdict, d.culprit_ranks, d.first.seq) == ("rank-crash", [2], 3)
    assert sum(f.class_id == "rank-crash" for f in d.findings) == 1


def _syncbn(shape, world=3):
    return (
        steps(world, 4)
        + [ev(0, 5, op="all_gather", shape=shape, out_shape=(world * shape[0],) + shape[1:])]
        + [ev(r, 5, op="barrier", shape=(1,)) for r in range(1, world)]
    )


def test_syncbn_needs_a_mention_or_its_signature():
    assert diagnose(incident(_syncbn((8, 4)))).verdict == "op-mismatch"
    assert diagnose(incident(_syncbn((8,)))).verdict == "op-mismatch"  # even length: not 2C+1
    d = diagnose(incident(_syncbn((9,))))
    assert (d.verdict, d.culprit_ranks, d.first.confidence) == ("syncbn-eval-hang", [0], "medium")
    mention = [err(0, "exception", "RuntimeError: Timed out in sync_batch_norm", t=20)]
    d = diagnose(incident(_syncbn((8, 4), world=2), mention))
    assert (d.verdict, d.culprit_ranks) == ("syncbn-eval-hang", [])  # one rank elsewhere of two


DDP = "RuntimeError: Expected to have finished reduction in the prior iteration before starting a new one."


def test_ddp_explains_the_all_reduce_divergence():
    rows = steps(3, 4, kind="fr") + [ev(r, 5, kind="fr", shape=(1,) if r == 1 else (170,)) for r in range(3)]
    d = diagnose(incident(rows, [err(0, "ddp_unused_parameters", DDP)]))
    assert (d.verdict, d.culprit_ranks, d.first.seq) == ("unused-parameters", [1], 5)
    rows = steps(3, 4, kind="fr") + [
        ev(r, 5, kind="fr", op="broadcast", dtype="float16" if r else "float32") for r in range(3)
    ]
    d = diagnose(incident(rows, [err(0, "ddp_unused_parameters", DDP)]))
    assert d.verdict == "dtype-mismatch"  # a broadcast is not DDP's bucket all_reduce


def test_merge_keeps_two_cells_of_one_counter():
    rows = steps(4, 2) + [ev(r, 3, shape=(6,) if r == 1 else (8,)) for r in range(4)]
    rows += [ev(r, 4, shape=(6,) if r == 1 else (8,)) for r in range(4)]
    d = diagnose(incident(rows))
    assert [(f.class_id, f.seq) for f in d.findings] == [("shape-mismatch", 3), ("shape-mismatch", 4)]
    # the same divergence through the tracer and the watchdog counter: one finding, the tracer's
    both = [ev(r, 3, shape=(6,) if r == 1 else (8,)) for r in range(4)]
    both += [ev(r, 9, kind="work", shape=None, numel_in=6 if r == 1 else 8) for r in range(4)]
    d = diagnose(incident(both))
    assert [(f.class_id, f.seq_kind) for f in d.findings] == [("shape-mismatch", "trace")]


def test_a_later_divergence_is_a_consequence_of_the_first():
    rows = steps(4, 2) + [ev(r, 3, shape=(6,) if r == 1 else (8,)) for r in range(4)]
    rows += [ev(r, 4, op="broadcast" if r == 2 else "all_reduce") for r in range(4)]
    d = diagnose(incident(rows))
    first, later = d.findings
    assert (first.class_id, later.class_id) == ("shape-mismatch", "op-mismatch")
    assert (later.confidence, later.consequence_of) == ("low", first.key)
    assert first.consequence_of is None and first.confidence == "high"
