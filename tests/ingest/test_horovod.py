"""Horovod's stall inspector (ingest/horovod.py): the three shapes of its report, the rows that come
after blank lines or a launcher's empty tags, and the lines it must leave alone.

Provenance of the formats: ``horovod/common/operations.cc`` (0.1x: ``Stalled ops:`` and one
``<tensor> [missing ranks: 1, 2]`` per stalled tensor), ``horovod/common/stall_inspector.cc``
(``CheckForStalledTensors``: ``Missing ranks:`` then ``<rank>[!]: [<tensor>, ... ...]`` per rank,
``!`` past the shutdown time, then ``One or more rank (marked by "!") is stalled for longer than N
seconds. Will shutdown.``); real lines: tests/data/wild/horovod-1012-docker-mpirun-stalled-missing-rank1
(horovod#1012, lines 4-8), tests/data/wild/horovod-1442-mpirun-stalled-rank6-allreduce
(horovod#1442, lines 5-8: ``Stalled ranks:``), tests/data/wild/polyaxon-657-interleaved-mpirun-stalled-rank0
(polyaxon#657: rows after blank lines), and the 0.20+ ``Missing ranks:`` block pasted in the
README of github.com/DEKHTIARJonathan/HVD_TF_Worker_Desync_BugReport. The lines below are written
after them, not copied.
"""

from __future__ import annotations

import pytest

import denpex_nb as dx
from denpex_nb.ingest.horovod import HorovodReader, tensor_op
from tests.signal_variants import WRAPPERS

from ._text_helpers import run

R = HorovodReader()
WARN = (
    "One or more tensors were submitted to be reduced, gathered or broadcasted by subset of ranks and are "
    "waiting for remainder of ranks for more than 60 seconds. This may indicate that different ranks are "
    "trying to submit different tensors or that only subset of ranks is submitting tensors, which will "
    "cause deadlock. "
)
OLD = [
    "[2019-04-13 13:56:31.861697: W horovod/common/operations.cc:588] " + WARN,
    "Stalled ops:HorovodBroadcast_fc_bias_0 [missing ranks: 2]",
    "[2019-04-13 13:56:31.861765: W horovod/common/operations.cc:588] HorovodBroadcast_fc_kernel_0 [missing ranks: 2]",
]
MID = [
    "[2019-10-09 15:36:43.594972: W horovod/common/stall_inspector.cc:105] " + WARN,
    "Stalled ranks:",
    "3: [horovod_allreduce.0, horovod_allreduce.1, horovod_allreduce.10 ...]",
]
NEW = [
    "[2021-02-02 21:19:07.345988: E horovod/common/stall_inspector.cc:105] " + WARN,
    "Missing ranks:",
    "0!: [DistributedSGD_Allreduce/HorovodAllreduce_grads_0, DistributedSGD_Allreduce/HorovodAllreduce_grads_1]",
    "5: [DistributedSGD_Allreduce/HorovodAllreduce_grads_1]",
    'One or more rank (marked by "!") is stalled for longer than 120 seconds. Will shutdown.',
]


def _stall(out):
    rows = [r for r in out.errors if r["kind"] == "stall_report"]
    assert len(rows) == 1, out.errors
    return rows[0]


def test_the_old_shape_lists_missing_ranks_per_tensor():
    out = run(R, OLD)
    row = _stall(out)
    assert (row["related_ranks"], row["op"], row["stalled_tensors"], row["shutdown"]) == ((2,), "broadcast", 2, False)
    assert out.parsed == {1, 2, 3}


def test_the_stalled_ranks_shape_lists_tensors_per_rank():
    row = _stall(run(R, MID))
    assert (row["related_ranks"], row["op"], row["stalled_tensors"]) == ((3,), "all_reduce", 3)


def test_the_missing_ranks_shape_with_its_shutdown_mark():
    out = run(R, NEW)
    row = _stall(out)
    assert (row["related_ranks"], row["op"], row["shutdown"]) == ((0, 5), "all_reduce", True)
    assert out.parsed == {1, 2, 3, 4, 5}


def test_rows_after_blank_lines_and_empty_launcher_tags_belong_to_the_report():
    """mpirun tags every fragment; a paste keeps the blank lines between the report's lines."""
    lines = [
        "[1,0]<stderr>:" + WARN,
        "",
        "[1,0]<stderr>:Stalled ranks:",
        "[1,0]<stderr>:",
        "[1,0]<stderr>:4: [HorovodAllreduce]",
    ]
    out = run(R, lines)
    assert _stall(out)["related_ranks"] == (4,)
    # too far from the report: a "4: [" line is not its row
    far = lines[:3] + [""] * 6 + ["4: [some list]"]
    out = run(R, far)
    assert _stall(out)["related_ranks"] is None
    assert 10 not in out.parsed


def test_a_report_repeated_later_is_a_second_observation():
    out = run(R, MID + ["step 1 loss 2.0"] * 6 + MID)
    assert [r["related_ranks"] for r in out.errors] == [(3,), (3,)]


def test_a_warning_cut_before_its_list_is_a_report_without_ranks():
    row = _stall(run(R, [MID[0]]))
    assert (row["related_ranks"], row["op"]) == (None, None)
    # a list cut mid-tensor (no closing bracket) still names the rank
    row = _stall(run(R, MID[:2] + ["3: [horovod_allreduce.0, horovod_allr"]))
    assert row["related_ranks"] == (3,)


def test_digit_lines_without_a_report_are_left_alone():
    lines = ["epoch 3: [loss 0.12, acc 0.9]", "Missing ranks are fine", "0: [a, b]"]
    out = run(R, lines)
    assert out.errors == [] and out.parsed == set()


def test_tensor_names_say_the_collective_only_when_they_agree():
    assert tensor_op(["HorovodAllgather_x_0", "horovod_allgather.3"]) == "all_gather"
    assert tensor_op(["HorovodAllreduce_a", "HorovodBroadcast_b"]) is None
    assert tensor_op(["my_tensor"]) is None


@pytest.mark.parametrize("wrapper", sorted(WRAPPERS))
@pytest.mark.parametrize("shape", ["old", "mid", "new"])
def test_every_shape_behind_every_wrapper(tmp_path, wrapper, shape):
    """The report read through the loader as a launcher or collector wraps it (rank 0 prints it)."""
    lines = {"old": OLD, "mid": MID, "new": NEW}[shape]
    wrap = WRAPPERS[wrapper]
    p = tmp_path / "job.log"
    p.write_text("\n".join(wrap(0, t) for t in ["step 1 loss 2.0", *lines, "step 1 loss 2.0"]) + "\n")
    inc = dx.load(str(p), progress=False)
    st = inc.errors[inc.errors["kind"].astype(str) == "stall_report"]
    assert len(st) == 1, inc.errors
    want = {"old": (2,), "mid": (3,), "new": (0, 5)}[shape]
    assert tuple(st["related_ranks"].iloc[0]) == want
