"""Pins decisions that the mutation campaign of session n (benchmarks/results/mutation_session_*.md,
acc-n-pos) found unpinned: the launcher's exit beside a collective failure (launchers._collective_failure)
and the desync report that names every rank (rules._names_every_rank)."""

from __future__ import annotations

from types import SimpleNamespace

from denpex_nb.analysis.rules import _names_every_rank
from tests.analysis.test_decisions_launchers import _findings, _table


def _watchdog(rank: int, stamp: str | None) -> str:
    head = f"2024-05-01T{stamp}Z " if stamp else ""
    return (
        f"{head}[rank{rank}]:[E ProcessGroupNCCL.cpp:475] [Rank {rank}] Watchdog caught collective operation "
        "timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE, NumelIn=16, NumelOut=16, Timeout(ms)=600000) ran for 600001 "
        "milliseconds before timing out."
    )


def test_an_exit_the_launcher_saw_before_any_collective_failure_is_the_verdict(tmp_path):
    # the worker exited at 10:00:01, the watchdog printed its timeout at 10:00:05: the exit came first
    d, (f,) = _findings(tmp_path, [_watchdog(2, "10:00:05.000000")] + _table(5, 1))
    assert (f.alternative_only, list(f.culprit_ranks), d.verdict) == (False, [5], "rank-crash"), d.summary()
    # printed at 09:59:00, before the exit: the exit may be its consequence, only an alternative
    d, (f,) = _findings(tmp_path, [_watchdog(2, "09:59:00.000000")] + _table(5, 1))
    assert f.alternative_only and d.verdict != "rank-crash", d.summary()


def test_a_collective_failure_printed_without_a_time_may_have_come_first(tmp_path):
    # rank 2's timeout came after the exit, rank 3's has no time: it may have come before, so the exit
    # stays an alternative (the earliest collective failure is unknown, not rank 2's)
    d, (f,) = _findings(tmp_path, [_watchdog(2, "10:00:05.000000"), _watchdog(3, None)] + _table(5, 1))
    assert f.alternative_only and d.verdict != "rank-crash", d.summary()
    # both timed, one before the exit and one after: the earliest one decides, the exit may follow it
    d, (f,) = _findings(tmp_path, [_watchdog(2, "10:00:05.000000"), _watchdog(3, "09:59:00.000000")] + _table(5, 1))
    assert f.alternative_only and d.verdict != "rank-crash", d.summary()


def test_a_gloo_peer_gone_without_the_peer_died_words_is_no_collective_failure_beside_an_exit(tmp_path):
    # gloo's pair saw its peer's socket time out: a consequence of a peer that went away, never the cause
    # of the exit the launcher reports, which stays the verdict
    gone = "[rank2]:RuntimeError: [/opt/gloo/transport/tcp/pair.cc:534] Read timeout [10.0.0.2]:1234"
    d, (f,) = _findings(tmp_path, [gone] + _table(5, 1))
    assert (f.alternative_only, list(f.culprit_ranks), d.verdict) == (False, [5], "rank-crash"), d.summary()


def test_a_joined_list_without_a_rank_the_evidence_shows_does_not_name_every_rank():
    # ranks 0-3 are in the evidence (no group size stated); the report's joined list names 0-2 only:
    # rank 3 is the group's too, so not every rank joined (the highest rank seen counts, wherever seen)
    ctx = SimpleNamespace(ranks_known=[0, 1, 2, 3], group_size=None)
    assert not _names_every_rank(ctx, [0, 1, 2], [0, 1, 2])
    assert _names_every_rank(ctx, [0, 1, 2, 3], [0, 1, 2, 3])
    assert not _names_every_rank(SimpleNamespace(ranks_known=[0, 1], group_size=None), [0, 1], [0, 1, 2, 3])


def _progress_incident(tmp_path, n):
    """One log per rank, each with its rank's training steps."""
    import denpex_nb as dx

    paths = []
    for r in range(n):
        p = tmp_path / f"rank{r}.log"
        p.write_text("".join(f"[rank{r}]:step {i} loss={2.5 - i * 0.01:.4f} lr=3.0e-04\n" for i in range(3)))
        paths.append(str(p))
    return dx.load(*paths, progress=False)


def test_the_progress_note_quotes_the_last_three_ranks_and_counts_the_rest(tmp_path):
    from denpex_nb.analysis.catalog.entries import COLLECT_MORE
    from denpex_nb.analysis.signals import progress_note

    for n, more in ((5, "(and 2 more ranks or files)"), (4, "(and 1 more ranks or files)"), (3, None)):
        for old in tmp_path.glob("rank*.log"):
            old.unlink()
        note = progress_note(_progress_incident(tmp_path, n))
        quoted = [r for r in range(n) if f"(rank {r})" in note]
        assert quoted == list(range(n - 3, n)), (n, note)
        assert (more in note) if more else ("more ranks or files" not in note), (n, note)
        # and the limit of such evidence: what to collect next, as the catalog says it (its first word lowered)
        assert note.endswith(", and " + COLLECT_MORE[0].lower() + COLLECT_MORE[1:]), note


def test_the_progress_note_quotes_a_long_line_to_its_first_120_characters(tmp_path):
    import denpex_nb as dx
    from denpex_nb.analysis.signals import progress_note

    text = "step 7 loss=2.4000 lr=3.0e-04 " + " ".join(f"m{i}=0.{i:03d}" for i in range(40))
    p = tmp_path / "rank0.log"
    p.write_text(f"[rank0]:{text}\n")
    note = progress_note(dx.load(str(p), progress=False))
    assert f": {text[:120]}." in note, note


def test_a_progress_line_without_a_rank_is_not_rank_0s(tmp_path):
    # rank 0's step and a later one no prefix names (another process's, interleaved): two rows, the one
    # without a rank is not taken for rank 0's last progress
    import denpex_nb as dx
    from denpex_nb.analysis.signals import progress_lines

    p = tmp_path / "node.log"
    p.write_text("[rank0]:step 5 loss=2.4000 lr=3.0e-04\nstep 6 loss=2.3900 lr=3.0e-04\n")
    last = progress_lines(dx.load(str(p), progress=False))
    assert len(last) == 2 and last["rank"].isna().sum() == 1, last
