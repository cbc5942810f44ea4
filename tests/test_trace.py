"""denpex_nb.trace: the JSONL contract, flushed before the collective, in real processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

JOB = Path(__file__).with_name("_trace_job.py")
ROOT = Path(__file__).resolve().parents[1]


def _run(mode, tmp_path, **env_extra):
    pytest.importorskip("torch")
    from denpex_nb.repro.launch import free_port

    env = dict(
        os.environ,
        DENPEX_TRACE_DIR=str(tmp_path),
        PORT=str(free_port()),
        OMP_NUM_THREADS="1",
        PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
        **env_extra,
    )
    proc = subprocess.run([sys.executable, str(JOB), mode], env=env, capture_output=True, text=True, timeout=120)
    lines = [json.loads(x) for x in (tmp_path / "denpex_trace_rank0.jsonl").read_text().splitlines()]
    return proc, lines


def test_enable_without_directory_or_env_is_a_no_op(monkeypatch):
    import denpex_nb.trace as trace

    monkeypatch.delenv("DENPEX_TRACE_DIR", raising=False)
    assert trace.enable() is None and not trace.enabled()
    assert trace.trace_path("/x", 3) == "/x/denpex_trace_rank3.jsonl"


@pytest.mark.slow
def test_trace_lines_follow_the_contract(tmp_path):
    proc, lines = _run("normal", tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    meta = lines[0]
    assert meta["event"] == "meta" and meta["v"] == 1 and meta["rank"] == 0 and meta["world_size"] == 1
    assert meta["backend"] == "gloo" and meta["torch"].startswith("2.") and meta["pid"] > 0 and meta["host"]
    body = lines[1:]
    issues = [d for d in body if d["event"] == "issue"]
    assert [(d["seq"], d["op"]) for d in issues] == [
        (1, "all_reduce"),
        (2, "all_gather"),
        (3, "broadcast"),
        (4, "barrier"),
        (5, "all_gather"),
        (6, "all_gather"),  # all_gather_object: sizes, then data (as FR counts them)
        (7, "all_gather"),
    ]
    first = issues[0]
    assert first["in_shapes"] == [[3, 2]] and first["out_shapes"] == [[3, 2]] and first["dtypes"] == ["float32"]
    assert first["pg"] == "0" and first["pg_desc"] == "default_pg" and first["world_size"] == 1
    assert isinstance(first["t_wall"], float) and isinstance(first["t_mono"], float)
    assert issues[1]["out_shapes"] == [[3, 2]] and issues[2]["dtypes"] == ["int64"]
    assert issues[3]["in_shapes"] == [] and issues[3]["out_shapes"] == []
    # every issue is followed by done or error for the same seq; the bad all_gather errors
    for issue in issues:
        ends = [d for d in body if d["seq"] == issue["seq"] and d["event"] in ("done", "error")]
        assert len(ends) == 1 and ends[0]["op"] == issue["op"] and ends[0]["t_mono"] >= issue["t_mono"]
    error = [d for d in body if d["event"] == "error"]
    assert len(error) == 1 and error[0]["seq"] == 7 and error[0]["error"].startswith(("RuntimeError", "ValueError"))


@pytest.mark.slow
def test_issue_line_survives_an_abort_inside_the_collective(tmp_path):
    proc, lines = _run("abort", tmp_path)
    assert proc.returncode == -6
    assert lines[-1]["event"] == "issue" and lines[-1]["op"] == "all_reduce" and lines[-1]["seq"] == 1


@pytest.mark.slow
def test_async_collectives_record_their_completion_and_meta_comes_first(tmp_path):
    """Under a launcher (RANK set) the meta line is written at enable(), before init and before any
    collective; an async collective's done says it was only enqueued, and complete says it finished."""
    proc, lines = _run("async", tmp_path, RANK="0", WORLD_SIZE="1")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert lines[0]["event"] == "meta" and lines[0]["backend"] is None  # before init_process_group
    assert lines[1]["event"] == "meta" and lines[1]["backend"] == "gloo"  # repeated before the first collective
    by_seq = {}
    for d in lines[2:]:
        by_seq.setdefault(d["seq"], []).append((d["event"], d.get("async")))
    assert by_seq[1] == [("issue", None), ("done", True), ("complete", None)]
    assert by_seq[2] == [("issue", None), ("done", True), ("complete", None)]
    assert by_seq[3] == [("issue", None), ("done", None)]  # the synchronous barrier

    import denpex_nb as dx

    events = dx.load(str(tmp_path / "denpex_trace_rank0.jsonl"), progress=False).events
    assert list(events.sort_values("seq")["state"]) == ["completed"] * 3


@pytest.mark.slow
def test_the_trace_rotates_between_collectives_and_stays_bounded(tmp_path):
    proc, _ = _run("rotate", tmp_path, DENPEX_TRACE_MAX_MB="0.004")  # about 4 kB
    assert proc.returncode == 0, proc.stderr[-3000:]
    current, rotated = tmp_path / "denpex_trace_rank0.jsonl", tmp_path / "denpex_trace_rank0.jsonl.1"
    assert rotated.is_file() and sorted(p.name for p in tmp_path.iterdir()) == [current.name, rotated.name]
    for f in (current, rotated):
        docs = [json.loads(x) for x in f.read_text().splitlines()]  # whole lines only
        assert docs[0]["event"] == "meta"
        assert f.stat().st_size < 4200 + 600  # the limit, plus the collective that crossed it
        ends = [d for d in docs if d["event"] == "done"]
        issues = [d for d in docs if d["event"] == "issue"]
        assert [d["seq"] for d in ends] == [d["seq"] for d in issues]  # never split across files
    newest = [json.loads(x) for f in (rotated, current) for x in f.read_text().splitlines()]
    assert [d["seq"] for d in newest if d["event"] == "done"][-1] == 200  # the newest lines are kept
