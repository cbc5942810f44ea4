"""Shared, expensive reproducer runs: each runs once per test session and is asserted on by many tests."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")


@pytest.fixture(scope="session")
def broken_run(tmp_path_factory):
    """allgather-shape-mismatch, broken, 2 ranks, Flight Recorder + tracer."""
    from denpex_nb import repro

    return repro.run(
        "allgather-shape-mismatch",
        world_size=2,
        flight_recorder=True,
        trace=True,
        timeout=5.0,
        out=tmp_path_factory.mktemp("broken") / "run",
        wall_limit=90,
    )


@pytest.fixture(scope="session")
def fixed_run(tmp_path_factory):
    """allgather-shape-mismatch, fixed, 2 ranks, Flight Recorder + tracer."""
    from denpex_nb import repro

    return repro.run(
        "allgather-shape-mismatch",
        fixed=True,
        world_size=2,
        flight_recorder=True,
        trace=True,
        timeout=5.0,
        out=tmp_path_factory.mktemp("fixed") / "run",
        wall_limit=90,
    )


@pytest.fixture(scope="session")
def killed_run(tmp_path_factory):
    """op-mismatch with a long collective timeout and a short wall limit: the launcher must kill it."""
    from denpex_nb import repro

    return repro.run(
        "op-mismatch",
        world_size=2,
        flight_recorder=True,
        trace=True,
        timeout=120.0,
        out=tmp_path_factory.mktemp("killed") / "run",
        wall_limit=15,
    )
