"""How load() spreads files over a process pool: tasks group small files, big ones go alone."""

from __future__ import annotations

from denpex_nb.ingest.parallel import CHUNK_BYTES, _chunks
from denpex_nb.ingest.sources import FileSpec


def _specs(sizes):
    return [FileSpec(display=f"f{i}", path=f"f{i}", size=s) for i, s in enumerate(sizes)]


def test_a_thousand_small_dumps_become_a_few_dozen_tasks_for_every_worker():
    specs = _specs([380_000] * 1024)
    chunks = _chunks(list(range(1024)), specs, workers=2)
    assert sorted(i for c in chunks for i in c) == list(range(1024))  # every file exactly once
    assert max(len(c) for c in chunks) <= 64 and len(chunks) >= 2 * 4  # >= 4 tasks per worker
    assert len(chunks) <= 32


def test_big_files_go_alone_and_few_files_are_not_grouped():
    specs = _specs([CHUNK_BYTES * 2, CHUNK_BYTES, 10, 10, 10])
    assert _chunks([0, 1, 2, 3, 4], specs, workers=2) == [[0], [1], [2], [3], [4]]
    specs = _specs([CHUNK_BYTES // 2 + 1] * 40)
    chunks = _chunks(list(range(40)), specs, workers=2)
    assert all(len(c) == 1 for c in chunks)  # two would pass the byte cap


def test_grouped_tasks_give_the_serial_result_in_input_order(tmp_path):
    import pandas as pd

    import denpex_nb as dx
    from denpex_nb.testing.frcompare import write_synthetic_dumps

    write_synthetic_dumps(tmp_path / "fr", 40, 6, "size", plant_rank=7)  # 40 files: 5 per task
    for r in range(3):
        (tmp_path / f"rank{r}.log").write_text(f"[rank{r}]: RuntimeError: boom on rank {r}\n" * 3)
    serial = dx.load(str(tmp_path), jobs=1, progress=False)
    pooled = dx.load(str(tmp_path), jobs=2, progress=False)
    for name in ("events", "errors", "progress", "unparsed"):
        pd.testing.assert_frame_equal(getattr(serial, name), getattr(pooled, name), obj=name)
    cols = ["file", "format", "lines_total", "lines_parsed", "lines_unparsed"]
    pd.testing.assert_frame_equal(serial.sources[cols], pooled.sources[cols])
    assert dx.diagnose(pooled).culprit_ranks == [7]


def test_dask_is_chosen_by_name_by_a_client_or_by_the_scheduler_variable(monkeypatch):
    import pytest

    from denpex_nb.errors import UsageError
    from denpex_nb.ingest.parallel import choose_jobs, run_all

    specs = _specs([10, 10])
    monkeypatch.delenv("DENPEX_DASK_SCHEDULER", raising=False)
    assert choose_jobs(specs, "dask") == "dask" and choose_jobs(specs, None) == 1
    monkeypatch.setenv("DENPEX_DASK_SCHEDULER", "tcp://127.0.0.1:8786")
    assert choose_jobs(specs, None) == "dask" and choose_jobs(specs, 1) == 1  # an explicit jobs= wins
    with pytest.raises(UsageError, match="dask_client= was given with jobs=2"):
        run_all(specs, {}, 2, dask_client="tcp://127.0.0.1:8786")
    with pytest.raises(UsageError, match="not understood"):
        choose_jobs(specs, "spark")
