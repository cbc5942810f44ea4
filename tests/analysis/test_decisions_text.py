"""The decisions of the rules that read a verdict another tool wrote: ``monitored-barrier``,
``desync-report``, ``nccl-ras``, ``detail-text``, ``fr-analyzer-text`` and ``gloo-size``.

Decisions of rule ``monitored-barrier``: the ranks monitoredBarrier names are culprits by
statement, at high confidence; naming none gives medium and no culprit
(test_monitored_barrier_names_its_ranks_by_statement).

Decisions of rule ``desync-report``: the ranks the desync report names as lagging are culprits
by statement; a report naming none is low confidence (test_desync_report_names_the_lagging_ranks).
A report naming every rank of the group (two or more, the group being the stated size, else the
highest rank seen plus one) singles nobody out: no culprit, low
(test_a_desync_report_naming_every_rank_of_the_group_names_no_culprit).

Decisions of rule ``nccl-ras``: RAS's related ranks are culprits by statement, at medium
confidence (test_nccl_ras_names_its_ranks_at_medium_confidence); when RAS's counts put the
listed ranks ahead (at the highest operation), nobody is named
(test_nccl_ras_listing_the_ranks_ahead_names_no_culprit); counts that give no side the number of
ranks listed say nothing of them: they stay named
(test_nccl_ras_counts_that_match_no_listed_number_leave_the_ranks_named).

Decisions of rule ``detail-text``: DETAIL's verdict text gives the class its wording names (op
type, dtypes, shapes, sequence number), and only when its fingerprints were not read as events
(test_detail_text_names_its_class_unless_fingerprints_were_read).

Decisions of rule ``fr-analyzer-text``: torchfrtrace's finding gives the class its wording names;
the missing ranks it names are culprits (test_fr_analyzer_text_class_and_named_ranks); of several
findings of one class, the first is quoted (test_a_torchfrtrace_finding_quotes_its_first_row).

Decisions of rule ``gloo-size``: gloo's enforce failure (X vs Y bytes) is a size mismatch that
never names a culprit: the aborting rank is not necessarily the odd one
(test_gloo_enforce_is_a_size_mismatch_without_a_culprit).

A text finding takes the op and seq of its first row, and quotes at most 200 characters of the
message (test_a_text_finding_takes_its_first_rows_op_and_seq_and_quotes_200_characters); the
torchfrtrace quote is its first 200 characters (test_a_torchfrtrace_quote_is_cut_at_200_characters),
gloo's invalid-size finding quotes the first rejection (test_gloo_size_quotes_the_first_rejection),
DETAIL's what follows 'aspects:' (test_detail_text_quotes_what_follows_aspects), of its first
message (test_detail_text_quotes_its_first_message).
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


def test_a_desync_report_naming_every_rank_of_the_group_names_no_culprit():
    """A report that names every rank of the group (two ranks of a two-rank job: all joined, none
    finished) singles nobody out; naming two ranks of a three-rank job names those two."""
    ds = err(0, "desync_report", "ranks [0, 1] are the lagging ranks that caused this timeout", related=(0, 1), t=1)
    d = diagnose(incident(steps(2, 3), [ds]))
    assert (d.verdict, d.culprit_ranks, d.first.confidence) == ("rank-desync", [], "low")
    assert d.first.culprit_basis.startswith("undetermined: the report names every rank")
    d = diagnose(incident(steps(3, 3), [ds]))
    assert (d.verdict, d.culprit_ranks, d.first.confidence) == ("rank-desync", [0, 1], "high")


def test_a_text_finding_takes_its_first_rows_op_and_seq_and_quotes_200_characters():
    """Two torchfrtrace findings of one class: the finding's op and seq are the first row's; the
    quoted message is cut at 200 characters (gloo's invalid-size line too)."""
    rows = [
        err(None, "fr_finding", "Collective 12 at pg 0: COLLECTIVE_DTYPE_MISMATCH", op="broadcast", seq=12, line=1),
        err(None, "fr_finding", "Collective 15 at pg 0: COLLECTIVE_DTYPE_MISMATCH", op="all_reduce", seq=15, line=2),
    ]
    f = next(f for f in diagnose(incident(steps(4, 1), rows)).findings if f.rule == "fr-analyzer-text")
    assert (f.op, f.seq) == ("broadcast", 12)
    msg = "Invalid size: output tensor list differs from the input " + "x" * 300
    inv = err(1, "gloo_invalid_size", msg, op="all_gather", t=1)
    f = next(f for f in diagnose(incident(steps(4, 1), [inv])).findings if f.rule == "gloo-size")
    assert f.summary.endswith(msg[:200]) and f.op == "all_gather"


def test_nccl_ras_listing_the_ranks_ahead_names_no_culprit():
    """RAS lists 2 ranks at operation 641 beside 30 at 640: the listed ranks are ahead, no culprits."""
    msg = "RAS MISMATCH: 30 ranks have launched up to operation 640; 2 ranks have launched up to operation 641"
    d = diagnose(incident(errors=[err(0, "nccl_ras", msg, related=(5, 6), t=1)]))
    assert (d.verdict, d.culprit_ranks) == ("rank-desync", [])
    assert d.first.culprit_basis.startswith("undetermined: RAS lists the ranks that are ahead")
    behind = "RAS MISMATCH: 30 ranks have launched up to operation 641; 2 ranks have launched up to operation 640"
    d = diagnose(incident(errors=[err(0, "nccl_ras", behind, related=(5, 6), t=1)]))
    assert d.culprit_ranks == [5, 6]


def test_nccl_ras_counts_that_match_no_listed_number_leave_the_ranks_named():
    """RAS lists three ranks while its counts speak of 30 ranks and 2 ranks: the counts do not show
    the listed ranks ahead, so RAS's statement stands and ranks 5-7 are named."""
    msg = "RAS MISMATCH: 30 ranks have launched up to operation 640; 2 ranks have launched up to operation 641"
    d = diagnose(incident(errors=[err(0, "nccl_ras", msg, related=(5, 6, 7), t=1)]))
    assert (d.verdict, d.culprit_ranks) == ("rank-desync", [5, 6, 7])


def test_a_torchfrtrace_finding_quotes_its_first_row():
    """Two torchfrtrace findings of one class: the summary quotes the first (collective 12), not the
    last."""
    rows = [
        err(None, "fr_finding", "Collective 12 at pg 0: COLLECTIVE_DTYPE_MISMATCH", seq=12, line=1),
        err(None, "fr_finding", "Collective 15 at pg 0: COLLECTIVE_DTYPE_MISMATCH", seq=15, line=2),
    ]
    f = next(f for f in diagnose(incident(steps(4, 1), rows)).findings if f.rule == "fr-analyzer-text")
    assert f.summary == "torchfrtrace reported: Collective 12 at pg 0: COLLECTIVE_DTYPE_MISMATCH"


def test_a_torchfrtrace_quote_is_cut_at_200_characters():
    msg = "Collective 12 at pg 0: COLLECTIVE_DTYPE_MISMATCH " + "d" * 300
    fr = err(None, "fr_finding", msg, seq=12)
    f = next(f for f in diagnose(incident(steps(4, 1), [fr])).findings if f.rule == "fr-analyzer-text")
    assert f.summary == "torchfrtrace reported: " + msg[:200]


def test_gloo_size_quotes_the_first_rejection():
    rows = [
        err(1, "gloo_invalid_size", "Invalid size: rank 1 output list of 3 tensors", op="all_gather", t=1, line=1),
        err(2, "gloo_invalid_size", "Invalid size: rank 2 output list of 5 tensors", op="all_gather", t=2, line=2),
    ]
    f = next(f for f in diagnose(incident(steps(4, 1), rows)).findings if f.rule == "gloo-size")
    assert f.summary.endswith("(uneven all_gather). Invalid size: rank 1 output list of 3 tensors")


def test_detail_text_quotes_what_follows_aspects():
    """DETAIL's verdict 'Detected mismatch between collectives on ranks. ... differ in following
    aspects: Op type' is quoted from what follows 'aspects:', not the preamble."""
    msg = (
        "Detected mismatch between collectives on ranks. Rank 0 is running collective: CollectiveFingerPrint("
        "SequenceNumber=3, OpType=ALLREDUCE), but Rank 1 is running collective: CollectiveFingerPrint("
        "SequenceNumber=3, OpType=BROADCAST). Collectives differ in the following aspects:   Op type: ALLREDUCE vs BROADCAST"
    )
    f = next(
        f
        for f in diagnose(incident(steps(2, 1), [err(0, "detail_mismatch", msg, t=1)])).findings
        if f.rule == "detail-text"
    )
    assert f.summary == "DETAIL fingerprint check: Op type: ALLREDUCE vs BROADCAST"


def test_detail_text_quotes_its_first_message():
    first = "Collectives differ in the following aspects:   Op type: ALLREDUCE vs BROADCAST"
    later = "Collectives differ in the following aspects:   Op type: ALLGATHER vs BARRIER"
    rows = [err(0, "detail_mismatch", first, t=1, line=1), err(1, "detail_mismatch", later, t=2, line=2)]
    f = next(f for f in diagnose(incident(steps(2, 1), rows)).findings if f.rule == "detail-text")
    assert f.summary == "DETAIL fingerprint check: Op type: ALLREDUCE vs BROADCAST"
