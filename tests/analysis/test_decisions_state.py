"""The decisions of :mod:`denpex_nb.analysis.state`: the group size and each rank's state, pinned.

Decisions of ``group_size`` (the size a majority is counted against):

- only explicit evidence states it, most direct first (the collective records' group size, a
  rank's own statement, the FR analyzer's expected ranks, all_gather's out/in ratio, a
  launcher manifest); the ranks present never do (test_the_ranks_present_never_state_the_group_size).
- of several stated sizes the largest is the world: a subgroup's size never lowers it, so world
  size 8 plus a 2-rank subgroup leaves a 3-vs-1 split undetermined
  (test_a_subgroups_size_never_lowers_the_world_size).
- absurd sizes (0, negative, 2**24 and more) are not evidence (test_absurd_sizes_are_not_evidence).
- the ranks present are the world only when a launcher manifest is among the sources (it started
  them all); any other source format states nothing, and a manifest without ranks states nothing
  (test_only_a_launcher_manifest_makes_the_ranks_present_the_world).
- all_gather's output over input size (reduce_scatter's input over output) states the size only
  when every such ratio is one integer of 2 or more: out == in states nothing, and ratios that
  disagree state nothing (test_the_gather_ratio_states_the_size_only_when_it_is_one_integer_of_two_or_more).

Decisions of ``rank_state`` (one row per rank, the status word):

- a rank the group size says exists but nothing speaks of is ``absent``; an own failure is
  ``failed``; a timeout is ``timed-out``, a peer gone ``peer-gone``; another failure ``error``;
  exit code 0 ``exited``; records only ``running`` (test_every_status_word_has_its_evidence).
- a rank's first error is its earliest own failure, else its earliest failure
  (test_the_first_error_is_the_earliest_own_failure).
- a tracer rank whose last collective was issued and never completed has failed; a dump's pending
  entry (only scheduled) says nothing of the kind
  (test_a_tracer_rank_whose_last_collective_never_returned_has_failed).

Decisions of ``positions`` (where each rank got to): a rank's position cites the file and line of
the record that says so (test_a_ranks_position_cites_the_file_and_line_of_its_last_record).
"""

from __future__ import annotations

from denpex_nb import diagnose
from denpex_nb.analysis.state import group_size, positions
from denpex_nb.incident import Incident, coerce

from ._frames import err, ev, incident, steps

PEER_GONE = "RuntimeError: Connection closed by peer [127.0.0.1]:29921"


def test_the_ranks_present_never_state_the_group_size():
    d = diagnose(incident(steps(3, 2)))
    assert d.group_size is None and "unknown" in d.group_size_basis
    d = diagnose(incident([ev(r, 1, world_size=4) for r in range(3)]))
    assert (d.group_size, d.absent_ranks) == (4, [3])
    d = diagnose(incident(steps(2, 1), ranks=[dict(rank=0, world_size=6)]))
    assert d.group_size == 6 and "own statement" in d.group_size_basis


def test_a_subgroups_size_never_lowers_the_world_size():
    """The default group states 8, a 2-rank subgroup states 2; at seq 5 of the default group ranks
    0-2 call all_reduce and rank 3 broadcast: 3 of 8 is no majority, so no culprit."""
    sized = [ev(r, 1, kind="work", shape=None, numel_in=16, world_size=8, pg="0") for r in range(4)]
    sub = [ev(r, 1, kind="work", shape=None, numel_in=16, world_size=2, pg="7") for r in (0, 1)]
    split = [ev(r, 5, op="broadcast" if r == 3 else "all_reduce", pg="default_pg") for r in range(4)]
    d = diagnose(incident(sized + sub + split))
    assert d.group_size == 8
    f = next(f for f in d.findings if f.class_id == "op-mismatch")
    assert not f.culprit_ranks and f.culprit_basis.startswith("undetermined")
    d = diagnose(incident(steps(2, 1), ranks=[dict(rank=0, world_size=8), dict(rank=1, world_size=2)]))
    assert d.group_size == 8


def test_absurd_sizes_are_not_evidence():
    for bad in (0, -4, 2**24, 2**31 - 1):
        d = diagnose(incident([ev(r, 1, world_size=bad) for r in range(3)]))
        assert d.group_size is None, bad


def _status(rows=(), errors=(), ranks=(), world=None):
    rows = list(rows) + ([ev(0, 1, world_size=world)] if world else [])
    st = diagnose(incident(rows, errors, ranks)).rank_state
    return dict(zip(st["rank"].astype(int), st["status"]))


def test_every_status_word_has_its_evidence():
    timeout = err(1, "watchdog_timeout", "Watchdog caught collective operation timeout", t=5, seq=2, seq_kind="work")
    errors = [
        err(0, "exception", "ValueError: bad batch", t=1),
        timeout,
        err(2, "gloo_peer_gone", PEER_GONE, t=6),
        err(3, "nccl_error", "NCCL error: unhandled system error", t=7),
    ]
    rows = [ev(r, 1) for r in range(6)]
    st = _status(rows, errors, ranks=[dict(rank=4, exit_code=0)], world=7)
    assert st == {
        0: "failed",
        1: "timed-out",
        2: "peer-gone",
        3: "error",
        4: "exited",
        5: "running",
        6: "absent",
    }


def test_the_first_error_is_the_earliest_own_failure():
    errors = [
        err(0, "gloo_peer_gone", PEER_GONE, t=1),
        err(0, "oom", "torch.OutOfMemoryError: CUDA out of memory", t=9, line=2),
        err(1, "gloo_peer_gone", PEER_GONE, t=4),
        err(1, "gloo_timeout", "Timed out waiting 1000ms for recv operation to complete", t=2, line=2),
    ]
    st = diagnose(incident(steps(2, 1), errors)).rank_state.set_index("rank")
    assert st.loc[0, "first_error_kind"] == "oom" and st.loc[0, "status"] == "failed"
    assert st.loc[1, "first_error_kind"] == "gloo_timeout" and st.loc[1, "status"] == "timed-out"
    # two own failures at one time: the first in the evidence is the first error, not the last
    tie = [
        err(0, "oom", "torch.OutOfMemoryError: CUDA out of memory", t=3),
        err(0, "exception", "ValueError: x", t=3, line=2),
    ]
    st = diagnose(incident(steps(2, 1), tie)).rank_state.set_index("rank")
    assert st.loc[0, "first_error_kind"] == "oom"


def test_only_a_launcher_manifest_makes_the_ranks_present_the_world():
    logs = [dict(file=f"rank{r}.log", format="python_log", rank_hint=r) for r in range(3)]
    manifest = [dict(file="manifest.json", format="repro_manifest")]
    ranks = [dict(rank=r) for r in range(3)]

    def size(sources, rank_rows):
        inc = Incident(
            events=coerce("events", steps(3, 2)),
            ranks=coerce("ranks", rank_rows),
            sources=coerce("sources", sources),
        )
        return group_size(inc)

    assert size(logs, ranks).size is None
    with_manifest = size(logs + manifest, ranks)
    assert with_manifest.size == 3 and "manifest" in with_manifest.basis
    assert size(logs + manifest, []).size is None


def test_the_gather_ratio_states_the_size_only_when_it_is_one_integer_of_two_or_more():
    def gathers(ratio, seq=1, op="all_gather", pg="0"):
        if op == "reduce_scatter":
            return [ev(r, seq, op=op, shape=(8 * ratio,), out_shape=(8,), pg=pg) for r in range(2)]
        return [ev(r, seq, op=op, shape=(8,), out_shape=(8 * ratio,), pg=pg) for r in range(2)]

    two = group_size(incident(gathers(2)))
    assert two.size == 2 and "all_gather" in two.basis
    assert group_size(incident(gathers(2, op="reduce_scatter"))).size == 2
    assert group_size(incident(gathers(1))).size is None  # out == in: no size stated
    assert group_size(incident(gathers(2) + gathers(4, seq=2, pg="1"))).size is None  # ratios disagree
    empty_in = [ev(r, 1, op="all_gather", shape=(0,), out_shape=(8,)) for r in range(2)]
    assert group_size(incident(empty_in)).size is None  # an empty input states no ratio


def test_a_tracer_rank_whose_last_collective_never_returned_has_failed():
    """The tracer records issue and completion: rank 1's last collective (seq 2) was issued and
    never completed, so it is failed; rank 0, whose last one completed, is not. Another counter's
    pending record says nothing of the kind (a dump's entries are only scheduled)."""
    rows = steps(2, 1) + [ev(1, 2, state="scheduled")]
    st = diagnose(incident(rows)).rank_state.set_index("rank")
    assert (bool(st.loc[1, "failed"]), bool(st.loc[0, "failed"])) == (True, False)
    rows = steps(2, 1, kind="fr") + [ev(1, 2, kind="fr", state="scheduled")]
    st = diagnose(incident(rows)).rank_state.set_index("rank")
    assert not st.loc[1, "failed"]


def test_a_ranks_position_cites_the_file_and_line_of_its_last_record():
    """positions() says where each rank got to and on which line it says so (end-positions cites it
    as evidence): rank 1's last traced collective, seq 3, is line 3 of rank1.trace."""
    pos = positions(incident(steps(2, 3)))
    row = pos[pos["rank"] == 1].iloc[0]
    assert (row["position"], row["file"], row["line"]) == (3, "rank1.trace", 3)
