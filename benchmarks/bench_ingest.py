"""Ingest throughput next to ``grep -c -E``, as users run it, with peak memory, in one run.

Two layouts of ~1 GB of multi-rank logs (mostly ordinary training output), side by side:

* ``per_rank``: the tree ``torchrun --log-dir`` writes, 32 nodes x 8 ranks,
  ``node<k>/attempt_0/<local rank>/stdout.log`` and ``stderr.log`` (512 files of ~2 MB: training
  output, a torch UserWarning every 300 steps, Python logging noise, NCCL init lines; at the end
  every rank's watchdog timeout and one rank's traceback);
* ``interleaved``: 256 ranks over 8 node logs (each node's 32 ranks interleaved record by record, as
  a tee'd torchrun output; ~0.2 % distributed lines from real templates).

In ``--repeat`` rounds (default 3), per layout, ``grep -c -E '<the readers' literal needles>'``
(LC_ALL=C) and ``denpex-nb diagnose DIR --json`` (a whole fresh process: interpreter start,
imports, load, diagnose, exit), alternating, page cache warm; ``--baseline CHECKOUT`` times the same
command on an earlier checkout in the same rounds. The figures are medians over the rounds of
grep's wall time over the CLI's (``ratio_to_grep``; CPU times too), with peak RSS of the process
tree (psutil polling). ``--legacy`` also runs the earlier figure (``load(files, jobs=1|2)`` in a
fresh process on the interleaved set; kept in the results as ``logs``).

Also, on request: ``--small 2000 50000`` (N tiny per-rank files: the CLI as a whole process in
``--repeat`` rounds, beside ``--baseline``'s when given, and ``parse_file`` / ``build_incident`` per
file), ``--path-args 10000`` (N tiny files named one by one on the command line), ``--noise-diagnose`` (diagnose of 256 events among 1 M unparsed
lines), ``--empty-lines`` (peak RSS on 200 MB of empty lines and on a bz2 of 512 MiB of them),
``--fr-dumps N`` (load of N Flight Recorder dumps x 2000 entries).

    python benchmarks/bench_ingest.py --small 2000 50000 --noise-diagnose --empty-lines
    python benchmarks/bench_ingest.py --no-logs --small 2000 --path-args 10000 --baseline ../main_checkout
    python benchmarks/bench_ingest.py --size 256      # quicker

Every CLI runs as after ``pip install``: its bytecode cached (:func:`cli_env`), written once before
the timed runs. Results: a table on stdout and ``benchmarks/results/bench_ingest.json`` (sections this run did not
measure are kept). The data lives in ``benchmarks/_data/`` (git-ignored) and is reused.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "_data")
RESULTS = os.path.join(HERE, "results")
#: the checkout this script belongs to: its CLI runs from here (``python -m`` imports from the working directory)
ROOT = os.path.dirname(HERE)

DIST_TEMPLATES = [
    "[rank{r}]:[E1129 22:27:23.883942729 ProcessGroupNCCL.cpp:688] [Rank {r}] Watchdog caught collective operation "
    "timeout: WorkNCCL(SeqNum={s}, OpType=ALLGATHER, NumelIn=8192, NumelOut=65536, Timeout(ms)=600000) ran for "
    "600071 milliseconds before timing out.",
    "[rank{r}]:[E1129 22:27:23.883942729 ProcessGroupNCCL.cpp:2190] [PG ID 0 PG GUID 0(default_pg) Rank {r}]  failure "
    "detected by watchdog at work sequence id: {s} PG status: last enqueued work: {s2}, last completed work: {s0}",
    "[rank{r}]: RuntimeError: Detected mismatch between collectives on ranks. Rank {r} is running collective: "
    "CollectiveFingerPrint(SequenceNumber={s}, OpType=ALLREDUCE, TensorShape=[10, 64], TensorDtypes=Float, "
    "TensorDeviceTypes=TensorOptions(dtype=float (default), device=cpu, layout=Strided (default))), but Rank 0 is "
    "running collective: CollectiveFingerPrint(SequenceNumber={s}, OpType=ALLREDUCE, TensorShape=[12, 64], "
    "TensorDtypes=Float, TensorDeviceTypes=TensorOptions(dtype=float (default), device=cpu, layout=Strided "
    "(default))).Collectives differ in the following aspects:   Tensor Tensor shapes: 10 64vs 12 64",
    "tern-07:61204:61266 [0] NCCL INFO AllGather: opCount {h} sendbuff 0x7f0e52000000 recvbuff 0x7f0e52400000 "
    "count 6144 datatype 7 op 0 root 0 comm 0x5581c0a0 [nranks=8] stream 0x5581b7f0",
    "[rank{r}]: RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:553] Connection "
    "closed by peer [127.0.0.1]:29921. This is typically caused by a remote worker crashing.",
    "[rank{r}]:[E1129 22:37:26.285475132 ProcessGroupGloo.cpp:2901] [Rank 0]: Rank 1 failed to pass "
    "monitoredBarrier in 10000 ms",
    "W1129 22:27:47.979000 10045 torch/distributed/elastic/multiprocessing/api.py:1028] Sending process 10052 "
    "closing signal SIGTERM",
]
TRACEBACK = [
    "[rank{r}]: Traceback (most recent call last):",
    '[rank{r}]:   File "train_lm.py", line 88, in <module>',
    "[rank{r}]:     loss = step(batch)",
    "[rank{r}]: RuntimeError: shapes do not line up in step {s}",
]


def ordinary(rng: random.Random, local: int, i: int) -> str:
    k = rng.random()
    if k < 0.7:
        return (
            f"[default{local}]:step {i} loss={rng.uniform(1.5, 3.5):.4f} lr={rng.uniform(1e-5, 3e-4):.3e} "
            f"grad_norm={rng.uniform(0.1, 5):.3f} tokens/s={rng.randint(9000, 14000)}"
        )
    if k < 0.85:
        return f"[default{local}]:eval step {i} ppl={rng.uniform(5, 40):.2f} acc={rng.random():.4f}"
    if k < 0.95:
        return f"[default{local}]:data: loaded shard {rng.randint(0, 999)}/1000 in {rng.uniform(0.01, 2):.3f}s"
    return f"[default{local}]:checkpoint: saved optimizer state to ckpt/step_{i}.pt ({rng.randint(1, 900)} MB)"


def make_records(r: int, local: int, seed: int, target: int, share: float) -> list[bytes]:
    """About ``target`` bytes of global rank r's output (torchrun's ``[default<local>]:`` on its ordinary
    lines, torch's ``[rank<r>]:`` on the distributed ones) with ``share`` distributed lines, as records
    (one line, or a whole traceback) that end in a newline."""
    rng = random.Random(seed)
    records, size, i = [], 0, 0
    while size < target:
        i += 1
        if rng.random() < share:
            if rng.random() < 0.25:
                block = [t.format(r=r, s=i) for t in TRACEBACK]
            else:
                block = [rng.choice(DIST_TEMPLATES).format(r=r, s=i, s2=i + 2, s0=i - 1, h=format(i, "x"))]
        else:
            block = [ordinary(rng, local, i)]
        rec = ("\n".join(block) + "\n").encode()
        records.append(rec)
        size += len(rec)
    return records


def interleave(per_rank: list[list[bytes]]) -> bytes:
    """The records of several ranks as one node's tee'd output: one record of each rank in turn."""
    out = []
    for k in range(max(map(len, per_rank))):
        out.extend(recs[k] for recs in per_rank if k < len(recs))
    return b"".join(out)


def generate(size_mb: int, n_files: int, share: float, n_ranks: int = 256) -> list[str]:
    """``n_ranks`` ranks over ``n_files`` node logs (ranks ``f * n_ranks / n_files`` ... of file f, their
    records interleaved as a node's tee'd output), ``size_mb`` MB in all."""
    if n_ranks % n_files:
        raise SystemExit(f"--ranks {n_ranks} is not a multiple of --files {n_files}")
    folder = os.path.join(DATA, f"logs_{size_mb}mb_{n_files}f_{n_ranks}r")
    stamp = os.path.join(folder, ".complete")
    files = [os.path.join(folder, f"node{f}.log") for f in range(n_files)]
    if os.path.exists(stamp):
        return files
    os.makedirs(folder, exist_ok=True)
    per_file = size_mb * (1 << 20) // n_files
    per_node = n_ranks // n_files
    # 2 distinct units per node of at most 8 MB (each rank's share of it generated apart), written in turn:
    # realistic lines, fast to generate (the whole set generates ~2 x 8 MB x n_files of lines)
    unit = min(8 << 20, max(per_file // 2, 1 << 16))
    for f, path in enumerate(files):
        ranks = range(f * per_node, (f + 1) * per_node)
        units = [
            interleave(
                [make_records(r, r - ranks[0], seed=r * 100 + k, target=unit // per_node, share=share) for r in ranks]
            )
            for k in range(2)
        ]
        written, k = 0, 0
        with open(path, "wb") as fh:
            while written < per_file:
                b = units[k % len(units)]
                fh.write(b)
                written += len(b)
                k += 1
    open(stamp, "w").close()
    return files


NOISE_ERR = [
    "{d} 22:{m:02d}:{s:02d},{ms:03d} - INFO - dataloader - worker {w} prefetched {n} batches",
    "{d} 22:{m:02d}:{s:02d},{ms:03d} - WARNING - trainer - gradient overflow, skipping step {n}",
    "{d} 22:{m:02d}:{s:02d},{ms:03d} - INFO - trainer - throughput {n} samples/s, mem {w} GB",
]
#: a warning torch repeats every few hundred steps (its "Warning: " is a reader needle: a candidate
#: line no reader keeps, as real noise has)
WARNING_LINES = [
    "/opt/venv/lib/python3.11/site-packages/torch/utils/checkpoint.py:91: UserWarning: None of the inputs "
    "have requires_grad=True. Gradients will be None",
    "  warnings.warn(",
]
NCCL_INIT = [
    "node{k}:{pid}:{pid} [{lr}] NCCL INFO Bootstrap : Using eth0:10.0.{k}.1<0>",
    "node{k}:{pid}:{pid} [{lr}] NCCL INFO cudaDriverVersion 12040",
    "node{k}:{pid}:{pid} [{lr}] NCCL INFO comm 0x55d1c0a0 rank {r} nRanks {n} nNodes {nodes} localRanks 8 "
    "localRank {lr} MNNVL 0",
]
FAILURE = [
    "[rank{r}]:[E1201 22:59:41.883942729 ProcessGroupNCCL.cpp:688] [Rank {r}] Watchdog caught collective "
    "operation timeout: WorkNCCL(SeqNum=48213, OpType=ALLREDUCE, NumelIn=25165824, NumelOut=25165824, "
    "Timeout(ms)=600000) ran for 600071 milliseconds before timing out.",
    "[rank{r}]:[E1201 22:59:41.884012110 ProcessGroupNCCL.cpp:2190] [PG ID 0 PG GUID 0(default_pg) Rank {r}]  "
    "failure detected by watchdog at work sequence id: 48213 PG status: last enqueued work: 48213, last "
    "completed work: 48212",
]
CULPRIT = [
    "Traceback (most recent call last):",
    '  File "/workspace/train_lm.py", line 214, in <module>',
    "    main()",
    '  File "/workspace/train_lm.py", line 188, in main',
    "    batch = next(loader)",
    "RuntimeError: CUDA error: an illegal memory access was encountered",
]


def _per_rank_bodies(r: int, k: int, lr: int, n_ranks: int, nodes: int, unit: int) -> tuple[bytes, bytes, bytes, bytes]:
    """(stdout head, stdout unit, stderr unit, stderr tail) of global rank ``r`` (node ``k``)."""
    rng = random.Random(r)
    pid = 40000 + r
    head = "".join(t.format(k=k, pid=pid, lr=lr, r=r, n=n_ranks, nodes=nodes) + "\n" for t in NCCL_INIT)
    out, err, size, i = [], [], 0, 0
    while size < unit:
        i += 1
        line = ordinary(rng, lr, i).split("]:", 1)[1] + "\n"  # no torchrun tag in a --log-dir file
        out.append(line)
        size += len(line)
        if i % 300 == 0:
            out.append("\n".join(WARNING_LINES) + "\n")
        t = rng.choice(NOISE_ERR)
        err.append(
            t.format(
                d="2026-12-01",
                m=rng.randrange(60),
                s=rng.randrange(60),
                ms=rng.randrange(1000),
                w=rng.randrange(8),
                n=rng.randrange(10000),
            )
            + "\n"
        )
    tail = "".join(t.format(r=r) + "\n" for t in (CULPRIT if r == n_ranks // 3 else FAILURE))
    return head.encode(), "".join(out).encode(), "".join(err).encode(), tail.encode()


def generate_per_rank(size_mb: int, nodes: int, per_node: int) -> list[str]:
    """The tree ``torchrun --log-dir`` writes, one per node: ``node<k>/attempt_0/<local>/stdout.log``
    and ``stderr.log``, ``nodes * per_node`` ranks, ``size_mb`` MB in all: an incident as users have
    it. stdout holds NCCL's init lines and the training output (with a torch UserWarning now and
    then), stderr Python logging noise; at the end every rank's watchdog timeout, and one rank's
    traceback (the crash the others wait for)."""
    folder = os.path.join(DATA, f"perrank_{size_mb}mb_{nodes}n_{per_node}r")
    stamp = os.path.join(folder, ".complete")
    files = [
        os.path.join(folder, f"node{k}", "attempt_0", str(lr), name)
        for k in range(nodes)
        for lr in range(per_node)
        for name in ("stdout.log", "stderr.log")
    ]
    if os.path.exists(stamp):
        return files
    n_ranks = nodes * per_node
    per_file = size_mb * (1 << 20) // len(files)
    unit = min(per_file, 256 << 10)  # distinct bytes per file, written over and over to its size
    for k in range(nodes):
        for lr in range(per_node):
            r = k * per_node + lr
            head, out, err, tail = _per_rank_bodies(r, k, lr, n_ranks, nodes, unit)
            d = os.path.join(folder, f"node{k}", "attempt_0", str(lr))
            os.makedirs(d, exist_ok=True)
            for name, first, body, last in (("stdout.log", head, out, b""), ("stderr.log", b"", err, tail)):
                with open(os.path.join(d, name), "wb") as fh:
                    fh.write(first)
                    for _ in range(max(1, -(-(per_file - len(first) - len(last)) // len(body)))):
                        fh.write(body)
                    fh.write(last)
    open(stamp, "w").close()
    return files


def grep_pattern() -> str:
    sys.path.insert(0, os.path.dirname(HERE))
    from denpex_nb.ingest.parse import all_text_readers

    needles = sorted({n for r in all_text_readers() for n in r.needles})
    return "|".join(re.escape(n.decode()).replace("\\ ", " ") for n in needles)


class PeakRSS:
    """Poll the RSS of a process tree (sum over the tree) every 20 ms; keep the maximum."""

    def __init__(self, pid: int):
        import psutil

        self.proc = psutil.Process(pid)
        self.peak = 0
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def _run(self):
        import psutil

        while not self._stop.is_set():
            try:
                procs = [self.proc] + self.proc.children(recursive=True)
                total = 0
                for p in procs:
                    try:
                        total += p.memory_info().rss
                    except psutil.Error:
                        pass
                self.peak = max(self.peak, total)
            except psutil.Error:
                break
            time.sleep(0.02)

    def stop(self) -> int:
        self._stop.set()
        self._t.join(timeout=2)
        return self.peak


def timed(cmd: list[str], env=None, timeout=1800, cwd=None) -> tuple[float, int, str]:
    """Run ``cmd``; (wall seconds, peak tree RSS bytes, stdout). CPU seconds of the finished tree go
    to ``timed.last_cpu_s`` (RUSAGE_CHILDREN counts reaped grandchildren, e.g. pool workers)."""
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    p = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, start_new_session=True, cwd=cwd
    )
    mon = PeakRSS(p.pid)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, 9)
        p.communicate()
        raise
    wall = time.perf_counter() - t
    peak = mon.stop()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    timed.last_cpu_s = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if p.returncode not in (0, 1):  # grep -c exits 1 when there is no match
        raise RuntimeError(f"{cmd[:3]} failed: {err[-2000:]}")
    return wall, peak, out


LOAD_SNIPPET = """
import json, sys, time, warnings
warnings.simplefilter("ignore")
t0 = time.perf_counter()
import denpex_nb
from denpex_nb.ingest.scan import NeedleMatcher
t1, c1 = time.perf_counter(), time.process_time()
inc = denpex_nb.load(*sys.argv[2:], jobs=int(sys.argv[1]), progress=False)
t2, c2 = time.perf_counter(), time.process_time()
lc = inc.lines
print(json.dumps({"import_s": t1 - t0, "load_s": t2 - t1, "load_cpu_main_s": c2 - c1,
                  "events": len(inc.events), "errors": len(inc.errors),
                  "lines": lc.total, "parsed": lc.parsed, "unparsed_rows": len(inc.unparsed),
                  "ranks_seen": len(set(inc.events["rank"].dropna()) | set(inc.errors["rank"].dropna()))}))
"""


def _median(xs: list[float]) -> float:
    xs = sorted(xs)
    n = len(xs)
    return xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2


def bench_logs(args) -> dict:
    """``args.repeat`` rounds; each runs grep and then every ``load(jobs=...)``, side by side, each in a
    fresh process. Ratios are taken within a round (the same machine load for both), their median
    over the rounds is the figure."""
    files = generate(args.size, args.files, args.share, args.ranks)
    total = sum(os.path.getsize(f) for f in files)
    mb = total / (1 << 20)
    pattern = grep_pattern()
    env = dict(os.environ, LC_ALL="C")
    # warm the page cache so every contender reads from memory
    subprocess.run(["cat", *files], stdout=subprocess.DEVNULL, check=True)
    rounds = []
    for _ in range(max(1, args.repeat)):
        g_wall, g_rss, g_out = timed(["grep", "-c", "-E", pattern, *files], env=env)
        g_cpu = timed.last_cpu_s
        grep_hits = sum(int(line.rsplit(":", 1)[-1]) for line in g_out.split())
        runs = {}
        for jobs in args.jobs:
            wall, rss, out = timed([sys.executable, "-c", LOAD_SNIPPET, str(jobs), *files], cwd=ROOT)
            info = json.loads(out.strip().splitlines()[-1])
            runs[jobs] = dict(
                info,
                wall_s=wall,
                cpu_s=timed.last_cpu_s,
                peak_rss_mb=rss / (1 << 20),
                mb_per_s=mb / info["load_s"],
                process_mb_per_s=mb / wall,
            )
        rnd = {
            "grep": {"wall_s": g_wall, "cpu_s": g_cpu, "peak_rss_mb": g_rss / (1 << 20), "matching_lines": grep_hits},
            "load": runs,
        }
        one = runs.get(1)
        if one:
            # the bar: whole fresh processes (interpreter start, imports, load, exit) against grep's
            rnd["ratio_process"] = g_wall / one["wall_s"]
            # the load call alone (no interpreter start, no imports)
            rnd["ratio_load_call"] = g_wall / one["load_s"]
            # on a shared machine wall time mixes in other people's work; CPU time does not
            rnd["ratio_cpu_time"] = g_cpu / one["cpu_s"]
        rounds.append(rnd)
        print(
            f"round {len(rounds)}: grep {g_wall:.2f} s"
            + "".join(
                f", load(jobs={j}) {r['wall_s']:.2f} s process / {r['load_s']:.2f} s load, {r['peak_rss_mb']:.0f} MB"
                for j, r in runs.items()
            )
            + (f", ratio {rnd['ratio_process']:.3f}" if one else ""),
            file=sys.stderr,
        )
    r3 = lambda v: round(v, 3) if isinstance(v, float) else v  # noqa: E731
    med = lambda xs: round(_median(xs), 3)  # noqa: E731
    g_walls = [r["grep"]["wall_s"] for r in rounds]
    res = {
        "input_mb": round(mb, 1),
        "files": len(files),
        "ranks": args.ranks,
        "distributed_share": args.share,
        "cpus": os.cpu_count(),
        "rounds": len(rounds),
        "grep": {
            "wall_s": med(g_walls),
            "cpu_s": med([r["grep"]["cpu_s"] for r in rounds]),
            "mb_per_s": round(mb / _median(g_walls), 1),
            "peak_rss_mb": med([r["grep"]["peak_rss_mb"] for r in rounds]),
            "matching_lines": rounds[0]["grep"]["matching_lines"],
            "pattern_alternatives": pattern.count("|") + 1,
        },
        "load": {},
    }
    for j in args.jobs:
        rs = [r["load"][j] for r in rounds]
        summary = {
            k: med([x[k] for x in rs])
            for k in ("import_s", "load_s", "load_cpu_main_s", "wall_s", "cpu_s", "mb_per_s", "process_mb_per_s")
        }
        summary.update({k: rs[0][k] for k in ("events", "errors", "lines", "parsed", "unparsed_rows", "ranks_seen")})
        summary["peak_rss_mb"] = round(max(x["peak_rss_mb"] for x in rs), 1)  # the worst round
        res["load"][str(j)] = summary
    if 1 in args.jobs:
        for key in ("ratio_process", "ratio_load_call", "ratio_cpu_time"):
            res[f"{key}_median"] = med([r[key] for r in rounds])
            res[f"{key}_rounds"] = [round(r[key], 3) for r in rounds]
        res["ratio_to_grep_1_core"] = res["ratio_process_median"]  # the bar's figure (issue 11)
        if 2 in args.jobs:
            res["speedup_2_processes"] = round(
                _median([r["load"][1]["load_s"] / r["load"][2]["load_s"] for r in rounds]), 2
            )
    res["rounds_detail"] = [
        {
            "grep": {k: r3(v) for k, v in r["grep"].items()},
            "load": {
                str(j): {
                    k: r3(v) for k, v in x.items() if k in ("import_s", "load_s", "wall_s", "cpu_s", "peak_rss_mb")
                }
                for j, x in r["load"].items()
            },
        }
        for r in rounds
    ]
    return res


CLI = [sys.executable, "-m", "denpex_nb.cli", "diagnose"]


def bench_cli_layouts(args) -> dict:
    """Both layouts side by side, as users run it: ``denpex-nb diagnose DIR --json`` in a fresh
    process against ``grep -c -E`` on the same files, page cache warm, ``args.repeat`` rounds in
    which grep and the CLI alternate on one layout, then on the other. The figures are the medians
    over the rounds of grep's wall time over the CLI's (and of CPU times), with the CLI's peak RSS."""
    layouts = {
        "per_rank": (generate_per_rank(args.size, 32, 8), os.path.join(DATA, f"perrank_{args.size}mb_32n_8r")),
        "interleaved": (generate(args.size, args.files, args.share, args.ranks), None),
    }
    pattern = grep_pattern()
    env = dict(os.environ, LC_ALL="C")
    rounds: dict[str, list] = {k: [] for k in layouts}
    loads: list[float] = []
    for files, _ in layouts.values():
        subprocess.run(["cat", *files], stdout=subprocess.DEVNULL, check=True)  # warm the page cache
    for root in [ROOT] + ([args.baseline] if args.baseline else []):  # bytecode written once, untimed
        timed([*CLI, _tiny_folder(2000), "--json"], env=cli_env(root), cwd=root)
    for _ in range(max(1, args.repeat)):
        for name, (files, folder) in layouts.items():
            g_wall, _, _ = timed(["grep", "-c", "-E", pattern, *files], env=env)
            g_cpu = timed.last_cpu_s
            target = [folder] if folder else files
            c_wall, c_rss, out = timed([*CLI, *target, "--json"], env=cli_env(ROOT), cwd=ROOT)
            c_cpu = timed.last_cpu_s
            d = json.loads(out)
            base = {}
            if args.baseline:  # the same command on an earlier checkout, in the same round
                # run from the checkout: ``python -m`` puts the working directory first on sys.path,
                # before PYTHONPATH (run from here, the "baseline" imported this checkout's code)
                b_wall, b_rss, b_out = timed([*CLI, *target, "--json"], env=cli_env(args.baseline), cwd=args.baseline)
                b_cpu = timed.last_cpu_s
                base = {
                    "baseline_same_json": _same_diagnosis(b_out, out),
                    "baseline_cpu_s": b_cpu,
                    "baseline_wall_s": b_wall,
                    "baseline_peak_rss_mb": b_rss / (1 << 20),
                    "baseline_ratio": g_wall / b_wall,
                }
            loads.append(round(os.getloadavg()[0], 1))
            rounds[name].append(
                {
                    **base,
                    "grep_wall_s": g_wall,
                    "grep_cpu_s": g_cpu,
                    "cli_wall_s": c_wall,
                    "cli_cpu_s": c_cpu,
                    "cli_peak_rss_mb": c_rss / (1 << 20),
                    "ratio": g_wall / c_wall,
                    "ratio_cpu": g_cpu / c_cpu,
                    "verdict": d["verdict"],
                    "ranks_seen": len(d["ranks_seen"]),
                    "lines": d["lines"]["total"],
                }
            )
            r = rounds[name][-1]
            print(
                f"{name}: grep {g_wall:.2f} s, denpex-nb diagnose {c_wall:.2f} s ({r['cli_peak_rss_mb']:.0f} MB), "
                f"ratio {r['ratio']:.3f} (CPU {r['ratio_cpu']:.3f}), load average {os.getloadavg()[0]:.1f}"
                + (f"; baseline {base['baseline_wall_s']:.2f} s, CPU {base['baseline_cpu_s']:.2f} s" if base else ""),
                file=sys.stderr,
            )
    med = lambda xs: round(_median(xs), 3)  # noqa: E731
    res = {}
    for name, rs in rounds.items():
        files = layouts[name][0]
        res[name] = {
            "files": len(files),
            "input_mb": round(sum(os.path.getsize(f) for f in files) / (1 << 20), 1),
            "grep_wall_s": med([r["grep_wall_s"] for r in rs]),
            "cli_wall_s": med([r["cli_wall_s"] for r in rs]),
            "ratio_to_grep": med([r["ratio"] for r in rs]),
            "ratio_rounds": [round(r["ratio"], 3) for r in rs],
            "ratio_cpu_time": med([r["ratio_cpu"] for r in rs]),
            "grep_cpu_s": med([r["grep_cpu_s"] for r in rs]),
            "cli_cpu_s": med([r["cli_cpu_s"] for r in rs]),
            "cli_peak_rss_mb": round(max(r["cli_peak_rss_mb"] for r in rs), 1),
            "verdict": rs[0]["verdict"],
            "ranks_seen": rs[0]["ranks_seen"],
            "lines": rs[0]["lines"],
        }
        if args.baseline:
            res[name]["baseline"] = {
                "checkout": args.baseline,
                "cli_wall_s": med([r["baseline_wall_s"] for r in rs]),
                "cli_cpu_s": med([r["baseline_cpu_s"] for r in rs]),
                "ratio_to_grep": med([r["baseline_ratio"] for r in rs]),
                "ratio_rounds": [round(r["baseline_ratio"], 3) for r in rs],
                "cli_peak_rss_mb": round(max(r["baseline_peak_rss_mb"] for r in rs), 1),
                "same_json": all(r["baseline_same_json"] for r in rs),
            }
    res["command"] = "denpex-nb diagnose DIR --json (python -m denpex_nb.cli), fresh process, vs grep -c -E"
    res["bytecode"] = "cached (as after pip install; see cli_env)"
    res["load_average_rounds"] = loads
    return res


SMALL_SNIPPET = """
import json, sys, time, warnings
warnings.simplefilter("ignore")
t0 = time.perf_counter()
import denpex_nb
from denpex_nb.ingest.sources import expand
from denpex_nb.ingest.parse import parse_file
from denpex_nb.ingest.assemble import build_incident
specs, _ = expand([sys.argv[1]])
opts = dict(unparsed_text_budget_per_file=16 << 10)
parse_file(specs[0], opts)
t1, c1 = time.perf_counter(), time.process_time()
results = [parse_file(s, opts) for s in specs]
t2, c2 = time.perf_counter(), time.process_time()
build_incident(results)
t3, c3 = time.perf_counter(), time.process_time()
print(json.dumps({"parse_ms_per_file": (t2 - t1) / len(specs) * 1e3,
                  "build_ms_per_file": (t3 - t2) / len(specs) * 1e3,
                  "parse_cpu_ms_per_file": (c2 - c1) / len(specs) * 1e3,
                  "build_cpu_ms_per_file": (c3 - c2) / len(specs) * 1e3}))
"""


def _tiny_folder(n: int) -> str:
    """``n`` tiny per-rank files (3 lines, one a watchdog timeout), made once in ``_data``."""
    folder = os.path.join(DATA, f"tiny_{n}")
    if not os.path.exists(os.path.join(folder, ".complete")):
        os.makedirs(folder, exist_ok=True)
        for r in range(n):
            with open(os.path.join(folder, f"rank_{r}.log"), "w") as f:
                f.write(f"step 1 loss=2.0\n{DIST_TEMPLATES[0].format(r=r, s=5)}\nbye\n")
        open(os.path.join(folder, ".complete"), "w").close()
    return folder


def cli_env(root: str) -> dict:
    """The environment the CLI of checkout ``root`` runs in, as after ``pip install``: its modules
    imported from ``root``, their bytecode cached (pip compiles it at install; a session that sets
    ``PYTHONDONTWRITEBYTECODE`` would make every run compile ~60 modules from source, ~0.15 s). The
    cache lives in ``_data/pycache`` (a folder per checkout), never in the tree."""
    import hashlib

    env = dict(os.environ, PYTHONPATH=root)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    tag = hashlib.sha1(os.path.realpath(root).encode()).hexdigest()[:10]
    env["PYTHONPYCACHEPREFIX"] = os.path.join(DATA, "pycache", tag)
    return env


def bench_small_files(counts: list[int], repeat: int = 1, baseline: str | None = None, args_n: int = 0) -> dict:
    """Many tiny per-rank files, as whole CLI processes (``denpex-nb diagnose DIR --json``; with
    ``args_n``, also ``N`` files named one by one on the command line, as ``diagnose logs/*.log``
    does), ``repeat`` rounds, alternating with the ``baseline`` checkout's CLI when given; wall and
    CPU seconds of the process tree (medians), peak RSS, the load average of each round. Also the
    per-file cost of ``parse_file`` and ``build_incident`` in one warm process (this checkout)."""
    cases = [(str(n), [_tiny_folder(n)]) for n in counts]
    if args_n:
        src = _tiny_folder(max(args_n, 2000))
        cases.append((f"{args_n}_path_arguments", [os.path.join(src, f"rank_{r}.log") for r in range(args_n)]))
    roots = [("cli", ROOT)] + ([("baseline", baseline)] if baseline else [])
    for _, root in roots:  # the bytecode written once, outside the timed runs
        timed([*CLI, cases[0][1][0], "--json"], env=cli_env(root), cwd=root)
    res = {}
    for name, target in cases:
        rounds: dict[str, list] = {k: [] for k, _ in roots}
        loads = []
        outs = {}
        for _ in range(max(1, repeat)):
            for key, root in roots:
                wall, rss, out = timed([*CLI, *target, "--json"], env=cli_env(root), cwd=root, timeout=3600)
                rounds[key].append((wall, timed.last_cpu_s, rss / (1 << 20)))
                outs[key] = out
            loads.append(round(os.getloadavg()[0], 1))
        entry: dict = {
            "inputs": len(target) if len(target) > 1 else int(name),
            "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "load_average_rounds": loads,
        }
        for key, rs in rounds.items():
            fig = {
                "wall_s": round(_median([r[0] for r in rs]), 2),
                "cpu_s": round(_median([r[1] for r in rs]), 2),
                "wall_rounds": [round(r[0], 2) for r in rs],
                "cpu_rounds": [round(r[1], 2) for r in rs],
                "peak_rss_mb": round(max(r[2] for r in rs), 1),
            }
            if key == "cli":
                entry.update({f"cli_{k}": v for k, v in fig.items()})
                entry["verdict"] = json.loads(outs[key])["verdict"]
            else:
                entry["baseline"] = dict(fig, checkout=baseline, same_json=_same_diagnosis(outs[key], outs["cli"]))
        if name.isdigit():
            _, _, per = timed([sys.executable, "-c", SMALL_SNIPPET, target[0]], env=cli_env(ROOT), cwd=ROOT)
            entry.update({k: round(v, 3) for k, v in json.loads(per).items()})
        res[name] = entry
        print(f"{name} tiny files: {entry}", file=sys.stderr)
    return res


def _same_diagnosis(a: str, b: str) -> bool:
    """Do two ``diagnose --json`` outputs say the same (timings, which differ, aside)?"""

    def strip(o):
        if isinstance(o, dict):
            return {k: strip(v) for k, v in o.items() if not k.endswith(("_s", "_ms", "seconds"))}
        if isinstance(o, list):
            return [strip(v) for v in o]
        return o

    return strip(json.loads(a)) == strip(json.loads(b))


NOISE_DIAG_SNIPPET = """
import json, sys, time, warnings
warnings.simplefilter("ignore")
import denpex_nb
inc = denpex_nb.load(sys.argv[1], progress=False)
denpex_nb.diagnose(inc)
ts, cs = [], []
for _ in range(3):
    t, c = time.perf_counter(), time.process_time()
    d = denpex_nb.diagnose(inc)
    ts.append(time.perf_counter() - t)
    cs.append(time.process_time() - c)
print(json.dumps({"diagnose_s": sorted(ts)[1], "diagnose_cpu_s": sorted(cs)[1], "events": len(inc.events), "errors": len(inc.errors),
                  "unparsed_lines": inc.lines.unparsed, "unparsed_rows": len(inc.unparsed),
                  "verdict": d.verdict}))
"""


def bench_diagnose_noise() -> dict:
    """diagnose() (median of 3, warm; wall and CPU seconds: on a shared machine the wall time is
    mostly waiting for a core) of an incident with 256 events (one watchdog timeout per rank,
    one per file) among 1 M unparsed lines."""
    folder = os.path.join(DATA, "noise_256r_1m")
    if not os.path.exists(os.path.join(folder, ".complete")):
        os.makedirs(folder, exist_ok=True)
        rng = random.Random(3)
        for r in range(256):
            with open(os.path.join(folder, f"rank_{r}.log"), "w") as f:
                f.write("".join(ordinary(rng, 0, i).split("]:", 1)[1] + "\n" for i in range(3906)))
                f.write(FAILURE[0].format(r=r) + "\n")
        open(os.path.join(folder, ".complete"), "w").close()
    _, rss, out = timed([sys.executable, "-c", NOISE_DIAG_SNIPPET, folder], cwd=ROOT)
    return dict(json.loads(out), peak_rss_mb=round(rss / (1 << 20), 1), load_average=round(os.getloadavg()[0], 1))


def bench_empty_lines(mb: int = 200) -> dict:
    """Peak RSS of the CLI on ``mb`` MB of empty lines, plain and as a bz2 of 512 MiB of them."""
    import bz2

    plain = os.path.join(DATA, f"empty_{mb}mb.log")
    packed = os.path.join(DATA, "empty_512mib.log.bz2")
    if not os.path.exists(plain):
        with open(plain, "wb") as f:
            for _ in range(mb):
                f.write(b"\n" * (1 << 20))
    if not os.path.exists(packed):
        c = bz2.BZ2Compressor()
        with open(packed, "wb") as f:
            for _ in range(512):
                f.write(c.compress(b"\n" * (1 << 20)))
            f.write(c.flush())
    res = {}
    for name, path in (("plain", plain), ("bz2_512mib", packed)):
        wall, rss, out = timed([*CLI, path, "--json"], cwd=ROOT)
        res[name] = {
            "wall_s": round(wall, 2),
            "peak_rss_mb": round(rss / (1 << 20), 1),
            "verdict": json.loads(out)["verdict"],
        }
    return res


FR_SNIPPET = """
import json, sys, time, warnings
warnings.simplefilter("ignore")
import denpex_nb
t = time.perf_counter()
inc = denpex_nb.load(sys.argv[1], progress=False)
print(json.dumps({"load_s": time.perf_counter() - t, "events": len(inc.events)}))
"""


def bench_fr(n_dumps: int) -> dict:
    import pickle

    folder = os.path.join(DATA, f"fr_{n_dumps}")
    fixture = os.path.join(os.path.dirname(HERE), "tests", "ingest", "data", "fr", "comm_lib_trace_rank_0")
    if not os.path.exists(os.path.join(folder, ".complete")):
        os.makedirs(folder, exist_ok=True)
        src = pickle.load(open(fixture, "rb"))
        proto = src["entries"]
        for r in range(n_dumps):
            entries = [
                dict(
                    proto[i % len(proto)],
                    frames=[],
                    collective_seq_id=i + 1,
                    record_id=i,
                    time_created_ns=proto[0]["time_created_ns"] + i * 1000,
                )
                for i in range(2000)
            ]
            with open(os.path.join(folder, f"comm_lib_trace_rank_{r}"), "wb") as f:
                pickle.dump(dict(src, entries=entries), f, protocol=2)
        open(os.path.join(folder, ".complete"), "w").close()
    wall, rss, out = timed([sys.executable, "-c", FR_SNIPPET, folder], cwd=ROOT)
    info = json.loads(out.strip().splitlines()[-1])
    return {
        "dumps": n_dumps,
        "entries_per_dump": 2000,
        "load_s": round(info["load_s"], 2),
        "events": info["events"],
        "process_wall_s": round(wall, 2),
        "process_tree_cpu_s": round(timed.last_cpu_s, 2),
        "peak_rss_mb": round(rss / (1 << 20), 1),
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", type=int, default=1024, help="total MB of logs (default 1024)")
    ap.add_argument("--files", type=int, default=8, help="node logs the ranks are spread over (default 8)")
    ap.add_argument("--ranks", type=int, default=256, help="ranks in the set (default 256)")
    ap.add_argument("--repeat", type=int, default=3, help="rounds of grep + load side by side (default 3)")
    ap.add_argument("--share", type=float, default=0.002, help="share of distributed lines")
    ap.add_argument("--jobs", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--fr-dumps", type=int, default=0, help="also time N FR dumps x 2000 entries")
    ap.add_argument("--results", help="where the JSON goes (default benchmarks/results/bench_ingest.json)")
    ap.add_argument("--no-logs", action="store_true", help="skip the log benchmark")
    ap.add_argument("--baseline", help="a checkout (its root) to time the same CLI on, side by side")
    ap.add_argument("--legacy", action="store_true", help="also the earlier load(jobs=...) figure (interleaved only)")
    ap.add_argument("--no-layouts", action="store_true", help="skip the CLI per-rank / interleaved comparison")
    ap.add_argument("--small", type=int, nargs="*", default=None, help="tiny-file counts (e.g. 2000 50000)")
    ap.add_argument(
        "--path-args", type=int, default=0, help="also N tiny files named one by one on the command line (e.g. 10000)"
    )
    ap.add_argument("--noise-diagnose", action="store_true", help="diagnose of 256 events among 1 M unparsed lines")
    ap.add_argument("--empty-lines", action="store_true", help="peak RSS on 200 MB of empty lines (and a bz2)")
    args = ap.parse_args(argv)
    res: dict = {"when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    try:
        res["load_average"] = os.getloadavg()
    except OSError:
        pass
    if not args.no_logs and not args.no_layouts:
        res["layouts"] = dict(bench_cli_layouts(args), when=res["when"], load_average=list(os.getloadavg()))
    if not args.no_logs and args.legacy:
        res["logs"] = dict(bench_logs(args), when=res["when"], load_average=res.get("load_average"))
    if args.small or args.path_args:
        res["small_files"] = dict(
            bench_small_files(args.small or [], args.repeat, args.baseline, args.path_args),
            when=res["when"],
            bytecode="cached (as after pip install; see cli_env)",
        )
    if args.noise_diagnose:
        res["diagnose_noise"] = bench_diagnose_noise()
    if args.empty_lines:
        res["empty_lines"] = bench_empty_lines()
    if args.fr_dumps:
        res["flight_recorder"] = dict(bench_fr(args.fr_dumps), when=res["when"], load_average=list(os.getloadavg()))
    os.makedirs(RESULTS, exist_ok=True)
    path = args.results or os.path.join(RESULTS, "bench_ingest.json")
    res["argv"] = "python " + " ".join(sys.argv)
    try:  # keep the sections this run did not measure, and the earlier figures of those it did
        with open(path) as f:
            old = json.load(f)
    except (OSError, ValueError):
        old = {}
    history = old.get("history", [])
    replaced = {k: old[k] for k in res if k in old and k not in ("when", "load_average", "argv", "history")}
    if replaced:
        history.append(dict(replaced, replaced_by_run_of=res["when"]))
    if isinstance(old.get("small_files"), dict) and "small_files" in res:  # counts not measured now stay
        res["small_files"] = dict(
            {k: v for k, v in old["small_files"].items() if isinstance(v, dict)}, **res["small_files"]
        )
    res = dict(old, **res)
    if history:
        res["history"] = history
    with open(path, "w") as f:
        json.dump(res, f, indent=2)
    rows = []
    if "logs" in res:
        lg = res["logs"]
        rows.append(
            [
                "grep -c -E (LC_ALL=C)",
                f"{lg['grep']['wall_s']:.2f}",
                f"{lg['grep']['cpu_s']:.2f}",
                f"{lg['grep']['mb_per_s']:.0f}",
                f"{lg['grep'].get('peak_rss_mb', 0):.0f}",
                "-",
            ]
        )
        for j, r in lg["load"].items():
            rows.append(
                [
                    f"denpex_nb.load jobs={j} (process)",
                    f"{r.get('wall_s', 0):.2f}",
                    f"{r['cpu_s']:.2f}",
                    f"{r.get('process_mb_per_s', 0):.0f}",
                    f"{r['peak_rss_mb']:.0f}",
                    "-",
                ]
            )
            rows.append(
                [
                    f"denpex_nb.load jobs={j} (call)",
                    f"{r['load_s']:.2f}",
                    "-",
                    f"{r['mb_per_s']:.0f}",
                    f"{r['peak_rss_mb']:.0f}",
                    f"{r['events']} ev / {r['errors']} err",
                ]
            )
    if "flight_recorder" in res:
        fr = res["flight_recorder"]
        rows.append(
            [
                f"FR {fr['dumps']} dumps x 2000",
                f"{fr['load_s']:.2f}",
                f"{fr.get('process_tree_cpu_s', '-')}",
                "-",
                f"{fr['peak_rss_mb']:.0f}",
                f"{fr['events']} ev",
            ]
        )
    try:
        from tabulate import tabulate

        print(tabulate(rows, headers=["what", "seconds", "CPU s (tree)", "MB/s", "peak RSS MB", "kept"]))
    except ImportError:
        for r in rows:
            print("  ".join(r))
    print(json.dumps(res, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
