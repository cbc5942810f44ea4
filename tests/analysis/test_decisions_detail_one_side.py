"""A DETAIL fingerprint mismatch of which the evidence holds one side only (issue #16, blind batch l).

TORCH_DISTRIBUTED_DEBUG=DETAIL raises ``Detected mismatch between collectives on ranks. Rank 0 is
running collective: CollectiveFingerPrint(...)``, then the other rank's fingerprint and the aspects
that differ. Real pastes often hold the reporting rank's fingerprint alone: the line was cut by the
terminal or the paste, or PyTorch (before 1.13) printed ``Rank 0 is running inconsistent collective:``
and nothing of the other side. The one fingerprint shown names its own op, shape and dtype
(``TensorDtypes=Float``, ``dtype=float (default)``), and the user was told ``dtype-mismatch``: an
aspect nobody compared. What the evidence does say is that the ranks ran different collectives at one
point: ``rank-desync`` at low confidence, the op of the fingerprint shown, no culprit (the message
names the reporting rank and the first rank that differs from it, not who is wrong)
(test_one_fingerprint_without_aspects_is_a_desync_of_unread_aspect). Where the message names the
aspect, that aspect decides (test_one_fingerprint_with_its_aspects_line_names_the_aspect); where two
ranks' fingerprints were read, the aligned events decide
(test_two_ranks_fingerprints_are_compared_not_the_text).
"""

from __future__ import annotations

import pytest

from denpex_nb.vocab import ClassId
from tests.signal_variants import WRAPPERS
from tests.signal_variants import diagnose_files as _diagnose

_OPTIONS = (
    "TensorDeviceTypes=TensorOptions(dtype=float (default), device=cuda, layout=Strided (default), "
    "requires_grad=false (default), pinned_memory=false (default), memory_format=(nullopt))"
)
OPS = {"all_gather": "ALLGATHER", "broadcast": "BROADCAST", "all_reduce": "ALLREDUCE"}


def _fingerprint(op: str, dtype: str, seq: int | None) -> str:
    seq_part = f"SequenceNumber={seq}, " if seq is not None else ""
    return f"CollectiveFingerPrint({seq_part}OpType={OPS[op]}, TensorShape=[34112], TensorDtypes={dtype}, {_OPTIONS})"


def _one_side(form: str, op: str, dtype: str, rank: int) -> list[str]:
    """The reporting rank's DETAIL error with its own fingerprint only, as pasted."""
    if form == "old":  # PyTorch before 1.13: no sequence number, no other side
        return [
            "Traceback (most recent call last):",
            '  File "train.py", line 88, in <module>',
            "    dist.broadcast(t, src=0)",
            "RuntimeError: Detected mismatch between collectives on ranks. Rank "
            f"{rank} is running inconsistent collective: {_fingerprint(op, dtype, None)}",
        ]
    full = (
        f"RuntimeError: Detected mismatch between collectives on ranks. Rank {rank} is running collective: "
        f"{_fingerprint(op, dtype, 633704)}, but Rank {1 - rank} is running collective: "
        f"{_fingerprint('broadcast' if op != 'broadcast' else 'all_reduce', dtype, 633704)}."
        "Collectives differ in the following aspects: \t Op type: X vs Y"
    )
    cut = full.index("TensorDeviceTypes") + (40 if form == "cut" else 120)
    return [
        '  File "/usr/lib/python3.10/site-packages/torch/distributed/utils.py", line 294, in _verify_param_shape',
        "    return dist._verify_params_across_processes(process_group, tensors, logger)",
        full[:cut],
    ]


@pytest.mark.parametrize("wrapper", ["plain", "torch", "torchrun", "mpirun", "kubectl", "docker"])
@pytest.mark.parametrize("form", ["old", "cut", "cut-later"])
@pytest.mark.parametrize(("op", "dtype"), [("all_gather", "Long"), ("broadcast", "Float"), ("all_reduce", "Half")])
def test_one_fingerprint_without_aspects_is_a_desync_of_unread_aspect(tmp_path, wrapper, form, op, dtype):
    rank = 0
    lines = [WRAPPERS[wrapper](rank, t) for t in _one_side(form, op, dtype, rank)]
    d = _diagnose(tmp_path, {"rank0.log": lines})
    assert d.verdict == ClassId.RANK_DESYNC, (d.verdict, lines)
    assert d.confidence == "low" and d.culprit_ranks == []
    assert d.first.op == op
    assert ClassId.DTYPE_MISMATCH != d.verdict and ClassId.SHAPE_MISMATCH != d.verdict


@pytest.mark.parametrize("wrapper", ["plain", "torch", "mpirun"])
@pytest.mark.parametrize(
    ("aspect", "cls"),
    [
        ("Tensor Tensor dtypes: Longvs Float", ClassId.DTYPE_MISMATCH),
        ("Tensor Tensor shapes: [1]vs [2]", ClassId.SHAPE_MISMATCH),
        ("Op type: ALLGATHERvs BROADCAST", ClassId.OP_MISMATCH),
    ],
)
def test_one_fingerprint_with_its_aspects_line_names_the_aspect(tmp_path, wrapper, aspect, cls):
    text = (
        "RuntimeError: Detected mismatch between collectives on ranks. Rank 0 is running collective: "
        f"{_fingerprint('all_gather', 'Long', 12)}.Collectives differ in the following aspects: \t {aspect}"
    )
    d = _diagnose(tmp_path, {"rank0.log": [WRAPPERS[wrapper](0, text)]})
    assert d.verdict == cls, d.verdict


@pytest.mark.parametrize("wrapper", ["plain", "torch", "mpirun"])
def test_two_ranks_fingerprints_are_compared_not_the_text(tmp_path, wrapper):
    """Each rank printed its own fingerprint, no aspects: the two are aligned at seq 7 and differ in op."""
    files = {}
    for rank, op in ((0, "all_gather"), (1, "broadcast")):
        text = (
            f"RuntimeError: Detected mismatch between collectives on ranks. Rank {rank} is running collective: "
            f"{_fingerprint(op, 'Float', 7)}"
        )
        files[f"rank{rank}.log"] = [WRAPPERS[wrapper](rank, text)]
    d = _diagnose(tmp_path, files)
    assert d.verdict == ClassId.OP_MISMATCH, d.verdict
