"""The decisions of the rules that read a verdict another tool wrote: ``monitored-barrier``,
``desync-report``, ``nccl-ras``, ``detail-text``, ``fr-analyzer-text`` and ``gloo-size``.

Decisions of rule ``monitored-barrier``: the ranks monitoredBarrier names are culprits by
statement, at high confidence; naming none gives medium and no culprit
(test_monitored_barrier_names_its_ranks_by_statement).

Decisions of rule ``desync-report``: the ranks the desync report names as lagging are culprits
by statement; a report naming none is low confidence (test_desync_report_names_the_lagging_ranks).

Decisions of rule ``nccl-ras``: RAS's related ranks are culprits by statement, at medium
confidence (test_nccl_ras_names_its_ranks_at_medium_confidence).

Decisions of rule ``detail-text``: DETAIL's verdict text gives the class its wording names (op
type, dtypes, shapes, sequence number), and only when its fingerprints were not read as events
(test_detail_text_names_its_class_unless_fingerprints_were_read).

Decisions of rule ``fr-analyzer-text``: torchfrtrace's finding gives the class its wording names;
the missing ranks it names are culprits (test_fr_analyzer_text_class_and_named_ranks).

Decisions of rule ``gloo-size``: gloo's enforce failure (X vs Y bytes) is a size mismatch that
never names a culprit: the aborting rank is not necessarily the odd one
(test_gloo_enforce_is_a_size_mismatch_without_a_culprit).
"""

from __future__ import annotations

from denpex_nb import diagnose

from ._frames import err, ev, incident, steps


def test_monitored_barrier_names_its_ranks_by_statement():
    mb = err(0, "monitored_barrier", "[Rank 0]: Ranks 2, 3 failed to pass monitoredBarrier", related=(2, 3), t=1)
    d = diagnose(incident(errors=[mb]))
    assert (d.verdict, d.culprit_ranks, d.first.confidence, d.first.culprit_basis) == (
        "rank-desync",
        [2, 3],
        "high",
        "statement",
    )
    d = diagnose(incident(errors=[dict(mb, related_ranks=None)]))
    assert (d.verdict, d.culprit_ranks, d.first.confidence) == ("rank-desync", [], "medium")


def test_desync_report_names_the_lagging_ranks():
    ds = err(0, "desync_report", "ranks [5, 6] are the lagging ranks that caused this timeout", related=(5, 6), t=1)
    d = diagnose(incident(errors=[ds]))
    assert (d.verdict, d.culprit_ranks, d.first.confidence) == ("rank-desync", [5, 6], "high")
    d = diagnose(incident(errors=[dict(ds, related_ranks=None)]))
    assert (d.verdict, d.culprit_ranks, d.first.confidence) == ("rank-desync", [], "low")


def test_nccl_ras_names_its_ranks_at_medium_confidence():
    ras = err(0, "nccl_ras", "RAS MISMATCH: communicator ranks have different operation counts", related=(3,), t=1)
    d = diagnose(incident(errors=[ras]))
    assert (d.verdict, d.culprit_ranks, d.first.confidence) == ("rank-desync", [3], "medium")


DETAIL = (
    "RuntimeError: Detected mismatch between collectives on ranks. Rank 1 is running collective: "
    "CollectiveFingerPrint(SequenceNumber=3, OpType=ALLREDUCE, ...).Collectives differ in the following "
    "aspects:   Op type: ALLREDUCEvs BROADCAST"
)


def test_detail_text_names_its_class_unless_fingerprints_were_read():
    d = diagnose(incident(errors=[err(1, "detail_mismatch", DETAIL, op="all_reduce", seq=3, seq_kind="detail")]))
    assert (d.verdict, d.culprit_ranks) == ("op-mismatch", [])
    dtypes = DETAIL.replace("Op type: ALLREDUCEvs BROADCAST", "Tensor Tensor dtypes: Doublevs Float")
    assert diagnose(incident(errors=[err(1, "detail_mismatch", dtypes)])).verdict == "dtype-mismatch"
    shapes = DETAIL.replace("Op type: ALLREDUCEvs BROADCAST", "Tensor Tensor shapes: [3, 4]vs [5, 4]")
    assert diagnose(incident(errors=[err(1, "detail_mismatch", shapes)])).verdict == "shape-mismatch"
    # the fingerprints themselves were read as DETAIL events: they, not the text, decide
    rows = [ev(r, 3, kind="detail", op="all_reduce", state="failed") for r in (0, 1)]
    d = diagnose(incident(rows, [err(1, "detail_mismatch", DETAIL, t=1)]))
    assert not any(f.rule == "detail-text" for f in d.findings)


def test_fr_analyzer_text_class_and_named_ranks():
    fr = err(None, "fr_finding", "Collective 12 at pg 0: missing ranks {3}", related=(3,), seq=12)
    d = diagnose(incident(steps(4, 1), [fr]))
    assert (d.verdict, d.culprit_ranks, d.first.confidence, d.first.seq) == ("rank-desync", [3], "high", 12)
    fr = err(None, "fr_finding", "Collective 12 at pg 0: COLLECTIVE_DTYPE_MISMATCH", seq=12)
    d = diagnose(incident(steps(4, 1), [fr]))
    assert (d.verdict, d.culprit_ranks, d.first.confidence) == ("dtype-mismatch", [], "medium")


def test_gloo_enforce_is_a_size_mismatch_without_a_culprit():
    msg = "terminate called after throwing an instance of 'gloo::EnforceNotMet' op.preamble.length <= op.nbytes. 40 vs 24."
    d = diagnose(incident(steps(4, 1), [err(1, "gloo_enforce", msg, t=1)]))
    assert (d.verdict, d.culprit_ranks) == ("shape-mismatch", [])
    assert "40 bytes sent, 24 expected" in d.first.summary
