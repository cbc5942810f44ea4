"""``denpex-nb watch`` measured: time to verdict on real hangs, scale, false alarms, idle cost.

    python benchmarks/bench_watch.py                 # hangs + scale + idle (about 6 minutes)
    python benchmarks/bench_watch.py --healthy 10    # also the 10-minute healthy job (0 findings)
    python benchmarks/bench_watch.py --parts "" --healthy 10   # only that

* **hangs**: the gloo reproducers that hang (skipped collective, op mismatch, all_reduce size
  mismatch) at 2 and 4 ranks in hang mode, collective timeout 300 s, ``--rounds`` times each; the
  time from the divergence (the first rank's ``issue`` of the diverging collective, from the
  trace) to the finding. Bars: median <= 3 s, worst <= 5 s.
* **scale**: 1024 simulated ranks' tracer files written at about 1,000 collectives per second in
  all by another process; how far behind the newest written line the watcher is after each poll
  (bar: < 1 s), and the time to name a divergence planted at one rank (bar: within 3 s).
* **healthy** (``--healthy MIN``): a real 4-rank gloo job with jittery steps and a real
  200 MB checkpoint on rank 0 every 10 steps, watched by the CLI: findings (bar: 0) and the
  watcher's memory over the run (flat).
* **idle**: the CLI watching 1024 quiet tracer files for 60 s: CPU share of one core (bar: < 5 %).

Writes ``benchmarks/results/bench_watch.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

HANGS = ["skipped-collective", "op-mismatch", "allreduce-shape-mismatch"]
TICK = os.sysconf("SC_CLK_TCK")


def hangs(rounds: int) -> dict:
    from tests.repro.test_watch_live import watch_hanging

    out = {}
    for scenario in HANGS:
        for ws in (2, 4):
            times = []
            for _ in range(rounds):
                with tempfile.TemporaryDirectory(prefix="denpex-bench-watch-") as tmp:
                    first, alive, result = watch_hanging(scenario, ws, os.path.join(tmp, "run"))
                    since = None if first is None else first.since_divergence_s
                    if first is not None and since is None and result is not None:
                        # a finding from the logs (gloo's abort message) carries no collective time:
                        # measure from the first rank's issue of the planted collective in the trace
                        began = _first_issue(os.path.join(tmp, "run", "trace"), result.manifest["expected"])
                        since = None if began is None else first.detected_wall - began
                times.append(
                    {
                        "since_divergence_s": None if since is None else round(since, 3),
                        "finding_from": None if first is None else first.finding.rule,
                        "summary": None if first is None else first.finding.summary[:200],
                        "class": None if first is None else first.finding.class_id,
                        "culprit": None if first is None else list(first.finding.culprit_ranks),
                        "all_alive": alive,
                        "ended_on_its_own": result is not None and result.manifest["kill_reason"] is None,
                    }
                )
                print(scenario, ws, times[-1], flush=True)
            out[f"{scenario}/w{ws}"] = times
    all_t = [t["since_divergence_s"] for ts in out.values() for t in ts if t["since_divergence_s"] is not None]
    missed = sum(t["class"] is None for ts in out.values() for t in ts)
    return {
        "runs": out,
        "median_s": round(statistics.median(all_t), 3) if all_t else None,
        "worst_s": max(all_t) if all_t else None,
        "missed": missed,
        "job_collective_timeout_s": 300,
    }


def _first_issue(trace_dir: str, expected: dict) -> float | None:
    """The wall time of the first ``issue`` line of the planted collective (its trace seq), any rank."""
    seq, times = expected["seq"]["trace"], []
    for name in os.listdir(trace_dir):
        with open(os.path.join(trace_dir, name)) as fh:
            for line in fh:
                try:
                    d = json.loads(line)
                except ValueError:
                    continue
                if d.get("event") == "issue" and d.get("seq") == seq and d.get("pg") == "0":
                    times.append(d["t_wall"])
    return min(times) if times else None


def _writer(folder: str, ranks: int, rate: float, seconds: float, plant_at: int, plant_rank: int) -> None:
    """Write ``ranks`` tracer files at ``rate`` collectives per second in all; plant one odd shape."""
    fhs = [open(os.path.join(folder, f"denpex_trace_rank{r}.jsonl"), "a", buffering=1 << 16) for r in range(ranks)]
    try:
        for r, fh in enumerate(fhs):
            meta = {"v": 1, "event": "meta", "rank": r, "world_size": ranks, "pid": 1, "host": "sim-node"}
            fh.write(json.dumps(meta) + "\n")
        per_round = ranks / rate
        t0 = time.monotonic()
        seq = 0
        while time.monotonic() - t0 < seconds:
            seq += 1
            start = time.monotonic()
            for r, fh in enumerate(fhs):
                shape = [6] if (seq == plant_at and r == plant_rank) else [8]
                base = {
                    "rank": r,
                    "world_size": ranks,
                    "pg": "0",
                    "pg_desc": "default_pg",
                    "seq": seq,
                    "op": "all_reduce",
                }
                fh.write(
                    json.dumps(
                        {
                            "v": 1,
                            "event": "issue",
                            **base,
                            "in_shapes": [shape],
                            "out_shapes": [shape],
                            "dtypes": ["float32"],
                            "t_wall": time.time(),
                            "t_mono": 0.0,
                        }
                    )
                    + "\n"
                )
                if seq < plant_at:
                    fh.write(json.dumps({"v": 1, "event": "done", **base, "t_wall": time.time(), "t_mono": 0.0}) + "\n")
                fh.flush()
            time.sleep(max(0.0, per_round - (time.monotonic() - start)))
    finally:
        for fh in fhs:
            fh.close()


def scale(ranks: int = 1024, rate: float = 1000.0, seconds: float = 40.0) -> dict:
    from denpex_nb.live import Watcher

    plant_at = int(seconds * rate / ranks * 0.75)
    with tempfile.TemporaryDirectory(prefix="denpex-bench-watch-scale-") as tmp:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-c",
                f"import sys; sys.path.insert(0, {HERE!r}); import bench_watch as b; "
                f"b._writer({tmp!r}, {ranks}, {rate}, {seconds}, {plant_at}, {ranks * 3 // 4})",
            ]
        )
        w = Watcher([tmp], interval=0.25)
        lags, found, planted_at_wall = [], None, None
        cpu0, t0 = time.process_time(), time.monotonic()
        try:
            while proc.poll() is None or found is None:
                polled = w.poll()
                if w.state.newest_wall is not None:
                    lags.append(time.time() - w.state.newest_wall)
                if polled and found is None:
                    found = polled[0]
                if time.monotonic() - t0 > seconds + 20:
                    break
                time.sleep(w.interval)
        finally:
            proc.kill()
            proc.wait()
            w.close()
        cpu = time.process_time() - cpu0
        wall = time.monotonic() - t0
        if found is not None:
            planted_at_wall = found.divergence_wall
    lags.sort()
    return {
        "ranks": ranks,
        "collectives_per_s": rate,
        "seconds": seconds,
        "lag_p50_s": round(lags[len(lags) // 2], 3) if lags else None,
        "lag_p99_s": round(lags[int(len(lags) * 0.99)], 3) if lags else None,
        "lag_max_s": round(lags[-1], 3) if lags else None,
        "planted": {"seq": plant_at, "rank": ranks * 3 // 4},
        "finding": None
        if found is None
        else {"class": found.finding.class_id, "seq": found.finding.seq, "culprit": list(found.finding.culprit_ranks)},
        "time_to_finding_s": None if found is None else round(found.since_divergence_s, 3),
        "divergence_wall": planted_at_wall,
        "watcher_cpu_share": round(cpu / wall, 3),
    }


def _proc_sample(pid: int) -> tuple[float, int]:
    """(CPU seconds, RSS bytes) of a process from /proc."""
    with open(f"/proc/{pid}/stat") as fh:
        f = fh.read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / TICK, int(f[21]) * os.sysconf("SC_PAGE_SIZE")


def idle(seconds: float = 60.0, ranks: int = 1024) -> dict:
    with tempfile.TemporaryDirectory(prefix="denpex-bench-watch-idle-") as tmp:
        _writer(tmp, ranks, 1e9, 0.01, 10**9, 0)
        p = subprocess.Popen(
            [sys.executable, "-m", "denpex_nb.cli", "watch", tmp], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        time.sleep(5)  # start-up and the first read of every file
        c0, _ = _proc_sample(p.pid)
        time.sleep(seconds)
        c1, rss = _proc_sample(p.pid)
        p.send_signal(signal.SIGINT)
        try:
            p.wait(60)
        except subprocess.TimeoutExpired:
            p.kill()
    return {
        "files": ranks,
        "seconds": seconds,
        "cpu_share_of_one_core": round((c1 - c0) / seconds, 4),
        "rss_mb": rss >> 20,
    }


def healthy(minutes: float) -> dict:
    import socket as _s

    with tempfile.TemporaryDirectory(prefix="denpex-bench-watch-healthy-") as tmp:
        trace_dir = os.path.join(tmp, "trace")
        os.makedirs(trace_dir)
        with _s.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        env = dict(
            os.environ,
            MASTER_ADDR="127.0.0.1",
            MASTER_PORT=str(port),
            WORLD_SIZE="4",
            DENPEX_TRACE_DIR=trace_dir,
            OMP_NUM_THREADS="1",
            PYTHONPATH=ROOT,
        )
        ranks = [
            subprocess.Popen(
                [sys.executable, os.path.join(HERE, "_healthy_job.py"), "--minutes", str(minutes), "--ckpt-dir", tmp],
                env=dict(env, RANK=str(r), LOCAL_RANK=str(r)),
            )
            for r in range(4)
        ]
        watch = subprocess.Popen(
            [sys.executable, "-m", "denpex_nb.cli", "watch", trace_dir, "--json"], stdout=subprocess.PIPE, text=True
        )
        samples = []
        lines: list[str] = []
        reader = threading.Thread(target=lambda: lines.extend(watch.stdout), daemon=True)
        reader.start()
        t0 = time.monotonic()
        while any(r.poll() is None for r in ranks):
            try:
                cpu, rss = _proc_sample(watch.pid)
                samples.append((round(time.monotonic() - t0, 1), round(cpu, 2), rss >> 20))
            except OSError:
                pass
            time.sleep(10)
        try:
            watch.wait(120)
        except subprocess.TimeoutExpired:
            watch.send_signal(signal.SIGINT)
            watch.wait(60)
        reader.join(10)
        objs = [json.loads(x) for x in lines if x.strip()]
        findings = [o for o in objs if "final" not in o]
        final = next((o for o in objs if "final" in o), None)
    return {
        "minutes": minutes,
        "findings": len(findings),
        "finding_summaries": [f["summary"] for f in findings],
        "final_verdict": None if final is None else final["final"]["verdict"],
        "rank_exit_codes": [r.returncode for r in ranks],
        "watch_rss_mb_first_last_max": [samples[0][2], samples[-1][2], max(s[2] for s in samples)] if samples else None,
        "watch_cpu_share": round(samples[-1][1] / samples[-1][0], 4) if samples and samples[-1][0] else None,
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--healthy", type=float, default=0.0, help="minutes of the healthy job (0: skip)")
    ap.add_argument("--parts", default="hangs,scale,idle", help="comma-separated: hangs, scale, idle")
    args = ap.parse_args(argv)
    res = {"host": socket.gethostname(), "python": platform.python_version(), "load_average_start": os.getloadavg()}
    parts = {p.strip() for p in args.parts.split(",") if p.strip()}
    if "hangs" in parts:
        res["hangs"] = hangs(args.rounds)
        print("hangs:", {k: res["hangs"][k] for k in ("median_s", "worst_s", "missed")}, flush=True)
    if "scale" in parts:
        res["scale"] = scale()
        print("scale:", res["scale"], flush=True)
    if "idle" in parts:
        res["idle"] = idle()
        print("idle:", res["idle"], flush=True)
    if args.healthy:
        res["healthy"] = healthy(args.healthy)
        print("healthy:", res["healthy"], flush=True)
    res["load_average_end"] = os.getloadavg()
    res["how_" + ("_".join(sorted(parts)) or "healthy")] = " ".join(
        ["python benchmarks/bench_watch.py", *(argv or sys.argv[1:])]
    )
    path = os.path.join(HERE, "results", "bench_watch.json")
    old = json.load(open(path)) if os.path.exists(path) else {}
    old.update(res)
    with open(path, "w") as fh:
        json.dump(old, fh, indent=1, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
