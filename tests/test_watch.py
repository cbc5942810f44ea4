"""``denpex-nb watch``: findings while the job still runs, from files that are being written.

Most tests write tracer files (the format of :mod:`denpex_nb.trace`) line by line from a thread
while a real :class:`~denpex_nb.live.Watcher` polls them, as a running job would; the death test
uses a real process whose pid the trace names. The real hanging jobs (gloo reproducers in hang
mode) are in ``tests/repro/test_watch_live.py``.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time

import pytest

from denpex_nb.errors import UsageError
from denpex_nb.live import Watcher
from denpex_nb.live.follow import Follower

HOST = socket.gethostname()


class Job:
    """Writes tracer lines for ``world`` fake ranks (pid of this test, or one given per rank)."""

    def __init__(self, folder, world, pids=None, host="elsewhere"):
        self.folder = folder
        self.world = world
        os.makedirs(folder, exist_ok=True)
        self.pids = pids or {}
        self.host = host
        self.seq = {}

    def path(self, rank):
        return os.path.join(self.folder, f"denpex_trace_rank{rank}.jsonl")

    def write(self, rank, obj):
        with open(self.path(rank), "a") as fh:
            fh.write(json.dumps(obj) + "\n")

    def meta(self, rank):
        pid = self.pids.get(rank, 10_000_000 + rank)
        self.write(
            rank, {"v": 1, "event": "meta", "rank": rank, "world_size": self.world, "pid": pid, "host": self.host}
        )

    def base(self, rank, seq, op, pg="0"):
        return {"rank": rank, "world_size": self.world, "pg": pg, "pg_desc": "default_pg", "seq": seq, "op": op}

    def issue(self, rank, seq, op="all_reduce", shape=(8,), dtype="float32"):
        obj = {"v": 1, "event": "issue", **self.base(rank, seq, op)}
        obj.update(in_shapes=[list(shape)], out_shapes=[list(shape)], dtypes=[dtype], t_wall=time.time(), t_mono=1.0)
        self.write(rank, obj)

    def done(self, rank, seq, op="all_reduce"):
        self.write(rank, {"v": 1, "event": "done", **self.base(rank, seq, op), "t_wall": time.time(), "t_mono": 2.0})

    def step(self, seq, ranks=None, **kw):
        """Every rank (or ``ranks``) issues and finishes collective ``seq``."""
        for r in ranks if ranks is not None else range(self.world):
            self.issue(r, seq, **kw)
        for r in ranks if ranks is not None else range(self.world):
            self.done(r, seq, op=kw.get("op", "all_reduce"))


def _run_until(w: Watcher, *, seconds: float, stop_on_first=True):
    found = []
    t_end = time.monotonic() + seconds
    while time.monotonic() < t_end:
        found += w.poll()
        if found and stop_on_first:
            break
        time.sleep(0.05)
    w.close()
    return found


def test_a_shape_mismatch_is_named_while_the_ranks_wait(tmp_path):
    job = Job(tmp_path / "trace", 4)
    for r in range(4):
        job.meta(r)
    for s in (1, 2):
        job.step(s)
    w = Watcher([str(tmp_path)], interval=0.05)
    assert _run_until(w, seconds=0.3) == []
    for r in range(4):  # rank 2 reduces 6 elements, the others 8; nobody returns
        job.issue(r, 3, shape=(6,) if r == 2 else (8,))
    w = Watcher([str(tmp_path)], interval=0.05)
    (f,) = _run_until(w, seconds=5)
    assert f.finding.class_id == "shape-mismatch" and f.finding.seq == 3 and f.finding.culprit_ranks == (2,)
    d = f.to_dict()
    assert d["verdict"] == "shape-mismatch" and d["culprit_ranks"] == [2] and d["since_divergence_s"] >= 0
    assert d["findings"][0]["op"] == "all_reduce"


def test_an_op_mismatch_waits_for_the_others_then_decides(tmp_path):
    job = Job(tmp_path, 4)
    job.step(1)
    w = Watcher([str(tmp_path)], interval=0.05)
    w.poll()
    job.issue(0, 2, op="broadcast")
    job.issue(1, 2)
    assert w.poll() == []  # two of four arrived a moment ago: not decided yet
    job.issue(2, 2)
    job.issue(3, 2)
    (f,) = _run_until(w, seconds=5)
    assert f.finding.class_id == "op-mismatch" and f.finding.seq == 2 and f.finding.culprit_ranks == (0,)


def test_a_rank_that_never_enters_is_named_after_the_stall_time_and_not_before(tmp_path):
    job = Job(tmp_path, 4)
    for s in (1, 2, 3, 4):
        job.step(s)
    for r in (0, 1, 2):
        job.issue(r, 5)
    w = Watcher([str(tmp_path)], stall=0.6, interval=0.05)
    t0 = time.monotonic()
    (f,) = _run_until(w, seconds=5)
    assert time.monotonic() - t0 >= 0.6
    assert f.finding.class_id == "rank-desync" and f.finding.seq == 5 and f.finding.culprit_ranks == (3,)
    assert (
        "rank 3 never entered collective 5 (all_reduce) of process group 0, where ranks 0–2 have waited"
        in f.finding.summary
    )


def test_a_rank_whose_trace_never_appears_is_reported_absent(tmp_path):
    job = Job(tmp_path, 4)
    for s in (1, 2):
        job.step(s, ranks=[0, 1, 2])
    w = Watcher([str(tmp_path)], stall=0.5, interval=0.05)
    w.poll()
    assert w.absent_ranks() == [3]
    job.step(3, ranks=[0, 1, 2])
    for r in (0, 1, 2):
        job.issue(r, 4)
    (f,) = _run_until(w, seconds=5)
    assert f.finding.culprit_ranks == (3,) and "wrote no trace at all (absent)" in f.finding.summary


def test_healthy_drift_below_the_stall_time_gives_no_finding_and_the_stall_time_learns(tmp_path):
    job = Job(tmp_path, 3)
    w = Watcher([str(tmp_path)], interval=0.02)
    found = []
    for s in range(1, 25):
        for r in range(3):  # rank 0 is late every fourth step (a checkpoint), the others a little
            job.issue(r, s)
            found += w.poll()
            time.sleep(0.25 if (r == 2 and s % 4 == 0) else 0.01)
        for r in range(3):
            job.done(r, s)
        found += w.poll()
    w.close()
    assert found == []
    assert w.state.stall_s() >= 3 * 0.2  # learnt from the late arrivals (floor: 2 s)


def test_a_process_that_ends_while_the_others_wait_is_the_culprit(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        job = Job(tmp_path, 2, pids={0: os.getpid(), 1: dead.pid}, host=HOST)
        job.meta(0)
        job.meta(1)
        job.step(1)
        job.issue(0, 2)
        w = Watcher([str(tmp_path)], interval=0.05)
        assert _run_until(w, seconds=0.5) == []  # rank 1 lives: nothing yet (the stall floor is 2 s)
        dead.kill()
        dead.wait()
        w = Watcher([str(tmp_path)], interval=0.05)
        (f,) = _run_until(w, seconds=5)
        assert f.finding.class_id == "rank-crash" and f.finding.culprit_ranks == (1,)
        assert f"pid {dead.pid}) ended while rank 0 waits in collective 2" in f.finding.summary
    finally:
        dead.kill()


def test_ranks_that_end_together_after_their_last_collective_are_not_a_finding(tmp_path):
    gone = [subprocess.Popen([sys.executable, "-c", "pass"]) for _ in range(2)]
    for p in gone:
        p.wait()
    job = Job(tmp_path, 2, pids={r: p.pid for r, p in enumerate(gone)}, host=HOST)
    for r in range(2):
        job.meta(r)
    job.step(1)
    w = Watcher([str(tmp_path)], interval=0.05)
    assert _run_until(w, seconds=1.5, stop_on_first=False) == []
    assert w.ended() and "every rank's process has exited" in w.ended()


def test_rotation_truncation_and_bad_lines_lose_nothing_and_never_crash(tmp_path):
    job = Job(tmp_path, 2)
    f = Follower([str(tmp_path)], rescan_s=0.0)
    job.step(1)
    assert sum(len(c.lines) for c in f.poll()) == 4
    job.issue(0, 2)
    os.replace(job.path(0), job.path(0) + ".1")  # rotated: its last line was never read
    job.done(0, 2)  # ... and the new file starts
    lines = [ln for c in f.poll() for ln in c.lines]
    assert len(lines) == 2 and b'"issue"' in lines[0] + lines[1] and b'"done"' in lines[0] + lines[1]
    assert any(why == "rotated" for _, why in f.restarts)
    open(job.path(1), "w").close()  # truncated in place
    job.done(1, 9)
    assert [len(c.lines) for c in f.poll()] == [1]
    assert any(why == "truncated" for _, why in f.restarts)

    w = Watcher([str(tmp_path)], interval=0.05)
    with open(job.path(1), "a") as fh:
        fh.write('{"v":1,"event":"issue","rank":1,\n{not json}\n[1,2]\n')
    assert w.poll() == []
    assert w.state.bad_lines >= 2
    w.close()


def test_watcher_refuses_a_nonsense_stall_time():
    with pytest.raises(UsageError, match="--stall must be between"):
        Watcher(["x"], stall=-1)


def _cli(*args, timeout=60, **kw):
    return subprocess.run(
        [sys.executable, "-m", "denpex_nb.cli", "watch", *args], capture_output=True, text=True, timeout=timeout, **kw
    )


def test_cli_json_once_and_on_finding_hook(tmp_path):
    job = Job(tmp_path / "run", 4)
    job.step(1)
    for r in range(4):
        job.issue(r, 2, dtype="float16" if r == 1 else "float32")
    hook_out = tmp_path / "hook.json"
    res = _cli(str(tmp_path / "run"), "--json", "--once", "--on-finding", f"cat > {hook_out}")
    assert res.returncode == 0, res.stderr
    lines = [json.loads(x) for x in res.stdout.splitlines()]
    assert lines[0]["verdict"] == "dtype-mismatch" and lines[0]["culprit_ranks"] == [1] and lines[0]["seq"] == 2
    assert "since_divergence_s" in lines[0]
    assert lines[-1]["final"]["verdict"] == "dtype-mismatch"
    assert lines[-1]["stopped"] == "stopped after the first finding (--once)"
    assert json.loads(hook_out.read_text())["verdict"] == "dtype-mismatch"


def test_cli_waits_for_evidence_and_says_so(tmp_path):
    res = _cli(str(tmp_path / "not-yet"), "--idle-exit", "0.6")
    assert res.returncode == 0
    assert "waiting for evidence under" in res.stderr and "no evidence appeared" in res.stderr


def test_cli_bad_arguments_are_one_line_exit_2(tmp_path):
    for args in (
        ["--stall", "-1", str(tmp_path)],
        ["--stall", "nan", str(tmp_path)],
        ["--interval", "0", str(tmp_path)],
    ):
        res = _cli(*args)
        assert res.returncode == 2, (args, res.stderr)
        assert len(res.stderr.strip().splitlines()) == 1 and "Traceback" not in res.stderr


def test_a_log_failure_while_ranks_wait_is_a_finding(tmp_path):
    """Logs are followed too: a rank's own error line, read through the loader's readers, as it is written."""
    logs = tmp_path / "attempt_0" / "1"
    logs.mkdir(parents=True)
    w = Watcher([str(tmp_path)], interval=0.05)
    assert w.poll() == []
    with open(logs / "stderr.log", "a") as fh:
        fh.write("[rank1]: Traceback (most recent call last):\n")
        fh.write('[rank1]:   File "train.py", line 10, in <module>\n')
        fh.write("[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n")
    found = _run_until(w, seconds=3)
    assert found and found[0].finding.class_id == "rank-crash" and found[0].finding.culprit_ranks == (1,)


def test_watch_keeps_up_while_a_writer_appends(tmp_path):
    """A writer thread appends 200 collectives of 8 ranks while the watcher polls: nothing lost, no finding."""
    job = Job(tmp_path, 8)
    stop = threading.Event()

    def writer():
        for s in range(1, 201):
            job.step(s)
        stop.set()

    t = threading.Thread(target=writer)
    w = Watcher([str(tmp_path)], interval=0.01)
    t.start()
    found = []
    while not stop.is_set():
        found += w.poll()
    t.join()
    t_end = time.monotonic() + 1.5  # files that appeared after the last discovery are found by the next
    while time.monotonic() < t_end:
        found += w.poll()
        time.sleep(0.05)
    w.close()
    assert found == []
    assert all(r.last_issued["0"] == 200 for r in w.state.ranks.values()) and len(w.state.ranks) == 8
    assert max(len(g.calls) for g in w.state.groups.values()) <= 64 + 1  # the window stays small


def test_the_live_view_shows_the_finding_the_positions_and_a_growing_swimlane(tmp_path):
    """``dx.watch(path)`` in a notebook: a widget fed by a background thread, with an HTML fallback."""
    pytest.importorskip("ipywidgets")
    import denpex_nb as dx

    job = Job(tmp_path, 4)
    job.step(1)
    w = dx.watch(str(tmp_path), interval=0.05)
    bundle = w._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert "no finding so far" in bundle["text/html"]  # what a saved page shows without a kernel
    view = w._live
    first_png = view.lane.value
    for r in range(4):  # the job goes on, then rank 3 enters a different op: the view catches up
        job.issue(r, 2, op="broadcast" if r == 3 else "all_reduce")
    t_end = time.monotonic() + 10
    while time.monotonic() < t_end and "op-mismatch" not in view.findings.value:
        time.sleep(0.1)
    view.refresh()
    view.stop()
    assert "op-mismatch" in view.findings.value
    assert "ranks 0" in view.positions.value and "inside" in view.positions.value
    assert view.lane.value and view.lane.value != first_png
    assert not view._thread.is_alive()


def test_cli_says_which_ranks_have_no_trace_yet(tmp_path):
    job = Job(tmp_path, 4)
    job.step(1, ranks=[0, 1])
    res = _cli(str(tmp_path), "--stall", "0.5", "--idle-exit", "1.5")
    assert res.returncode == 0, res.stderr
    assert "no trace yet from ranks 2, 3 of a group of 4 (absent so far)" in res.stderr
