"""``jobs="dask"`` on a real ``dask.distributed`` cluster with separate worker processes: the same
Incident as a serial load, for a local run and for one in S3 (the workers open the objects
themselves), futures released as they are gathered, and a cluster that is not there or goes away
mid-load as one line, promptly."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path

import pandas as pd
import pytest

import denpex_nb as dx
from denpex_nb.errors import DenpexError

from .s3server import BUCKET, free_port  # the s3_server fixture comes from tests/ingest/conftest.py

distributed = pytest.importorskip("distributed")

ROOT = Path(__file__).resolve().parents[2]
RUN = ROOT / "data" / "recorded" / "gloo" / "skipped-collective" / "broken-detail-w4"
FRAMES = ("events", "errors", "ranks", "progress", "unparsed")


@pytest.fixture(scope="module", autouse=True)
def _no_resource_tracker_left():
    """Worker processes are spawned, which starts multiprocessing's resource tracker, a helper
    process that otherwise lives as long as this one (and fails the suite's no-leftover-process
    check). Torn down last in this module, after every cluster is closed: stop it."""
    yield
    import multiprocessing.resource_tracker as tracker

    stop = getattr(tracker._resource_tracker, "_stop", None)
    if stop is not None:
        stop()


@pytest.fixture(scope="module")
def cluster():
    """Two worker processes, one thread each; closed (processes gone) after the module."""
    with distributed.LocalCluster(
        n_workers=2, processes=True, threads_per_worker=1, dashboard_address=":0", silence_logs=logging.ERROR
    ) as cl:
        yield cl


def _load(*paths, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return dx.load(*paths, progress=False, **kw)


def _same(a, b, rename=lambda v: v) -> None:
    def norm(frame, fix=lambda v: v):
        frame = frame.copy()
        for col in frame.columns:
            if frame[col].dtype == object or isinstance(frame[col].dtype, (pd.StringDtype, pd.CategoricalDtype)):
                frame[col] = frame[col].astype(object).map(lambda v: fix(v) if isinstance(v, str) else v)
        return frame.reset_index(drop=True)

    for name in FRAMES + ("sources",):
        pd.testing.assert_frame_equal(
            norm(getattr(a, name)), norm(getattr(b, name), rename), obj=name, check_dtype=False
        )


def _no_parse_tasks_left(cl) -> bool:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if not [k for k in cl.scheduler.tasks if "denpex-parse" in str(k)]:
            return True
        time.sleep(0.1)
    return False


def test_a_local_run_on_worker_processes_is_the_serial_incident(cluster):
    serial = _load(str(RUN), jobs=1)
    with distributed.Client(cluster) as client:  # the current client is used
        on_dask = _load(str(RUN), jobs="dask")
        parsed_there = client.run(lambda: "denpex_nb.ingest.parse" in sys.modules)
        pids = client.run(os.getpid)
    _same(serial, on_dask)
    assert dx.diagnose(on_dask).culprit_ranks == [3]
    assert all(parsed_there.values()) and os.getpid() not in pids.values() and len(set(pids.values())) == 2
    assert _no_parse_tasks_left(cluster)  # every future was released


def test_a_flight_recorder_incident_on_the_workers_diagnoses_as_in_one_process(cluster, tmp_path):
    """Issue 17's scale-out at the size CI allows: many dumps, parsed by the two worker processes
    through the CLI's --scheduler, give the frames and the diagnosis of a one-process load."""
    from denpex_nb.testing.frcompare import write_synthetic_dumps

    planted = write_synthetic_dumps(tmp_path / "fr", 192, 40, "size", plant_rank=17)
    here = _load(str(tmp_path / "fr"), jobs=1)
    with distributed.Client(cluster, set_as_default=False) as client:
        there = _load(str(tmp_path / "fr"), dask_client=client)
        pids = client.run(os.getpid)
    _same(here, there)
    a, b = dx.diagnose(here), dx.diagnose(there)
    assert a.to_json() == b.to_json()
    assert b.verdict == "shape-mismatch" and b.culprit_ranks == [17] and b.first.seq == planted.seq
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("DENPEX_DASK_SCHEDULER", None)
    res = subprocess.run(
        [sys.executable, "-m", "denpex_nb.cli", "diagnose", str(tmp_path / "fr"), "--json"]
        + ["--scheduler", cluster.scheduler_address],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr[-500:]
    assert json.loads(res.stdout) == json.loads(a.to_json())
    assert len(set(pids.values())) == 2 and os.getpid() not in pids.values()
    assert _no_parse_tasks_left(cluster)


def test_tasks_of_consecutive_dumps_come_back_merged_and_a_stdin_dump_between_keeps_the_order(cluster, tmp_path):
    """Each task's files are consecutive inputs and the worker merges their events batches (one
    part per column and task travels, not one per dump); standard input is parsed in this process,
    so a task whose files straddle it is not merged: the rows keep the input order either way."""
    import io

    from denpex_nb.ingest.parallel import run_all
    from denpex_nb.ingest.sources import expand, resolve_limits
    from denpex_nb.testing.frcompare import write_synthetic_dumps

    write_synthetic_dumps(tmp_path / "fr", 40, 10, "size", plant_rank=3)
    dumps = [str(tmp_path / "fr" / f"comm_lib_trace_rank_{r}") for r in range(40)]
    with distributed.Client(cluster, set_as_default=False) as client:
        specs, _ = expand(dumps)
        results = run_all(specs, resolve_limits(), "dask", dask_client=client)
        holders = [r for r in results if r.frames.get("events")]
        assert [len(r.frames["events"]) for r in holders] == [1] * len(holders)
        assert 1 < len(holders) < 40  # one merged batch per task
        assert sum(len(r.frames["events"][0]["seq"]) for r in holders) == 40 * 10
        paths = dumps[:6] + ["-"] + dumps[7:]  # rank 6's dump read from standard input, here
        stdin = Path(dumps[6]).read_bytes()
        here = _load(paths, stdin=io.BytesIO(stdin), jobs=1)
        there = _load(paths, stdin=io.BytesIO(stdin), dask_client=client)
    _same(here, there)
    assert (there.events["file"] == "<stdin>").sum() == 10


def test_the_cli_scheduler_option_with_nothing_listening_is_one_line_exit_2():
    address = f"tcp://127.0.0.1:{free_port()}"
    env = dict(
        os.environ, DENPEX_DASK_TIMEOUT="3", PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")
    )
    env.pop("DENPEX_DASK_SCHEDULER", None)
    t0 = time.monotonic()
    res = subprocess.run(
        [sys.executable, "-m", "denpex_nb.cli", "diagnose", str(RUN), "--scheduler", address],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    lines = res.stderr.strip().splitlines()
    assert res.returncode == 2 and len(lines) == 1, res.stderr
    assert f"cannot reach the Dask scheduler at {address}" in lines[0] and "--scheduler" in lines[0]
    assert res.stdout == "" and time.monotonic() - t0 < 30
    res = subprocess.run(
        [sys.executable, "-m", "denpex_nb.cli", "diagnose", str(RUN), "--scheduler", "not an address"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    lines = res.stderr.strip().splitlines()
    assert res.returncode == 2 and len(lines) == 1 and "not an address" in lines[0], res.stderr


def test_an_s3_run_is_read_by_the_workers_themselves(cluster, s3_server, monkeypatch):
    s3_server.upload_folder(RUN, "dask/run")
    url = f"s3://{BUCKET}/dask/run/"
    serial = _load(url, storage_options=s3_server.options(), jobs=1)

    def no_reads_here(spec):
        raise AssertionError(f"the client opened {spec.path}: the workers should")

    import denpex_nb.ingest.remote as remote

    monkeypatch.setattr(remote, "open_raw", no_reads_here)  # this process lists, never reads
    on_dask = _load(url, storage_options=s3_server.options(), dask_client=cluster.scheduler_address)
    _same(serial, on_dask)
    assert on_dask.sources["error"].isna().all()
    assert dx.diagnose(on_dask).culprit_ranks == [3]
    with distributed.Client(cluster) as client:
        assert all(client.run(lambda: "s3fs" in sys.modules).values())
    assert _no_parse_tasks_left(cluster)


def test_a_local_run_equals_the_s3_run_on_the_cluster(cluster, s3_server):
    s3_server.upload_folder(RUN, "dask/run2")
    local = _load(str(RUN), dask_client=cluster.scheduler_address)
    remote = _load(
        f"s3://{BUCKET}/dask/run2/", storage_options=s3_server.options(), dask_client=cluster.scheduler_address
    )
    _same(local, remote, lambda v: v.replace(f"s3://{BUCKET}/dask/run2", str(RUN)))


def test_a_scheduler_address_with_nothing_listening_is_one_line_exit_2(monkeypatch):
    monkeypatch.setenv("DENPEX_DASK_TIMEOUT", "3")
    address = f"tcp://127.0.0.1:{free_port()}"
    t0 = time.monotonic()
    with pytest.raises(DenpexError, match="cannot reach the Dask scheduler at " + address) as e:
        _load(str(RUN), dask_client=address)
    assert "\n" not in str(e.value) and "fix:" in str(e.value)
    env = dict(
        os.environ,
        DENPEX_DASK_SCHEDULER=address,
        DENPEX_DASK_TIMEOUT="3",
        PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
    )
    res = subprocess.run(
        [sys.executable, "-m", "denpex_nb.cli", "diagnose", str(RUN)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    lines = res.stderr.strip().splitlines()
    assert res.returncode == 2 and len(lines) == 1 and "cannot reach the Dask scheduler" in lines[0], res.stderr
    assert time.monotonic() - t0 < 30


def test_a_cluster_that_goes_away_mid_load_is_one_line_and_no_hang(monkeypatch):
    from denpex_nb.ingest.parallel import run_all
    from denpex_nb.ingest.sources import expand, resolve_limits

    monkeypatch.setenv("DENPEX_DASK_TIMEOUT", "5")
    specs, _ = expand([str(RUN)])
    assert len(specs) >= 8  # several tasks: the first result comes before the rest
    cl = distributed.LocalCluster(
        n_workers=1, processes=True, threads_per_worker=1, dashboard_address=":0", silence_logs=logging.CRITICAL
    )
    gathered = []

    def after_first(spec):
        gathered.append(spec)
        if len(gathered) == 1:  # close the cluster from another thread, then go on
            closer = threading.Thread(target=cl.close)
            closer.start()
            closer.join(30)

    t0 = time.monotonic()
    try:
        with distributed.Client(cl, set_as_default=False) as client:
            with pytest.raises(DenpexError) as e:
                run_all(specs, dict(resolve_limits(), strict=True), "dask", on_file=after_first, dask_client=client)
    finally:
        cl.close()
    msg = str(e.value)
    assert "went away mid-load" in msg and "fix:" in msg and "\n" not in msg, msg
    assert 1 <= len(gathered) < len(specs)
    assert time.monotonic() - t0 < 40


def test_a_cluster_without_workers_is_one_line_after_the_timeout(monkeypatch):
    from denpex_nb.ingest.parallel import run_all
    from denpex_nb.ingest.sources import expand, resolve_limits

    monkeypatch.setenv("DENPEX_DASK_TIMEOUT", "2")
    specs, _ = expand([str(RUN / "combined.log")])
    with (
        distributed.LocalCluster(
            n_workers=0, processes=False, dashboard_address=":0", silence_logs=logging.CRITICAL
        ) as cl,
        distributed.Client(cl, set_as_default=False) as client,
    ):
        t0 = time.monotonic()
        with pytest.raises(DenpexError) as e:
            run_all(specs, resolve_limits(), "dask", dask_client=client)
        took = time.monotonic() - t0
    msg = str(e.value)
    assert "0 of 1 files parsed" in msg and "no workers (for 2 s, DENPEX_DASK_TIMEOUT)" in msg and "\n" not in msg, msg
    assert 2 <= took < 15


def _decoder_state():
    from denpex_nb.ingest import flight_recorder, pickle_nodes

    return pickle_nodes.backend(), flight_recorder._COMPILED_READY


def _set_compiled_min(n):
    from denpex_nb.ingest import flight_recorder

    flight_recorder.COMPILED_MIN_BYTES = n


def test_workers_without_the_c_kernels_decode_a_task_of_small_dumps_compiled(tmp_path):
    """A worker is not forked from the client, so the client's choice of decoder does not reach it.
    With only numba (no C kernels built), a worker once read each small dump with the unpickler
    (~10x slower): now the readers look at each task's files first, and a task of dumps that
    together pass COMPILED_MIN_BYTES loads the compiled decoder, as one process would for the load.
    The threshold is set on the worker between one dump's size and a task's, so one dump alone
    would not choose it."""
    pytest.importorskip("numba")
    from denpex_nb.testing.frcompare import write_synthetic_dumps

    write_synthetic_dumps(tmp_path / "fr", 64, 20, "size", plant_rank=5)
    biggest = max(f.stat().st_size for f in (tmp_path / "fr").iterdir())
    here = _load(str(tmp_path / "fr"), jobs=1)
    with (
        distributed.LocalCluster(
            n_workers=1,
            processes=True,
            threads_per_worker=1,
            dashboard_address=":0",
            silence_logs=logging.ERROR,
            env={"DENPEX_FR_KERNELS": "numba", "DENPEX_FR_DECODER": "auto"},
        ) as cl,
        distributed.Client(cl, set_as_default=False) as client,
    ):
        (before,) = client.run(_decoder_state).values()
        client.run(_set_compiled_min, biggest + 1)
        there = _load(str(tmp_path / "fr"), dask_client=client)
        (after,) = client.run(_decoder_state).values()
    assert before == ("numba", False)  # a fresh worker: numba kernels, nothing loaded yet
    assert after == ("numba", True)  # the task's dumps went through the compiled decoder
    _same(here, there)
    assert dx.diagnose(there).culprit_ranks == [5]
