"""The decisions of the explain rules (``crash-behind-desync``, ``syncbn``, ``ddp-buckets``) and of
how findings are combined (``merge``, ``order``), pinned on small inputs.

Decisions of rule ``crash-behind-desync``:

- a desync becomes a rank crash only when every rank behind crashed on its own; a crash explains
  only the ranks it stopped: laggards {3, 4} where only 3 ran out of memory stay a desync and 4
  is never blamed for a crash (test_a_crash_explains_a_desync_only_when_every_laggard_crashed).
- the crash finding it absorbs is not reported twice (test_the_absorbed_crash_is_reported_once);
  it absorbs only the crash findings that name a rank behind: a crash of another rank, or one that
  names no rank, stays (test_only_the_crashes_of_the_ranks_behind_are_absorbed); a finding of
  another class about that rank (its NCCL error) is never absorbed
  (test_only_crash_findings_are_absorbed_never_the_ranks_other_findings).
- the refined finding says "its own" for one rank, "their own" for several, and keeps at most 12
  pieces of evidence, the crashes' first (test_the_crash_summary_and_its_evidence).

Decisions of rule ``syncbn``:

- an all_gather issued by some ranks only is SyncBatchNorm's hang when a SyncBatchNorm stack is
  in the evidence or the gather has its signature (1-D, 2C+1 floats); the gatherers are named
  only when the ranks elsewhere are a strict majority (test_syncbn_needs_a_mention_or_its_signature);
  the all_gather may be an op mismatch or a desync (the others never reached it)
  (test_syncbn_explains_a_desync_too); only a line that mentions SyncBatchNorm (an error or an
  unparsed line) makes it high (test_only_a_syncbatchnorm_mention_raises_the_syncbn_confidence).

Decisions of rule ``ddp-buckets``: DDP's unused-parameter error explains the earliest all_reduce
divergence, which keeps its own culprit (test_ddp_explains_the_all_reduce_divergence), whatever
kind of divergence it is (a desync: test_ddp_explains_an_all_reduce_that_a_rank_never_reached; an op
mismatch of an all_reduce too), with at most 16 pieces of evidence
(test_ddp_explains_an_op_mismatch_of_its_all_reduce).

Decisions of ``merge``: one divergence in several counters is one finding, the preferred
counter's view first; two cells of one counter stay two findings (test_merge_keeps_two_cells_of_one_counter).
The merged finding has the most confident view's confidence, the earliest time, the preferred
view's culprit and its basis (the other's only when it names none), at most 16 pieces of evidence
(test_merge_takes_the_best_of_both_views); medium is more confident than low
(test_merge_ranks_medium_above_low). A view that names no op merges with one that does, whatever
their culprits (test_a_view_without_an_op_merges_with_one_that_names_it). DDP's refined finding
cites at most 16 lines, DDP's first (test_ddp_cites_at_most_16_lines).

Decisions of ``order``: by time, then seq; a later divergence in the same counter is a possible
consequence of the first, at low confidence (test_a_later_divergence_is_a_consequence_of_the_first).
An undetermined failure comes after every finding that says what went wrong, however early
(test_an_undetermined_failure_sorts_after_the_findings_that_say_what_failed). A finding without a
time (None or NaT) sorts after every timed one, one without a seq after every
seq, however large (counters past 2**62) (test_sort_puts_the_unknown_last). Without times or seqs,
the finding whose earliest evidence line comes first (by file, then line) comes first
(test_untimed_findings_are_ordered_by_their_earliest_evidence_line).
"""

from __future__ import annotations

import pandas as pd

from denpex_nb import diagnose
from denpex_nb.analysis.explain import crash_behind_desync, ddp_buckets, merge, sort_findings
from denpex_nb.analysis.model import Evidence, Finding
from denpex_nb.analysis.rules import Context
from denpex_nb.incident import Incident, coerce

from ._frames import T0, err, ev, incident, steps

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


def test_only_the_crashes_of_the_ranks_behind_are_absorbed():
    ctx = Context(incident=incident(errors=[err(2, "oom", OOM)]), alignment=None, state=pd.DataFrame(), group_size=None)
    desync = Finding("rank-desync", "rank 2 behind", pg="0", seq=3, seq_kind="trace", culprit_ranks=(2,))
    mine = Finding("rank-crash", "rank 2 crashed", culprit_ranks=(2,))
    other = Finding("rank-crash", "rank 5 crashed", culprit_ranks=(5,))
    unnamed = Finding("rank-crash", "a rank crashed")
    out = crash_behind_desync(ctx, [desync, mine, other, unnamed])
    assert [(f.class_id, f.culprit_ranks, f.summary) for f in out[1:]] == [
        ("rank-crash", (5,), "rank 5 crashed"),
        ("rank-crash", (), "a rank crashed"),
    ]
    assert out[0].rule == "crash-behind-desync" and out[0].basis == ("rank 2 behind", "rank 2 crashed")


def test_the_crash_summary_and_its_evidence():
    rows = steps(4, 2) + [ev(r, 3) for r in (0, 1, 3)]
    d = diagnose(incident(rows, [err(2, "oom", OOM, t=1)]))
    assert "Rank 2 failed on its own" in d.first.summary
    rows = steps(20, 2) + [ev(r, 3) for r in range(10)]  # ranks 10-19 never reached seq 3, all OOM
    d = diagnose(incident(rows, [err(r, "oom", OOM, t=1) for r in range(10, 20)]))
    assert d.first.rule == "crash-behind-desync" and "failed on their own" in d.first.summary
    assert len(d.first.evidence) == 12  # 8 crash lines, then 4 of the desync's
    assert [e.file for e in d.first.evidence[:8]] == [f"rank{r}.log" for r in range(10, 18)]


def test_syncbn_explains_a_desync_too():
    rows = steps(3, 4) + [ev(0, 5, op="all_gather", shape=(9,), out_shape=(27,))]  # 1 and 2 never reach 5
    d = diagnose(incident(rows))
    assert (d.verdict, d.first.rule) == ("syncbn-eval-hang", "syncbn")


def test_ddp_explains_an_op_mismatch_of_its_all_reduce():
    rows = steps(3, 4, kind="fr") + [ev(r, 5, kind="fr", op="all_reduce" if r == 1 else "broadcast") for r in range(3)]
    assert diagnose(incident(rows)).verdict == "op-mismatch"
    d = diagnose(incident(rows, [err(0, "ddp_unused_parameters", DDP)]))
    assert (d.verdict, d.first.op, d.culprit_ranks) == ("unused-parameters", "all_reduce", [1])
    rows = steps(10, 4, kind="fr") + [ev(r, 5, kind="fr", shape=(1,) if r == 1 else (170,)) for r in range(10)]
    d = diagnose(incident(rows, [err(r, "ddp_unused_parameters", DDP) for r in range(10)]))
    assert d.verdict == "unused-parameters" and len(d.first.evidence) == 16  # 8 DDP lines, 8 of the all_reduce


def _ev(n, file="a.log"):
    return tuple(Evidence(file=file, line=i, text=f"line {i}") for i in range(1, n + 1))


def _t(s):
    return pd.Timestamp(T0 + s, unit="s", tz="UTC")


def test_merge_takes_the_best_of_both_views():
    trace = dict(pg="0", seq=3, seq_kind="trace", op="all_reduce")
    work = dict(pg="0", seq=9, seq_kind="work", op="all_reduce")
    a = Finding("shape-mismatch", "trace view", confidence="medium", t_wall=_t(5), evidence=_ev(10), **trace)
    b = Finding("shape-mismatch", "work view", confidence="high", t_wall=_t(2), evidence=_ev(10, "b.log"), **work)
    (m,) = merge([b, a])
    assert (m.summary, m.seq_kind, m.confidence, m.t_wall) == ("trace view", "trace", "high", _t(2))
    assert len(m.evidence) == 16 and m.evidence[:10] == a.evidence
    # a later or unknown time on the other view never replaces the preferred view's
    late = Finding("shape-mismatch", "work view", t_wall=_t(8), **work)
    untimed = Finding("shape-mismatch", "work view", **work)
    assert merge([late, a])[0].t_wall == _t(5)
    assert merge([untimed, a])[0].t_wall == _t(5)
    # the preferred view's culprit and basis stay; the other's fill in only when it names none
    a1 = Finding("shape-mismatch", "trace view", culprit_ranks=(1,), culprit_basis="majority", **trace)
    b1 = Finding("shape-mismatch", "work view", culprit_ranks=(1,), culprit_basis="statement: x", **work)
    assert merge([b1, a1])[0].culprit_basis == "majority"
    a0 = Finding("shape-mismatch", "trace view", culprit_basis="undetermined: a", **trace)
    b0 = Finding("shape-mismatch", "work view", culprit_basis="undetermined: b", **work)
    assert merge([b0, a0])[0].culprit_basis == "undetermined: a"
    assert merge([b1, a0])[0].culprit_ranks == (1,)


def test_sort_puts_the_unknown_last():
    timed = Finding("rank-desync", "timed", pg="0", seq=4, seq_kind="trace", t_wall=_t(1))
    nat = Finding("rank-desync", "NaT", pg="0", seq=1, seq_kind="trace", t_wall=pd.NaT)
    none = Finding("rank-desync", "no time", pg="0", seq=2, seq_kind="trace")
    assert [f.summary for f in sort_findings([nat, none, timed])] == ["timed", "NaT", "no time"]
    huge = Finding("op-mismatch", "seq past 2**62", pg="0", seq=2**62 + 5, seq_kind="fr")
    text = Finding("op-mismatch", "no seq")
    assert [f.summary for f in sort_findings([text, huge])] == ["seq past 2**62", "no seq"]


def test_untimed_findings_are_ordered_by_their_earliest_evidence_line():
    """Two findings without time or seq: the one citing a.log line 5 (and z.log line 1) is listed
    before the one citing m.log line 3; ordered by their latest line instead, it would come second."""
    a = Finding("rank-crash", "cites a.log:5", evidence=(Evidence("a.log", 5, "x"), Evidence("z.log", 1, "y")))
    m = Finding("rank-crash", "cites m.log:3", evidence=(Evidence("m.log", 3, "w"),))
    assert [f.summary for f in sort_findings([m, a])] == ["cites a.log:5", "cites m.log:3"]


def test_only_a_syncbatchnorm_mention_raises_the_syncbn_confidence():
    """Other errors or unparsed lines that do not mention SyncBatchNorm leave the signature's
    medium confidence; one that does makes it high."""
    other = [err(1, "exception", "ValueError: bad batch", t=20)]
    unparsed = coerce("unparsed", [dict(file="rank1.log", line=3, text="loss 0.25 at step 10")])
    for inc in (
        incident(_syncbn((9,)), other),
        Incident(events=coerce("events", _syncbn((9,))), unparsed=unparsed),
    ):
        d = diagnose(inc)
        assert (d.verdict, d.first.confidence) == ("syncbn-eval-hang", "medium")
    mention = [err(1, "exception", "RuntimeError: Timed out in sync_batch_norm", t=20)]
    assert diagnose(incident(_syncbn((9,)), mention)).first.confidence == "high"


def test_ddp_explains_an_all_reduce_that_a_rank_never_reached():
    """Ranks 0 and 1 reached all_reduce 5, rank 2 never did, and DDP says parameters got no
    gradient: the desync is DDP's unused parameters (rank 2 still named), not a bare desync."""
    rows = steps(3, 4, kind="fr") + [ev(r, 5, kind="fr", state="started") for r in range(2)]
    assert diagnose(incident(rows)).verdict == "rank-desync"
    d = diagnose(incident(rows, [err(0, "ddp_unused_parameters", DDP)]))
    assert (d.verdict, d.culprit_ranks, d.first.seq) == ("unused-parameters", [2], 5)


def test_an_undetermined_failure_sorts_after_the_findings_that_say_what_failed():
    early = Finding("timeout-undetermined", "undetermined", t_wall=_t(1))
    late = Finding("rank-desync", "desync", pg="0", seq=4, seq_kind="trace", t_wall=_t(9))
    assert [f.summary for f in sort_findings([early, late])] == ["desync", "undetermined"]


def test_merge_ranks_medium_above_low():
    """The preferred (trace) view is low, the work view medium: the merged finding is medium."""
    a = Finding("shape-mismatch", "trace view", confidence="low", pg="0", seq=3, seq_kind="trace", op="all_reduce")
    b = Finding("shape-mismatch", "work view", confidence="medium", pg="0", seq=9, seq_kind="work", op="all_reduce")
    (m,) = merge([b, a])
    assert (m.summary, m.confidence) == ("trace view", "medium")


def test_a_view_without_an_op_merges_with_one_that_names_it():
    """The trace view (no op known, rank 1 named) and the work view (all_reduce, rank 1 named) are
    one divergence: one finding, with the op the work view knew."""
    a = Finding("shape-mismatch", "trace view", pg="0", seq=3, seq_kind="trace", culprit_ranks=(1,))
    b = Finding("shape-mismatch", "work view", pg="0", seq=9, seq_kind="work", op="all_reduce", culprit_ranks=(1,))
    (m,) = merge([b, a])
    assert (m.summary, m.op) == ("trace view", "all_reduce")


def test_ddp_cites_at_most_16_lines():
    """DDP's error cites 10 lines and the all_reduce divergence 10: the refined finding keeps 16,
    DDP's ten first."""
    src = Finding("unused-parameters", "DDP reducer", evidence=_ev(10, "ddp.log"))
    target = Finding("shape-mismatch", "sizes", pg="0", seq=5, seq_kind="fr", op="all_reduce", evidence=_ev(10))
    (f,) = ddp_buckets(None, [src, target])
    assert f.class_id == "unused-parameters" and len(f.evidence) == 16 and f.evidence[:10] == src.evidence


def test_only_crash_findings_are_absorbed_never_the_ranks_other_findings():
    """Rank 2 ran out of memory (so never reached seq 3) and also logged an NCCL IB error: the crash
    finding folds into the refined rank-crash, the NCCL error about rank 2 stays reported."""
    rows = steps(4, 2) + [ev(r, 3) for r in (0, 1, 3)]
    ib = "NCCL WARN NET/IB : Got completion from peer 10.0.0.3<4412> with error 12, opcode 0"
    d = diagnose(incident(rows, [err(2, "oom", OOM, t=1), err(2, "nccl_error", ib, t=2, line=2)]))
    assert sorted(f.class_id for f in d.findings) == ["nccl-error", "rank-crash"]
