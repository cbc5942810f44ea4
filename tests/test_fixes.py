"""denpex_nb.fixes on real gloo process groups of 2 and 4 ranks.

One multi-rank job per world size runs every check (tests/_fixes_job.py); the tests assert on
the JSON each rank wrote. Expensive part shared through a module-scoped fixture.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

from denpex_nb.repro.launch import free_port  # noqa: E402

JOB = Path(__file__).with_name("_fixes_job.py")
ROOT = Path(__file__).resolve().parents[1]


def _run_job(world: int, out: Path) -> list[dict]:
    port = free_port()
    procs = []
    for r in range(world):
        env = dict(
            os.environ,
            MASTER_ADDR="127.0.0.1",
            MASTER_PORT=str(port),
            RANK=str(r),
            WORLD_SIZE=str(world),
            LOCAL_RANK=str(r),
            FIXES_OUT=str(out),
            OMP_NUM_THREADS="1",
            PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
        )
        procs.append(
            subprocess.Popen(
                [sys.executable, str(JOB)],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        )
    outputs = []
    try:
        for p in procs:
            outputs.append(p.communicate(timeout=90)[0].decode(errors="replace"))
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
    assert [p.returncode for p in procs] == [0] * world, "\n".join(outputs)[-4000:]
    return [json.loads((out / f"rank{r}.json").read_text()) for r in range(world)]


@pytest.fixture(scope="module", params=[2, 4], ids=["w2", "w4"])
def results(request, tmp_path_factory):
    world = request.param
    return world, _run_job(world, tmp_path_factory.mktemp(f"fixes_w{world}"))


@pytest.mark.slow
def test_all_gather_uneven_returns_every_rank_tensor_trimmed(results):
    world, res = results
    lengths = [5, 3, 0, 2][:world]
    for r in res:
        assert r["uneven_shapes"] == [[n, 4] for n in lengths]
        assert r["uneven_correct"] is True


@pytest.mark.slow
def test_all_gather_uneven_multidim_int_and_zero_length(results):
    world, res = results
    lengths = [1, 4, 2, 0][:world]
    for r in res:
        assert r["multidim_shapes"] == [[n, 2, 3] for n in lengths]
        assert r["multidim_dtypes"] == ["torch.int64"]
        assert r["multidim_correct"] is True
        assert r["all_empty_shapes"] == [[0, 3]] * world


@pytest.mark.slow
def test_all_gather_uneven_rejects_trailing_mismatch_on_every_rank(results):
    world, res = results
    for r in res:
        msg = r["tail_mismatch"]
        assert "trailing dimensions" in msg
        assert all(f"rank {k} float32[2, {3 + k}]" in msg for k in range(world))


@pytest.mark.slow
def test_check_same_shapes_names_every_rank_shape_and_dtype(results):
    world, res = results
    for r in res:
        assert r["same_ok"] == [4, 2]
        assert r["shape_error_is_runtime_error"] is True
        msg = r["shape_error"]
        assert "rank 0 float32[5, 4]" in msg and "rank 1 float32[3, 4]" in msg
        assert all(f"rank {k} " in msg for k in range(world))
        assert "fix:" in msg
        assert f"rank {world - 1} float64[8]" in r["dtype_error"] and "rank 0 float32[8]" in r["dtype_error"]
        assert "rank 0 float32[2]" in r["ndim_error"] and "rank 1 float32[2, 2]" in r["ndim_error"]


@pytest.mark.slow
def test_all_reduce_padded_pads_to_longest_and_sums(results):
    world, res = results
    lengths = [3, 5, 1, 4][:world]
    longest = max(lengths)
    expect = [float(sum(1 for n in lengths if i < n)) for i in range(longest)]
    for r in res:
        assert r["padded_shape"] == [longest, 2]
        assert r["padded_column"] == expect


@pytest.mark.slow
def test_all_reduce_padded_pads_with_the_ops_identity(results):
    """MAX over negative rows (rank r holds -(r + 1)) padded with -inf: each position is the largest
    value of the ranks that have it; padding with 0 would return zeros past the shorter ranks."""
    world, res = results
    lengths = [3, 5, 1, 4][:world]
    expect = [max(-(r + 1.0) for r, n in enumerate(lengths) if i < n) for i in range(max(lengths))]
    for r in res:
        assert r["padded_max_column"] == expect


@pytest.mark.slow
def test_errors_leave_ranks_in_step(results):
    world, res = results
    for r in res:
        assert "at least one dimension" in r["scalar_error"]
        assert r["final_all_reduce"] == float(world)
