"""Pins decisions of ``explain`` that the semantic mutation campaign (benchmarks/bench_mutation.py,
issue #15) found unpinned."""

from __future__ import annotations

from denpex_nb import diagnose
from denpex_nb.analysis.explain import crashed_ranks, sort_findings
from denpex_nb.analysis.model import Evidence, Finding
from tests.analysis._frames import err, ev, incident, steps

DDP = "RuntimeError: Expected to have finished reduction in the prior iteration before starting a new one."


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


def test_an_integer_gather_of_odd_length_is_not_syncbns_signature():
    """Rank 0 alone all_gathers 9 int64 values (counts or indices, not [mean, invstd, count] floats)
    while ranks 1 and 2 wait in a barrier: an op mismatch naming rank 0, and the user is not told it
    is SyncBatchNorm's evaluation hang."""
    rows = steps(3, 4) + [ev(0, 5, op="all_gather", shape=(9,), dtype="int64", out_shape=(27,))]
    rows += [ev(r, 5, op="barrier", shape=(1,)) for r in (1, 2)]
    d = diagnose(incident(rows))
    assert (d.verdict, d.culprit_ranks) == ("op-mismatch", [0])


def test_a_caller_with_no_errors_frame_is_told_no_rank_crashed():
    """``crashed_ranks`` of no errors frame at all (None) is no rank, not a TypeError (which diagnose
    would turn into a 'rule failed' note instead of the crash-behind-desync decision)."""
    assert crashed_ranks(None) == set()


def test_ddp_explains_a_dtype_mismatch_of_its_all_reduce():
    """Rank 1 all_reduces a float16 bucket where ranks 0 and 2 reduce float32 ones, and DDP reports
    unused parameters: the ranks reduce different buckets, so the user is told of DDP's unused
    parameters (rank 1 still named), not of a bare dtype mismatch."""
    rows = steps(3, 4, kind="fr") + [ev(r, 5, kind="fr", dtype="float16" if r == 1 else "float32") for r in range(3)]
    assert diagnose(incident(rows)).verdict == "dtype-mismatch"
    d = diagnose(incident(rows, [err(0, "ddp_unused_parameters", DDP)]))
    assert (d.verdict, d.culprit_ranks, d.first.seq) == ("unused-parameters", [1], 5)


def test_ddp_explains_the_earliest_of_two_all_reduce_divergences():
    """The buckets diverge at seq 5 (rank 1: 1 element, the others 170) and again at seq 7 (rank 2),
    and DDP reports unused parameters: the user is told the first divergence, seq 5, is DDP's, with
    rank 1 named; the later one stays a shape mismatch, not the other way round."""
    rows = steps(3, 4, kind="fr") + [ev(r, 5, kind="fr", shape=(1,) if r == 1 else (170,)) for r in range(3)]
    rows += [ev(r, 6, kind="fr") for r in range(3)]
    rows += [ev(r, 7, kind="fr", shape=(2,) if r == 2 else (170,)) for r in range(3)]
    d = diagnose(incident(rows, [err(0, "ddp_unused_parameters", DDP)]))
    assert (d.verdict, d.culprit_ranks, d.first.seq) == ("unused-parameters", [1], 5)
    assert [(f.class_id, f.seq) for f in d.findings] == [("unused-parameters", 5), ("shape-mismatch", 7)]


def test_ddps_divergence_with_an_even_op_split_is_its_bucket_all_reduce():
    """Ranks 0 and 1 wait in a bucket all_reduce at seq 5 while ranks 2 and 3 already broadcast the
    next iteration's buffers (a tie: the op mismatch names no op), and DDP reports unused
    parameters: the user is told the collective is DDP's all_reduce, not that it is unknown."""
    rows = steps(4, 4, kind="fr") + [ev(r, 5, kind="fr", op="all_reduce" if r < 2 else "broadcast") for r in range(4)]
    assert diagnose(incident(rows)).first.op is None
    d = diagnose(incident(rows, [err(r, "ddp_unused_parameters", DDP) for r in range(4)]))
    assert (d.verdict, d.first.seq, d.first.op) == ("unused-parameters", 5, "all_reduce")


def test_two_tied_op_mismatches_of_one_counter_stay_two_findings():
    """Ranks 0, 1 all_reduce while ranks 2, 3 broadcast, at seq 5 and again at seq 6 (ties: neither
    names an op): two cells of one counter are two divergences, the second a possible consequence
    of the first; the user is not told of one merged mismatch."""
    rows = steps(4, 4, kind="fr")
    rows += [ev(r, s, kind="fr", op="all_reduce" if r < 2 else "broadcast") for s in (5, 6) for r in range(4)]
    d = diagnose(incident(rows))
    assert [(f.class_id, f.seq, f.op) for f in d.findings] == [("op-mismatch", 5, None), ("op-mismatch", 6, None)]
    assert d.findings[1].consequence_of == d.findings[0].key


def test_a_finding_that_cites_a_line_comes_before_one_that_cites_none():
    """Two findings with no time and no seq, one citing line 3 of a file whose name sorts after
    every other ('\\uffff'), one citing nothing: the one with a line to show is listed first, however
    its file is named (the one with no evidence is never put first by the tie-break)."""
    cited = Finding("rank-crash", "rank 1 crashed", evidence=(Evidence(file="\uffff", line=3, text="boom", rank=1),))
    bare = Finding("rank-crash", "a rank crashed")
    assert [f.summary for f in sort_findings([bare, cited])] == ["rank 1 crashed", "a rank crashed"]


def test_an_all_gather_every_rank_issued_is_not_syncbns_hang():
    """Rank 0 calls all_gather and rank 1 all_gather_into_tensor, both of 9 floats (the signature's
    shape): every rank is gathering, none is elsewhere, so the user is told of an op mismatch, not
    of SyncBatchNorm's evaluation hang (some ranks gathering statistics while the others are not)."""
    rows = steps(2, 4) + [ev(0, 5, op="all_gather", shape=(9,), out_shape=(18,))]
    rows += [ev(1, 5, op="all_gather_into_tensor", shape=(9,), out_shape=(18,))]
    assert diagnose(incident(rows)).verdict == "op-mismatch"


def test_a_two_dimensional_gather_is_not_syncbns_signature():
    """Rank 0 alone all_gathers a (9, 4) float tensor while ranks 1 and 2 wait in a barrier: the
    statistics gather is 1-D (2C+1 values), so the user is told of an op mismatch naming rank 0, not
    of SyncBatchNorm's hang because the first dimension is odd."""
    rows = steps(3, 4) + [ev(0, 5, op="all_gather", shape=(9, 4), out_shape=(27, 4))]
    rows += [ev(r, 5, op="barrier", shape=(1,)) for r in (1, 2)]
    d = diagnose(incident(rows))
    assert (d.verdict, d.culprit_ranks) == ("op-mismatch", [0])


def test_two_findings_at_one_seq_are_not_each_others_consequence():
    """At seq 5 rank 1 passed 6 elements where ranks 0 and 2 passed 8, and rank 3 never reached it:
    two findings of the same collective, neither later than the other, so neither is marked a
    possible consequence of the other (nor lowered to low confidence). The sizes name no culprit: 2
    of the 4 ranks is no strict majority (rank 3 may have come with 6)."""
    rows = steps(4, 4) + [ev(r, 5, shape=(6,) if r == 1 else (8,)) for r in range(3)]
    d = diagnose(incident(rows))
    assert [(f.class_id, f.seq, f.culprit_ranks) for f in d.findings] == [
        ("rank-desync", 5, (3,)),
        ("shape-mismatch", 5, ()),
    ]
    assert [(f.confidence, f.consequence_of) for f in d.findings] == [("high", None), ("medium", None)]


def test_a_shape_mismatch_with_a_gathering_rank_is_not_syncbns_hang():
    """One DETAIL mismatch message: rank 0's fingerprint is a 1-D all_gather of 9 floats (the
    statistics gather's shape), rank 1's states 8 elements and lost its OpType (a re-wrapped
    paste): a shape mismatch, not SyncBatchNorm's hang, which only explains ranks that were
    elsewhere (a desync or an op mismatch), never two ranks at one collective."""
    rows = [
        ev(0, 5, kind="detail", op="all_gather", shape=(9,), out_shape=(18,), file="rank0.log"),
        ev(1, 5, kind="detail", op=None, shape=(8,), file="rank0.log"),
    ]
    d = diagnose(incident(rows))
    assert (d.verdict, d.first.rule) == ("shape-mismatch", "fingerprint-pairs")


def test_a_gather_of_two_tensors_is_not_syncbns_signature():
    """Rank 0 alone all_gathers two 1-D float tensors of 9 and 4 elements (a coalesced gather)
    while ranks 1 and 2 wait in a barrier: the statistics gather is one tensor, so the user is told
    of an op mismatch naming rank 0, not of SyncBatchNorm's hang because the first tensor is odd."""
    gather = ev(0, 5, op="all_gather_coalesced", shape=(9,), out_shape=(39,))
    gather.update(in_shapes=((9,), (4,)), numel_in=13)
    rows = steps(3, 4) + [gather] + [ev(r, 5, op="barrier", shape=(1,)) for r in (1, 2)]
    d = diagnose(incident(rows))
    assert (d.verdict, d.culprit_ranks) == ("op-mismatch", [0])
