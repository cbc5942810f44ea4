"""TORCH_DISTRIBUTED_DEBUG=DETAIL mismatch messages wherever they turn up (item: DETAIL inside other text).

Real format: ``torch/csrc/distributed/c10d/ProcessGroupWrapper.cpp`` (``verify_tensors`` and
``operator<<(CollectiveFingerPrint)``)::

    Detected mismatch between collectives on ranks. Rank <me> is running collective: <fp>, but Rank
    <r> is running collective: <fp>.Collectives differ in the following aspects: \\t Sequence number:
    12vs 13  Op type: ALLREDUCEvs BARRIER  Tensor Tensor shapes: ...

where ``<fp>`` is ``CollectiveFingerPrint(SequenceNumber=12, OpType=ALLREDUCE, TensorShape=[20, 10],
TensorDtypes=Float, TensorDeviceTypes=...)`` or, for a collective without tensors,
``CollectiveFingerPrint(SequenceNumber=12OpType=BARRIER)`` (no comma: that is what torch prints).
Older torch said ``is running inconsistent collective`` and had no SequenceNumber. The message is
raised by TORCH_CHECK, so users see it after ``RuntimeError: `` / ``DistBackendError: `` in a
traceback, inside their own logger's line, or re-wrapped by whatever they pasted it through.

From every variant: one ``detail_mismatch`` error (``related_ranks`` = every rank named) and one
``events`` row per named rank: ``seq_kind="detail"``, ``seq``, canonical ``op``, ``in_shapes`` /
``numel_in`` / ``dtype`` when the fingerprint has tensors, ``state="failed"``, file and line of the
message's first line.
"""

from __future__ import annotations

import random
import textwrap

import pytest

import denpex_nb as dx
from denpex_nb.ingest.c10d import C10dReader

from ._text_helpers import run

R = C10dReader()


def message(seq0=12, op0="ALLREDUCE", seq1=12, op1="BARRIER", shapes=True, tail=True, old=False):
    def fp(seq, op, shape):
        s = "" if old else f"SequenceNumber={seq}"
        if shapes and op != "BARRIER":
            sep = ", " if s else ""
            return (
                f"CollectiveFingerPrint({s}{sep}OpType={op}, TensorShape=[{shape}], TensorDtypes=Float, "
                "TensorDeviceTypes=Device(type=cpu))"
            )
        return f"CollectiveFingerPrint({s}OpType={op})"

    running = "is running inconsistent collective" if old else "is running collective"
    text = (
        f"Detected mismatch between collectives on ranks. Rank 0 {running}: {fp(seq0, op0, '20, 10')}, "
        f"but Rank 1 {running}: {fp(seq1, op1, '10')}."
    )
    if tail:
        aspects = []
        if seq0 != seq1:
            aspects.append(f"\t Sequence number: {seq0}vs {seq1}")
        if op0 != op1:
            aspects.append(f"  Op type: {op0}vs {op1}")
        text += "Collectives differ in the following aspects: " + "".join(aspects)
    return text


VARIANTS = {
    "plain": message(),
    "op_only": message(op1="BROADCAST", shapes=False),
    "seq_only": message(seq1=13, op1="ALLREDUCE"),
    "no_shapes": message(op0="ALLREDUCE", shapes=False),
    "no_tail": message(tail=False),
    "old_torch": message(old=True, tail=False),
}
WRAPS = {
    "bare": lambda m: [m],
    "runtime_error": lambda m: ["RuntimeError: " + m],
    "dist_error_in_traceback": lambda m: [
        "Traceback (most recent call last):",
        '  File "train.py", line 9, in <module>',
        "    dist.all_reduce(t)",
        "torch.distributed.DistBackendError: " + m,
    ],
    "torchrun": lambda m: ["[default0]:[rank0]: RuntimeError: " + m],
    "app_logger": lambda m: ["[RANK 0] 2025-01-01 12:00:00 [ERROR] trainer: step failed: " + m],
    "py_logging": lambda m: ["2024-01-01 12:00:00,123 - root - ERROR - Exception: " + m],
    "kubectl": lambda m: ["2024-05-01T12:00:00.000000001Z [rank0]:RuntimeError: " + m],
    "split_at_80": lambda m: [m[i : i + 80] for i in range(0, len(m), 80)],
    "split_at_57": lambda m: [m[i : i + 57] for i in range(0, len(m), 57)],
    "word_wrapped": lambda m: textwrap.wrap(m, 70, break_long_words=False),
    "torchrun_split": lambda m: ["[rank0]:" + m[i : i + 90] for i in range(0, len(m), 90)],
}


def _want(text):
    """(rank, seq, op, in_shapes, dtype) per rank from the generator's arguments, by re-reading them."""
    import re

    out = {}
    for r, blob in re.findall(
        r"Rank (\d) is running (?:inconsistent )?collective: (CollectiveFingerPrint\([^)]*\)?\)?)", text
    ):
        seq = re.search(r"SequenceNumber=(\d+)", blob)
        op = re.search(r"OpType=(\w+)", blob).group(1)
        shape = re.search(r"TensorShape=\[([^\]]*)\]", blob)
        out[int(r)] = (
            int(seq.group(1)) if seq else None,
            {"ALLREDUCE": "all_reduce", "BARRIER": "barrier", "BROADCAST": "broadcast"}[op],
            (tuple(int(x) for x in shape.group(1).split(", ")),) if shape else None,
            "float32" if shape else None,
        )
    return out


@pytest.mark.parametrize("wrap", sorted(WRAPS))
@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_every_variant_gives_both_fingerprints(variant, wrap):
    msg = VARIANTS[variant]
    lines = WRAPS[wrap](msg)
    out = run(R, lines)
    errs = [e for e in out.errors if e["kind"] == "detail_mismatch"]
    assert len(errs) == 1, (errs, lines)
    err = errs[0]
    assert err["related_ranks"] == (0, 1)
    want = _want(msg)
    got = {
        e["rank"]: (e.get("seq"), e["op"], e.get("in_shapes"), e.get("dtype"))
        for e in out.events
        if e["seq_kind"] == "detail"
    }
    assert got == want
    first = next(i for i, t in enumerate(lines, start=1) if "Detected" in t or "Rank 0" in t)
    for e in out.events:
        assert (e["state"], e["file"], e["line"]) == ("failed", "t.log", first)
    assert (err.get("seq"), err["op"], err["seq_kind"]) == (want[0][0], want[0][1], "detail")
    # every line of the message is consumed, the traceback frames are another reader's
    msg_lines = {i for i, t in enumerate(lines, start=1) if not t.startswith(("Traceback", "  "))}
    assert msg_lines <= out.parsed


def test_the_tail_on_its_own_line_belongs_to_the_message():
    out = run(
        R, [message(tail=False), "Collectives differ in the following aspects: ", "  Op type: ALLREDUCEvs BARRIER"]
    )
    assert out.parsed == {1, 2, 3} and len(out.errors) == 1


def test_a_truncated_message_still_names_what_it_has():
    msg = message()
    cut = msg[: msg.index("but Rank 1") + len("but Rank 1 is running collective: CollectiveFinger")]
    out = run(R, [cut, "[rank0]:[I501 12:00:00.1 ProcessGroupWrapper.cpp:1] something else"])
    err = [e for e in out.errors if e["kind"] == "detail_mismatch"]
    assert len(err) == 1 and err[0]["related_ranks"] == (0, 1)
    assert [e["rank"] for e in out.events] == [0]


def test_two_messages_two_ranks_interleaved():
    m0 = message()
    m1 = m0.replace("Rank 0 is", "Rank X is").replace("but Rank 1", "but Rank 0").replace("Rank X is", "Rank 1 is")
    out = run(R, ["[rank0]:RuntimeError: " + m0, "[rank1]:RuntimeError: " + m1])
    assert sorted(e["rank"] for e in out.errors) == [0, 1]
    assert all(e["related_ranks"] == (0, 1) for e in out.errors)


def test_out_of_range_sequence_number_is_missing():
    out = run(R, message().replace("SequenceNumber=12,", "SequenceNumber=99999999999999999999,"))
    seqs = {e["rank"]: e.get("seq") for e in out.events}
    assert seqs == {0: None, 1: 12}


def test_word_wrapped_message_through_the_loader(tmp_path):
    rng = random.Random(7)
    for _ in range(20):
        width = rng.randint(40, 150)
        msg = message(seq1=rng.choice([12, 13]), op1=rng.choice(["BARRIER", "BROADCAST", "ALLREDUCE"]))
        lines = (
            ["noise before"] + textwrap.wrap("RuntimeError: " + msg, width, break_long_words=False) + ["noise after"]
        )
        p = tmp_path / "paste.txt"
        p.write_text("\n".join(lines) + "\n")
        inc = dx.load(str(p), progress=False)
        ev = inc.events[inc.events["seq_kind"] == "detail"]
        assert sorted(ev["rank"]) == [0, 1], (width, lines)
        dm = inc.errors[inc.errors["kind"] == "detail_mismatch"]
        assert len(dm) == 1 and dm["related_ranks"].iloc[0] == (0, 1)
