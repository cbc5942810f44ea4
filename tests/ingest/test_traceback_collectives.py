"""Tracebacks are collective evidence (item: the ``exception`` row names the collective).

Real format: CPython's traceback (3.11+ adds ``^^^^`` marker lines under the source line) through
torch's ``torch/distributed/c10d_logger.py`` (``wrapper`` -> ``return func(*args, **kwargs)``) and
``torch/distributed/distributed_c10d.py`` (the collective's own function, e.g. ``all_reduce``
with ``work = group.allreduce([tensor], opts)``), as in the recorded gloo runs of ``data/recorded``.
The row's ``op`` is the canonical op of the last collective call, ``collective_call`` the user's
call text.
"""

from __future__ import annotations

import pytest

import denpex_nb as dx
from denpex_nb.ingest.python import PythonReader

from ._text_helpers import run

R = PythonReader()
SP = "/usr/lib/python3.11/site-packages/torch/distributed"


def tb(
    call="dist.all_reduce(t)",
    func="all_reduce",
    inner="work = group.allreduce([tensor], opts)",
    exc="RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by peer",
    markers=True,
    logger=True,
):
    lines = [
        "Traceback (most recent call last):",
        '  File "/w/train.py", line 40, in <module>',
        "    main()",
        '  File "/w/train.py", line 31, in main',
        f"    {call}",
    ]
    if markers:
        lines.append("    " + "^" * len(call))
    if logger:
        lines += [f'  File "{SP}/c10d_logger.py", line 81, in wrapper', "    return func(*args, **kwargs)"]
        if markers:
            lines.append("           ^^^^^^^^^^^^^^^^^^^^^")
    if func:
        lines += [f'  File "{SP}/distributed_c10d.py", line 2501, in {func}', f"    {inner}"]
    lines.append(exc)
    return lines


def _exc(out):
    rows = [e for e in out.errors if e["kind"] == "exception"]
    assert len(rows) == 1, out.errors
    return rows[0]


@pytest.mark.parametrize(
    "call, func, inner, op",
    [
        ("dist.all_reduce(t)", "all_reduce", "work = group.allreduce([tensor], opts)", "all_reduce"),
        ("torch.distributed.broadcast(t, src=0)", "broadcast", "work = group.broadcast([tensor], opts)", "broadcast"),
        (
            "dist.all_gather_into_tensor(out, t)",
            "all_gather_into_tensor",
            "work = group._allgather_base(o, i, opts)",
            "all_gather_into_tensor",
        ),
        (
            "dist.all_gather_object(objs, obj)",
            "all_gather",
            "work = default_pg.allgather(output_tensors, input_tensors)",
            "all_gather",
        ),
        ("dist.isend(t, dst=1).wait()", "isend", "return pg.send([tensor], dst, tag)", "send"),
        ("c10d.barrier()", "barrier", "work = default_pg.barrier(opts=opts)", "barrier"),
    ],
)
def test_op_and_call_text(call, func, inner, op):
    row = _exc(run(R, tb(call, func, inner)))
    assert (row["op"], row["collective_call"]) == (op, call)


@pytest.mark.parametrize("markers", [True, False])
@pytest.mark.parametrize("logger", [True, False])
def test_with_and_without_marker_lines_and_logger_frames(markers, logger):
    row = _exc(run(R, tb(markers=markers, logger=logger)))
    assert (row["op"], row["collective_call"]) == ("all_reduce", "dist.all_reduce(t)")


def test_call_through_a_helper_gives_the_helpers_collective_call():
    lines = tb(call="sync(t)")
    lines[5:5] = ['  File "/w/utils.py", line 9, in sync', "    torch.distributed.all_reduce(x, op=ReduceOp.MAX)"]
    row = _exc(run(R, lines))
    assert (row["op"], row["collective_call"]) == ("all_reduce", "torch.distributed.all_reduce(x, op=ReduceOp.MAX)")


def test_cut_traceback_without_torch_frames_uses_the_source_line():
    row = _exc(run(R, tb(call="dist.broadcast(weights, src=0)", func=None, logger=False)))
    assert (row["op"], row["collective_call"]) == ("broadcast", "dist.broadcast(weights, src=0)")


def test_a_traceback_elsewhere_names_no_collective():
    row = _exc(run(R, tb(call="x = model(batch)", func=None, logger=False, exc="ValueError: bad")))
    assert row.get("op") is None and row.get("collective_call") is None


def test_traceback_without_its_exception_line_still_names_the_collective():
    lines = tb()[:-1]
    row = _exc(run(R, lines))
    assert row["message"].startswith("traceback without") and row["op"] == "all_reduce"


def test_interleaved_ranks_keep_their_own_collective():
    a = ["[rank0]:" + t for t in tb()]
    b = [
        "[rank1]:" + t
        for t in tb(call="dist.broadcast(t, 0)", func="broadcast", inner="work = group.broadcast([t], o)")
    ]
    mixed = [x for pair in zip(a, b) for x in pair] + a[len(b) :] + b[len(a) :]
    out = run(R, mixed)
    got = {e["rank"]: (e["op"], e["collective_call"]) for e in out.errors if e["kind"] == "exception"}
    assert got == {0: ("all_reduce", "dist.all_reduce(t)"), 1: ("broadcast", "dist.broadcast(t, 0)")}


WRAPPERS = {
    "torchrun": lambda i, t: f"[default1]:[rank1]:{t}",
    "kubectl": lambda i, t: f"2024-05-01T12:00:00.{i:09d}Z [rank1]:{t}",
    "syslog": lambda i, t: f"May  1 12:00:00 node-3 python[77]: [rank1]:{t}",
    "compose": lambda i, t: f"trainer-rank-1  | {t}",
    "grep_h": lambda i, t: f"logs/rank1.log:{t}",
    "grep_hn": lambda i, t: f"logs/rank1.log:{i + 100}:{t}",
    "ansi_crlf": lambda i, t: f"\x1b[31m[rank1]:{t}\x1b[0m\r",
}


@pytest.mark.parametrize("wrapper", sorted(WRAPPERS))
def test_through_the_loader_with_every_wrapper(wrapper, tmp_path):
    lines = ["step 10 loss 1.0"] + tb() + ["exiting"]
    p = tmp_path / "pasted.log"
    p.write_text("\n".join(WRAPPERS[wrapper](i, t) for i, t in enumerate(lines)) + "\n", newline="")
    inc = dx.load(str(p), progress=False)
    exc = inc.errors[inc.errors["kind"] == "exception"]
    assert len(exc) == 1, exc
    row = exc.iloc[0]
    assert (row["rank"], row["op"], row["collective_call"]) == (1, "all_reduce", "dist.all_reduce(t)")
