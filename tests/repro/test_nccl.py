"""NCCL runs of the seed scenarios: only where at least world-size CUDA GPUs are visible."""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.nccl, pytest.mark.slow]

WORLD = 2


@pytest.fixture(scope="module")
def gpus():
    pytest.importorskip("torch")
    from denpex_nb.repro.launch import gpu_count

    n = gpu_count()
    if n < WORLD:
        pytest.skip(f"--backend nccl needs {WORLD} visible CUDA GPUs, {n} visible on this machine")
    return n


def test_nccl_environment_is_set_for_the_ranks(gpus, tmp_path):
    from denpex_nb import repro

    result = repro.run(
        "allgather-shape-mismatch",
        fixed=True,
        world_size=WORLD,
        backend="nccl",
        trace=True,
        timeout=10.0,
        out=tmp_path / "run",
        wall_limit=120,
    )
    assert result.manifest["env"]["NCCL_DEBUG"] == "INFO"
    assert result.manifest["env"]["NCCL_DEBUG_SUBSYS"] == "INIT,COLL"
    assert result.ok, result.summary()
    assert "NCCL INFO" in result.combined_log.read_text()
    assert "device cuda:1" in result.rank_log(1, "stdout").read_text()


@pytest.mark.parametrize("scenario", ["allgather-shape-mismatch", "allreduce-shape-mismatch"])
def test_nccl_broken_seed_scenarios_fail_within_the_bound(gpus, scenario, tmp_path):
    from denpex_nb import repro

    result = repro.run(
        scenario,
        world_size=WORLD,
        backend="nccl",
        flight_recorder=True,
        trace=True,
        timeout=10.0,
        out=tmp_path / "run",
        wall_limit=60,
    )
    # NCCL never checks sizes: a hang until the watchdog, silent garbage, or an error. Either the
    # run fails or the launcher stops it; it never outlives its bound.
    assert result.wall_s < 60 + 6 + 10
    assert (result.out_dir / "manifest.json").is_file()
