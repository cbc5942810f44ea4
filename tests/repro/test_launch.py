"""denpex_nb.repro.launch: real runs write the run folder the rest of the toolkit reads."""

from __future__ import annotations

import json
import pickle
import re

import pytest

from denpex_nb.incident import ERROR_KINDS  # noqa: F401  (the package imports without torch)

pytestmark = pytest.mark.slow
PREFIX = re.compile(r"^\[default(\d+)\]:")


class _PlainData(pickle.Unpickler):
    """The restricted unpickler a user should use on a dump: plain containers and scalars only."""

    def find_class(self, module, name):
        raise pickle.UnpicklingError(f"refusing {module}.{name}")


def _load_fr(path):
    with open(path, "rb") as fh:
        return _PlainData(fh).load()


def _trace_lines(run, rank):
    path = run.out_dir / "trace" / f"denpex_trace_rank{rank}.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_manifest_describes_the_run(broken_run):
    m = json.loads((broken_run.out_dir / "manifest.json").read_text())
    assert m == broken_run.manifest
    assert m["scenario"] == "allgather-shape-mismatch" and m["variant"] == "broken"
    assert m["backend"] == "gloo" and m["world_size"] == 2 and m["debug"] == "off"
    assert m["torch"].startswith("2.") and m["python"].count(".") == 2
    assert m["env"]["MASTER_ADDR"] == "127.0.0.1" and int(m["env"]["MASTER_PORT"]) > 0
    assert len(m["exit_codes"]) == 2 and len(m["signals"]) == 2 and m["wall_s"] > 0
    assert m["expected"] == {
        "class": "shape-mismatch",
        "op": "all_gather",
        "culprit_ranks": [1],
        "seq": {"trace": 3, "fr": 3, "detail": None},
        "shapes": {"0": [[5, 4]], "1": [[3, 4]]},
    }
    for rel in m["files"]:
        assert (broken_run.out_dir / rel).is_file(), rel


def test_broken_run_fails_and_the_small_buffer_rank_aborts(broken_run):
    assert not broken_run.ok and broken_run.manifest["outcome"] == "failed"
    # gloo: rank 1 receives 40 bytes into a 24-byte buffer and aborts; rank 0 is reset or corrupt
    assert broken_run.exit_codes[1] == -6 and broken_run.signals[1] == "SIGABRT"
    assert broken_run.exit_codes[0] in (0, 1, -6, -15)
    assert broken_run.killed_ranks == []
    assert broken_run.wall_s < 60


def test_combined_log_is_prefixed_and_holds_every_rank_line(broken_run):
    combined = broken_run.combined_log.read_text().splitlines()
    assert combined and all(PREFIX.match(line) for line in combined)
    for rank in (0, 1):
        mine = [PREFIX.sub("", line) for line in combined if PREFIX.match(line).group(1) == str(rank)]
        per_rank = (
            broken_run.rank_log(rank, "stdout").read_text().splitlines()
            + broken_run.rank_log(rank, "stderr").read_text().splitlines()
        )
        assert sorted(mine) == sorted(per_rank)
        assert not any(PREFIX.match(line) for line in per_rank)
    text = "\n".join(combined)
    assert "[default1]:terminate called after throwing an instance of 'gloo::EnforceNotMet'" in text
    assert "step 2/2 rank 0" in text and "eval rank 1: 3 detections" in text


def test_trace_of_an_aborted_rank_still_has_its_issue_line(broken_run):
    lines = _trace_lines(broken_run, 1)
    # the launcher sets RANK: a meta line at enable() (before init: no backend yet), repeated with
    # the backend before the first collective
    metas = [d for d in lines if d["event"] == "meta"]
    assert lines[: len(metas)] == metas and all(m["rank"] == 1 and m["pid"] > 0 for m in metas)
    assert metas[-1]["backend"] == "gloo"
    last = lines[-1]
    assert last["event"] == "issue" and last["op"] == "all_gather" and last["seq"] == 3
    assert last["in_shapes"] == [[3, 4]] and last["dtypes"] == ["float32"] and last["pg"] == "0"
    body = lines[len(metas) :]
    assert [(d["seq"], d["event"]) for d in body[:4]] == [(1, "issue"), (1, "done"), (2, "issue"), (2, "done")]


def test_flight_recorder_dump_loads_with_restricted_unpickler(broken_run, fixed_run):
    # the aborted rank cannot dump; the survivor dumped on its caught failure
    assert not (broken_run.out_dir / "fr" / "comm_lib_trace_rank_1").exists()
    if broken_run.exit_codes[0] == 1:
        dump = _load_fr(broken_run.out_dir / "fr" / "comm_lib_trace_rank_0")
        gathers = [e for e in dump["entries"] if e["profiling_name"] == "gloo:all_gather"]
        assert gathers[0]["collective_seq_id"] == 3 and gathers[0]["input_sizes"] == [[5, 4]]
    for rank in (0, 1):
        dump = _load_fr(fixed_run.out_dir / "fr" / f"comm_lib_trace_rank_{rank}")
        seqs = [e["collective_seq_id"] for e in dump["entries"]]
        assert dump["version"] and seqs == list(range(1, 6))  # 2 steps, 2 gathers (sizes, data), 1 step
        assert dump["pg_status"]["0"]["last_enqueued_collective"] == 5
    assert not list((fixed_run.out_dir / "fr").glob("*.tmp"))


def test_fixed_run_succeeds_on_every_rank(fixed_run):
    assert fixed_run.ok and fixed_run.exit_codes == [0, 0] and fixed_run.signals == [None, None]
    assert fixed_run.manifest["expected"] == {"class": "no-failure", "op": None, "culprit_ranks": [], "seq": None}
    text = fixed_run.combined_log.read_text()
    assert "[default0]:rank 0 gathered 8 boxes, shapes=[[5, 4], [3, 4]]" in text
    assert "[default1]:rank 1 finished" in text
    ops = [(d["seq"], d["op"]) for d in _trace_lines(fixed_run, 0) if d["event"] == "done"]
    assert ops == [(1, "all_reduce"), (2, "all_reduce"), (3, "all_gather"), (4, "all_gather"), (5, "all_reduce")]


def test_hard_wall_clock_kill_stops_a_hang_and_sigterm_dumps(killed_run):
    m = killed_run.manifest
    assert m["killed_by_launcher"] == [0, 1] and "wall-clock limit" in m["kill_reason"]
    assert all(code in (-15, -9) for code in killed_run.exit_codes)
    assert killed_run.wall_s < 15 + 6 + 5
    # the SIGTERM path dumps even though the main thread is blocked inside the collective
    for rank in (0, 1):
        if killed_run.exit_codes[rank] == -15:
            dump = _load_fr(killed_run.out_dir / "fr" / f"comm_lib_trace_rank_{rank}")
            assert dump["entries"][-1]["collective_seq_id"] == 3
    assert _trace_lines(killed_run, 0)[-1]["op"] == "broadcast"
    assert _trace_lines(killed_run, 1)[-1]["op"] == "all_reduce"


def test_no_process_outlives_a_run(broken_run, fixed_run, killed_run):
    psutil = pytest.importorskip("psutil")
    for run in (broken_run, fixed_run, killed_run):
        for r in run.manifest["ranks"]:
            assert not psutil.pid_exists(r["pid"]) or psutil.Process(r["pid"]).status() == psutil.STATUS_ZOMBIE
    workers = []
    for child in psutil.Process().children(recursive=True):
        try:
            if "denpex_nb.repro._worker" in " ".join(child.cmdline()):
                workers.append(child.pid)
        except psutil.Error:
            pass
    assert workers == []


def test_a_rank_that_starts_late_still_meets_the_others(tmp_path):
    """Rendezvous waits longer than the collective timeout: on a loaded machine a rank may start
    seconds after the others, and a 1-second collective timeout must not fail the run at init."""
    import os
    import socket
    import subprocess
    import sys
    import time
    from pathlib import Path

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    root = str(Path(__file__).resolve().parents[2])
    procs = []
    try:
        for rank in (0, 1):
            env = {
                **os.environ,
                "MASTER_ADDR": "127.0.0.1",
                "MASTER_PORT": str(port),
                "WORLD_SIZE": "2",
                "RANK": str(rank),
                "LOCAL_RANK": str(rank),
                "PYTHONPATH": root,
            }
            env.pop("DENPEX_TRACE_DIR", None)
            cmd = [
                sys.executable,
                "-m",
                "denpex_nb.repro._worker",
                "--scenario",
                "allgather-shape-mismatch",
                "--variant",
                "fixed",
                "--backend",
                "gloo",
                "--debug",
                "off",
                "--timeout",
                "1",
            ]
            procs.append(
                subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
            )
            if rank == 0:
                time.sleep(4)  # four collective timeouts later
        outs = [p.communicate(timeout=90)[0].decode(errors="replace") for p in procs]
        assert [p.returncode for p in procs] == [0, 0], outs
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
