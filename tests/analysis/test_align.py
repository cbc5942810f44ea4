"""Alignment per (pg, seq_kind, seq): op-aware size rules, dedup, missing ranks, never across counters."""

from __future__ import annotations

from denpex_nb.analysis.align import align
from denpex_nb.incident import coerce

from ._frames import ev, steps


def _align(rows):
    return align(coerce("events", rows))


def test_identical_ranks_have_no_divergence():
    al = _align(steps(4, 5))
    assert al.divergences == []
    assert al.n_cells == 5 and al.n_events == 20
    assert al.members[("0", "trace")] == [0, 1, 2, 3]


def test_size_divergence_is_located_at_its_cell():
    rows = steps(4, 3) + [ev(r, 4, shape=(6,) if r == 2 else (8,)) for r in range(4)]
    (d,) = _align(rows).divergences
    assert (d.kind, d.seq, d.seq_kind, d.pg) == ("size", 4, "trace", "0")
    assert sorted(d.present) == [0, 1, 2, 3]


def test_counters_are_never_compared_across_seq_kinds():
    # the same number 3 in two different counters is not the same collective
    rows = [ev(0, 3, shape=(8,), kind="trace"), ev(1, 3, shape=(6,), kind="fr")]
    assert _align(rows).divergences == []


def test_op_and_dtype_divergences():
    rows = [ev(0, 1, op="broadcast"), ev(1, 1), ev(2, 1), ev(0, 2, dtype="float64"), ev(1, 2), ev(2, 2)]
    kinds = sorted((d.kind, d.seq) for d in _align(rows).divergences)
    assert kinds == [("dtype", 2), ("op", 1)]


def test_all_gather_output_is_input_times_world_size():
    ok = [ev(r, 1, op="all_gather_into_tensor", shape=(5, 4), out_shape=(10, 4)) for r in range(2)]
    assert _align(ok).divergences == []
    bad = [
        ev(0, 1, op="all_gather_into_tensor", shape=(5, 4), out_shape=(10, 4)),
        ev(1, 1, op="all_gather_into_tensor", shape=(5, 4), out_shape=(5, 4)),
    ]
    (d,) = _align(bad).divergences
    assert d.kind == "local-size"
    assert d.rows.set_index("rank")["_local_bad"].to_dict() == {0: False, 1: True}


def test_reduce_scatter_compares_outputs_and_input_is_output_times_world():
    ok = [ev(r, 1, op="reduce_scatter_tensor", shape=(8,), out_shape=(4,)) for r in range(2)]
    assert _align(ok).divergences == []
    bad = [
        ev(0, 1, op="reduce_scatter_tensor", shape=(8,), out_shape=(4,)),
        ev(1, 1, op="reduce_scatter_tensor", shape=(6,), out_shape=(3,)),
    ]
    (d,) = _align(bad).divergences
    assert d.kind == "size"


def test_all_to_all_totals_may_differ():
    rows = [ev(0, 1, op="all_to_all_single", shape=(8,)), ev(1, 1, op="all_to_all_single", shape=(5,))]
    assert _align(rows).divergences == []


def test_same_element_count_in_another_shape_is_a_shape_divergence():
    rows = steps(4, 2) + [ev(r, 3, shape=(2, 4) if r == 1 else (4, 2)) for r in range(4)]
    (d,) = _align(rows).divergences
    assert (d.kind, d.seq) == ("shape", 3)
    # ops whose shapes may legitimately differ, and unknown shapes, are not compared
    rows = [
        ev(0, 1, op="all_to_all_single", shape=(2, 4)),
        ev(1, 1, op="all_to_all_single", shape=(4, 2)),
        ev(0, 2, shape=None, numel_in=8),
        ev(1, 2, shape=(2, 4)),
    ]
    assert _align(rows).divergences == []


def test_issue_and_done_rows_of_one_rank_are_one_observation():
    rows = []
    for r in range(2):
        rows += [ev(r, 1, state="scheduled"), ev(r, 1, state="completed")]
    al = _align(rows)
    assert al.divergences == [] and al.n_cells == 1


def test_laggard_is_missing_from_the_first_seq_it_never_reached():
    rows = steps(4, 3) + [ev(r, 4) for r in (0, 1, 2)]
    (d,) = _align(rows).divergences
    assert (d.kind, d.seq, d.missing, sorted(d.present)) == ("missing", 4, [3], [0, 1, 2])
    assert d.lag[3] == 3


def test_ring_buffer_truncation_at_the_start_is_not_a_divergence():
    # rank 1's Flight Recorder ring dropped its oldest entries: it still reached the end
    rows = [ev(0, s, kind="fr") for s in range(1, 11)] + [ev(1, s, kind="fr") for s in range(5, 11)]
    assert _align(rows).divergences == []


def test_point_to_point_and_unknown_ranks_are_ignored():
    rows = steps(2, 2) + [ev(0, 3, op="send"), ev(None, 3, shape=(1,))]
    assert _align(rows).divergences == []


def test_world_size_reveals_ranks_without_evidence():
    rows = [ev(r, 1, kind="fr", world_size=4) for r in (0, 2, 3)]
    al = _align(rows)
    assert al.missing_dumps == {("0", "fr"): [1]}


def test_numel_only_watchdog_rows_are_compared_by_numel():
    rows = [
        ev(r, 7, kind="work", shape=None, numel_in=1024 if r else 512, op="all_reduce", state="timed_out")
        for r in range(3)
    ]
    (d,) = _align(rows).divergences
    assert d.kind == "size" and d.seq == 7


def test_empty_events():
    al = align(coerce("events", []))
    assert al.divergences == [] and al.n_events == 0


def test_a_world_size_of_two_billion_is_not_listed_rank_by_rank():
    """A corrupt or crafted world size (2**31 - 1) next to three ranks must not become a list of
    the ranks without records (it once took 24 GB): past MAX_LISTED_RANKS nothing is listed."""
    import subprocess
    import sys
    import textwrap

    code = textwrap.dedent("""
        import resource
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
        from tests.analysis._frames import ev, incident
        from denpex_nb.analysis.align import align
        from denpex_nb import diagnose
        inc = incident([ev(r, s, world_size=2**31 - 1) for r in range(3) for s in range(1, 4)])
        a = align(inc.events)
        assert a.missing_dumps == {}, a.missing_dumps
        small = incident([ev(r, s, world_size=4) for r in range(3) for s in range(1, 4)])
        assert list(align(small.events).missing_dumps.values()) == [[3]]
        print(diagnose(inc).verdict)
    """)
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
