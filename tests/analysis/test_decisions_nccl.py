"""The decisions of the rules that compare two sides of one record: ``fingerprint-pairs`` (one
DETAIL mismatch message) and ``nccl-opcounts`` (NCCL COLL lines), pinned on small inputs.

Decisions of rule ``fingerprint-pairs``:

- the two fingerprints are compared op first, then dtype, then shape, then sequence number, and
  only the first difference is reported: a pair that differs in op and seq is an op mismatch
  (test_a_fingerprint_pair_differing_in_op_and_seq_is_an_op_mismatch); same op, other dtype
  and seq is a dtype mismatch (test_a_fingerprint_pair_differing_in_dtype_and_seq_is_a_dtype_mismatch).
- a pair never names a culprit (test_a_fingerprint_pair_never_names_a_culprit).
- only DETAIL fingerprints are paired: two ranks' records of another kind on one line (a desync
  snapshot listing ranks) are no pair (test_only_detail_fingerprints_are_paired).

Decisions of rule ``nccl-opcounts``:

- processes are matched by communicator size and opCount, op then dtype then count; culprits
  need every process's rank known: one process known only by host:pid leaves the culprit
  undetermined (test_a_process_known_only_by_host_pid_leaves_the_culprit_undetermined); a
  host:pid another line ranks counts as that rank (test_a_host_pid_another_line_ranks_counts_as_that_rank).
- with every rank known, the culprit is a strict minority of the communicator's size, not of
  the processes seen (test_nccl_culprit_is_a_minority_of_the_communicator).
- a process with several communicators of one size is left out: their opCounts are unrelated
  (test_a_process_with_two_communicators_of_one_size_is_left_out).
- only the first disagreement is reported (test_only_the_first_opcount_disagreement_is_reported).
- a row whose line text is unknown is cited by what the process issued, at line 0 when its line
  is unknown (test_nccl_evidence_without_a_line_says_what_the_process_issued).
- the summary describes each side by its first process's op, count and dtype
  (test_the_nccl_summary_describes_each_side_by_its_first_process), its count and dtype too when the
  side's processes differ in them (test_an_op_split_describes_each_side_by_its_first_processs_count_and_dtype).
- only NCCL COLL rows with an opCount and a communicator size are compared: the tracer's records of
  the same run (another counter) never join them
  (test_nccl_lines_are_compared_among_themselves_never_with_the_tracers_records).
"""

from __future__ import annotations

import pandas as pd

from denpex_nb import diagnose
from denpex_nb.analysis.rules import Context, fingerprint_pairs

from ._frames import ev, incident


def _fp(rank, seq, op="all_reduce", dtype="float32", shape=(8,), line=7):
    """One rank's fingerprint from a DETAIL mismatch message (both ranks' rows share its line)."""
    row = ev(rank, seq, op=op, dtype=dtype, shape=shape, kind="detail", state="failed", file="rank1.log")
    row["line"] = line
    return row


def _pairs(rows):
    """The rule's own findings (before merging with the alignment's view of the same rows)."""
    ctx = Context(incident=incident(rows), alignment=None, state=pd.DataFrame(), group_size=None)
    return fingerprint_pairs(ctx)


def test_a_fingerprint_pair_differing_in_op_and_seq_is_an_op_mismatch():
    (f,) = _pairs([_fp(1, 4, op="broadcast"), _fp(0, 3)])
    assert f.class_id == "op-mismatch" and f.op is None


def test_a_fingerprint_pair_differing_in_dtype_and_seq_is_a_dtype_mismatch():
    (f,) = _pairs([_fp(1, 4, dtype="float64"), _fp(0, 3)])
    assert (f.class_id, f.op) == ("dtype-mismatch", "all_reduce")
    (f,) = _pairs([_fp(1, 4, shape=(6,)), _fp(0, 3)])
    assert f.class_id == "shape-mismatch"
    (f,) = _pairs([_fp(1, 4), _fp(0, 3)])
    assert f.class_id == "rank-desync"
    assert _pairs([_fp(1, 3), _fp(0, 3)]) == []


def test_a_fingerprint_pair_never_names_a_culprit():
    (f,) = _pairs([_fp(1, 3, op="broadcast"), _fp(0, 3)])
    assert not f.culprit_ranks and f.culprit_basis.startswith("undetermined")


def _coll(rank, opcount=5, op="all_reduce", dtype="float32", numel=1024, nranks=4, host=None, pid=None, pg="0xc0"):
    row = ev(
        rank,
        opcount,
        op=op,
        kind="nccl_opcount",
        shape=None,
        numel_in=numel,
        numel_out=numel,
        dtype=dtype,
        world_size=nranks,
        pg=pg,
        file=f"{host or 'h'}-{rank if rank is not None else pid}.log",
    )
    row.update(state=None, host=host, pid=pid)
    return row


def _nccl(rows):
    return [f for f in diagnose(incident(rows)).findings if f.rule == "nccl-opcounts"]


def test_a_process_known_only_by_host_pid_leaves_the_culprit_undetermined():
    """Five processes of a 5-rank communicator: ranks 0-2 all_reduce, rank 3 and a process known
    only by host:pid broadcast. That process may be rank 4 or any other: no culprit."""
    rows = [_coll(r, op="broadcast" if r == 3 else "all_reduce", nranks=5) for r in range(4)]
    rows.append(_coll(None, op="broadcast", nranks=5, host="node7", pid=4242))
    (f,) = _nccl(rows)
    assert (f.class_id, list(f.culprit_ranks), f.confidence) == ("op-mismatch", [], "medium")
    assert "host:pid" in f.culprit_basis
    known = [_coll(r, op="broadcast" if r == 3 else "all_reduce", nranks=5) for r in range(5)]
    (f,) = _nccl(known)
    assert (list(f.culprit_ranks), f.confidence) == ([3], "high")


def test_nccl_culprit_is_a_minority_of_the_communicator():
    rows = [_coll(r, dtype="float16" if r == 2 else "float32", nranks=8) for r in range(4)]
    (f,) = _nccl(rows)  # 3 of an 8-rank communicator is no majority
    assert (f.class_id, list(f.culprit_ranks)) == ("dtype-mismatch", [])
    rows = [_coll(r, dtype="float16" if r == 2 else "float32", nranks=4) for r in range(4)]
    (f,) = _nccl(rows)
    assert list(f.culprit_ranks) == [2]


def test_a_process_with_two_communicators_of_one_size_is_left_out():
    rows = [_coll(r, numel=512 if r == 3 else 1024) for r in range(4)]
    rows.append(_coll(3, opcount=9, pg="0xd0"))  # rank 3 also has a second 4-rank communicator
    assert _nccl(rows) == []


def test_only_the_first_opcount_disagreement_is_reported():
    rows = [_coll(r, opcount=5, numel=512 if r == 1 else 1024) for r in range(4)]
    rows += [_coll(r, opcount=6, op="broadcast" if r == 2 else "all_reduce") for r in range(4)]
    (f,) = _nccl(rows)
    assert (f.class_id, f.seq, list(f.culprit_ranks)) == ("shape-mismatch", 5, [1])


def test_nccl_evidence_without_a_line_says_what_the_process_issued():
    """A COLL row with no line text known is cited as '<process>: <op> opCount 0x5', at line 0 when
    its line is unknown."""
    rows = [_coll(r) for r in range(3)] + [_coll(3, numel=512)]
    rows[3]["line"] = None
    (f,) = _nccl(rows)
    ev3 = next(e for e in f.evidence if e.text.startswith("rank 3"))
    assert (ev3.text, ev3.line) == ("rank 3: all_reduce opCount 0x5", 0)


def test_a_host_pid_another_line_ranks_counts_as_that_rank():
    """The COLL line of node7:4242 carries no rank, but the rank map says pid 4242 on node7 is rank
    4: with every rank known, ranks 3 and 4 (a minority of five) are named."""
    rows = [_coll(r, op="broadcast" if r == 3 else "all_reduce", nranks=5) for r in range(4)]
    rows.append(_coll(None, op="broadcast", nranks=5, host="node7", pid=4242))
    (f,) = [
        f
        for f in diagnose(incident(rows, ranks=[dict(rank=4, pid=4242, host="node7")])).findings
        if f.rule == "nccl-opcounts"
    ]
    assert (f.class_id, list(f.culprit_ranks), f.confidence) == ("op-mismatch", [3, 4], "high")
    assert "rank 3, rank 4: broadcast" in f.summary


def test_the_nccl_summary_describes_each_side_by_its_first_process():
    """A dtype split where rank 1's op is unknown: the float32 side reads as rank 0's all_reduce."""
    rows = [_coll(0), _coll(1, op=None), _coll(2, dtype="float16"), _coll(3, dtype="float16")]
    (f,) = _nccl(rows)
    assert f.class_id == "dtype-mismatch"
    assert "rank 0, rank 1: all_reduce count 1024 float32" in f.summary


def test_nccl_lines_are_compared_among_themselves_never_with_the_tracers_records():
    """A run traced by the tracer (pg "0", its own seq) that also logged NCCL COLL lines, where rank 3
    sent 512 elements at opCount 5 and the others 1024: rank 3 is named. Were the tracer's rows
    (they carry a seq and a world size too) mixed in, every process would seem to have two
    communicators of size 4 and be left out, and the mismatch would go unreported."""
    rows = [_coll(r, numel=512 if r == 3 else 1024) for r in range(4)]
    traced = [ev(r, s, world_size=4) for r in range(4) for s in range(1, 7)]
    (f,) = _nccl(rows + traced)
    assert (f.class_id, f.seq, list(f.culprit_ranks)) == ("shape-mismatch", 5, [3])


def test_an_op_split_describes_each_side_by_its_first_processs_count_and_dtype():
    """An op split where the all_reduce side holds rank 0 (1024 float32) and rank 1 (512 float16):
    the side reads as rank 0's all_reduce of 1024 float32, never a mix of rank 0's op and rank 1's
    count or dtype."""
    rows = [_coll(0), _coll(1, dtype="float16", numel=512), _coll(2, op="broadcast"), _coll(3, op="broadcast")]
    (f,) = _nccl(rows)
    assert f.class_id == "op-mismatch"
    assert "rank 0, rank 1: all_reduce count 1024 float32" in f.summary


def test_only_detail_fingerprints_are_paired():
    """Beside a DETAIL pair (ranks 0 and 1 at other ops, one message), two watchdog records of ranks
    0 and 1 read off one line of one file (the way a snapshot line lists several ranks), also at
    other ops: only the DETAIL pair is a fingerprint pair, so one finding, not two."""
    rows = [ev(0, 3, kind="work", file="all.log"), ev(1, 4, op="broadcast", kind="work", file="all.log")]
    for row in rows:
        row["line"] = 7
    (f,) = _pairs(rows + [_fp(0, 3), _fp(1, 4, op="broadcast")])
    assert (f.class_id, f.evidence[0].file) == ("op-mismatch", "rank1.log")
