"""Decisions of rule ``divergences`` about records that end early: a rank whose record stops before
the others' is behind only if nothing shows it was there.

Flight Recorder dumps are not taken at one instant: a dump asked for by hand, a ring buffer that
wrapped or a copied file that was cut ends a rank's record before the others'. A collective that
every rank must issue before it completes on any (all_reduce, all_gather, reduce_scatter,
all_to_all, barrier) and that the others *completed* at the seq the short record lacks proves the
rank took part.

- test_a_dump_taken_earlier_is_no_desync: a healthy job's dumps, one rank's cut at a collective
  the others completed, must not say "rank N never reached seq K" (high confidence, a bystander
  named) but the all-clear, with a note naming the short record and what to collect. Checked over
  ranks, cut points and group sizes.
- test_ring_buffers_that_wrapped_at_different_points: dumps whose first and last entries differ
  per rank (ring buffers), every entry completed, give no desync either.
- test_a_real_hang_still_names_the_rank_behind: the same short record where the others' collective
  at that seq is still pending (a real hang: a rank skipped it) stays a rank-desync naming that
  rank, and no note claims it was there.
- test_a_root_only_broadcast_is_no_proof: a broadcast completed on the others is not proof (its
  root can return with a receiver absent): the short record stays a desync finding.
- test_a_dump_taken_later_than_the_others_is_no_extra_collective: however few the ranks whose
  record goes further (one rank's dump of 4, taken later), a collective they completed had every
  rank's call: not "rank 0 issued an extra collective" (rank-desync at high confidence naming the
  only rank whose dump is the newest) but the all-clear and the note.
- test_the_note_names_each_op_the_completed_ranks_show: where the ranks that completed the seq show
  different ops (an op mismatch, its own finding), the note names each op with its ranks, not one
  op for all.
- test_a_group_without_a_name_is_not_named_in_the_note: records of a group with no name (gloo's
  ``''``, an entry without any group) say no pg in the note ("of pg None" or "of pg " would name a
  group that does not exist).
"""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from denpex_nb import analysis, ingest
from denpex_nb.testing.frcompare import write_synthetic_dumps
from denpex_nb.vocab import ClassId


def _dumps(tmp: Path, world: int, entries: int, plant: str = "none", **kw) -> Path:
    write_synthetic_dumps(tmp, world, entries, plant, **kw)
    return tmp


def _keep(folder: Path, rank: int, start: int, stop: int) -> None:
    """Keep entries [start, stop) of one rank's dump (a dump taken earlier, a wrapped buffer)."""
    path = folder / f"comm_lib_trace_rank_{rank}"
    dump = pickle.loads(path.read_bytes())
    dump["entries"] = dump["entries"][start:stop]
    path.write_bytes(pickle.dumps(dump))


def _op_at(folder: Path, seq: int) -> str:
    dump = pickle.loads((folder / "comm_lib_trace_rank_0").read_bytes())
    return next(e["profiling_name"] for e in dump["entries"] if e["collective_seq_id"] == seq)


def _diagnose(folder: Path):
    return analysis.diagnose(ingest.load(folder))


@pytest.mark.parametrize(
    ("world", "short_rank", "cut"),
    [(2, 1, 40), (4, 2, 50), (4, 0, 12), (8, 5, 41), (3, 1, 22)],
)
def test_a_dump_taken_earlier_is_no_desync(tmp_path, world, short_rank, cut):
    folder = _dumps(tmp_path / "d", world, 60)
    assert _op_at(folder, cut + 1).endswith(("all_reduce", "all_gather"))  # needs every rank
    _keep(folder, short_rank, 0, cut)
    diag = _diagnose(folder)
    assert diag.verdict == ClassId.NO_FAILURE, diag.summary()
    note = next(n for n in diag.notes if "end earlier" in n)
    assert f"rank {short_rank} at seq {cut}" in note and "same moment" in note


def test_ring_buffers_that_wrapped_at_different_points(tmp_path):
    folder = _dumps(tmp_path / "d", 4, 60)
    # every rank's window of the same run; each window ends at an all_reduce/all_gather boundary
    for rank, (start, stop) in {0: (10, 60), 1: (0, 48), 2: (4, 52), 3: (0, 60)}.items():
        _keep(folder, rank, start, stop)
    assert _op_at(folder, 49).endswith(("all_reduce", "all_gather"))
    assert _op_at(folder, 53).endswith(("all_reduce", "all_gather"))
    diag = _diagnose(folder)
    assert diag.verdict == ClassId.NO_FAILURE, diag.summary()
    assert sum("end earlier" in n for n in diag.notes) == 2


def test_a_real_hang_still_names_the_rank_behind(tmp_path):
    # plant "skip": rank 1 never issues the last collective, the others' stays pending there
    folder = _dumps(tmp_path / "d", 4, 60, "skip", plant_rank=1)
    diag = _diagnose(folder)
    assert diag.verdict == ClassId.RANK_DESYNC and diag.culprit_ranks == [1], diag.summary()
    assert not any("end earlier" in n for n in diag.notes)


def test_a_root_only_broadcast_is_no_proof(tmp_path):
    folder = _dumps(tmp_path / "d", 2, 60)
    assert _op_at(folder, 44).endswith("broadcast")
    _keep(folder, 1, 0, 43)
    diag = _diagnose(folder)
    assert any(f.class_id == ClassId.RANK_DESYNC for f in diag.findings), diag.summary()
    assert not any("end earlier" in n for n in diag.notes)


def _edit(folder: Path, rank: int, fn) -> None:
    path = folder / f"comm_lib_trace_rank_{rank}"
    dump = pickle.loads(path.read_bytes())
    fn(dump)
    path.write_bytes(pickle.dumps(dump))


@pytest.mark.parametrize(("world", "newest"), [(4, (0,)), (3, (2,)), (8, (1, 6)), (5, (0, 4))])
def test_a_dump_taken_later_than_the_others_is_no_extra_collective(tmp_path, world, newest):
    folder = _dumps(tmp_path / "d", world, 60)
    op = _op_at(folder, 41).split(":")[-1]
    assert op in ("all_reduce", "all_gather")  # needs every rank
    for rank in set(range(world)) - set(newest):
        _keep(folder, rank, 0, 40)
    diag = _diagnose(folder)
    assert diag.verdict == ClassId.NO_FAILURE, diag.summary()
    note = next(n for n in diag.notes if "end earlier" in n)
    assert "same moment" in note and all(f"rank {r} at seq 40" in note for r in set(range(world)) - set(newest))
    assert f"completed {op} at fr seq 41 of pg 0," in note, note  # one op: named once, no ranks after it


def test_the_note_names_each_op_the_completed_ranks_show(tmp_path):
    folder = _dumps(tmp_path / "d", 4, 60)
    assert _op_at(folder, 41).endswith("all_reduce")
    for rank in (2, 3):
        _keep(folder, rank, 0, 40)
    for rank in (0, 1):
        _keep(folder, rank, 0, 41)

    def as_all_gather(dump):
        dump["entries"][40]["profiling_name"] = "nccl:all_gather"

    _edit(folder, 1, as_all_gather)
    diag = _diagnose(folder)
    assert diag.verdict == ClassId.OP_MISMATCH, diag.summary()
    note = next(n for n in diag.notes if "end earlier" in n)
    assert "all_gather (rank 1)" in note and "all_reduce (rank 0)" in note, note


@pytest.mark.parametrize("group", ["gloo-unnamed", "no-group"])
def test_a_group_without_a_name_is_not_named_in_the_note(tmp_path, group):
    folder = _dumps(tmp_path / "d", 4, 60)

    def unnamed(dump):
        for e in dump["entries"]:
            if group == "gloo-unnamed":
                e["process_group"] = ("", "")
            else:
                e.pop("process_group")
                e.pop("pg_id")

    for rank in range(4):
        _edit(folder, rank, unnamed)
    _keep(folder, 2, 0, 40)
    diag = _diagnose(folder)
    assert diag.verdict == ClassId.NO_FAILURE, diag.summary()
    note = next(n for n in diag.notes if "end earlier" in n)
    assert "at fr seq 41, which needs every rank" in note and "of pg" not in note, note
