"""Fuzz campaign of the text loader and the CLI path behind it: ``denpex_nb.load`` + ``diagnose``.

    python benchmarks/bench_fuzz.py                                   # 10 000 cases, 2 workers
    python benchmarks/bench_fuzz.py --cases 300 --seed 7 --workers 1 --no-write   # the test's subset

Every case is built from a seed and its index (so any case can be rebuilt with ``--show I``): one
to four input files made by mutating the recorded runs' logs (``data/recorded/gloo/*/*/combined.log``
and the per-rank ``attempt_0/<R>/*.log``) and the wild corpus (``tests/data/wild/*/``), or by a
grammar of the lines every reader knows (watchdog, status, desync, DETAIL fingerprints, gloo, NCCL
INFO/WARN/Init/traces, tracebacks, agent and ChildFailedError lines, torchfrtrace text, mp.spawn,
DeepSpeed / Lightning / torchrun banners, tracer JSONL) under random launcher prefixes with
huge, negative, hex, 5000-digit, non-ASCII-digit and garbage numbers in every numeric position.
Mutations: byte flips, truncation, splices of two logs, garbage insertion, CRLF, ANSI codes,
interleaving of ranks' lines, huge numbers, lines past the line cap, invalid UTF-8, NUL bytes,
and compressed variants (gz, zst, bz2, xz; whole, truncated, flipped) next to good files.

Per case, in a worker process (address space capped at 1.5 GB, a per-case alarm):

* ``denpex_nb.load(files, unreadable="report")`` then ``diagnose``, as the CLI runs them: a
  DenpexError is the CLI's exit 2 and fine; any other exception escaped. A text reader that raised
  on some lines (contained by the loader: those lines stay unparsed, the Incident gets a note; a
  strict load would raise) is counted apart as a reader failure, with its distinct messages, for
  the readers' owners;
* lines conserved: ``lines_total == lines_parsed + lines_unparsed`` per ``sources`` row, the
  ``unparsed`` rows' ``n_lines`` sum to ``lines_unparsed`` per file, and a plain (uncompressed)
  text file's ``lines_total`` is its physical line count;
* time per case (``load`` and ``diagnose`` apart) and the worker's peak RSS.

Workers are subprocesses running chunks of cases; a worker writes each case's index to a progress
file first, so one that dies or hangs is counted as a crash and the chunk resumes after it.

Prints a table per case kind and totals; writes benchmarks/results/bench_fuzz.json.
Bars: escaped 0, crashes 0, timeouts 0, conservation failures 0, slowest case < 5 s, peak RSS < 1.5 GB
(``load_bars_met``: the same with the slowest ``load`` instead of the whole case).
"""

from __future__ import annotations

import argparse
import bz2
import glob
import gzip
import json
import lzma
import os
import platform
import random
import re
import signal
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

import _fuzz_harness as harness  # noqa: E402

KINDS = (
    "flip",
    "truncate",
    "splice",
    "garbage",
    "crlf",
    "ansi",
    "interleave",
    "huge_numbers",
    "long_line",
    "invalid_utf8",
    "nul",
    "compressed",
    "grammar",
    "multi_file",
)
WEIGHTS = (8, 6, 6, 6, 4, 5, 6, 10, 3, 5, 4, 10, 20, 7)
BARS = {"escaped": 0, "crashes": 0, "timeouts": 0, "conservation": 0, "slowest_case_s": 5.0, "peak_rss_mb": 1536}
RLIMIT_AS = 1536 << 20
CASE_TIMEOUT_S = 30


# --- corpus ---------------------------------------------------------------------------------------


def corpus_files() -> tuple[list[str], list[list[str]]]:
    """(every text log, the per-rank log groups of each recorded run)."""
    recorded = sorted(glob.glob(str(ROOT / "data/recorded/gloo/*/*/combined.log")))
    groups = []
    for run in sorted(glob.glob(str(ROOT / "data/recorded/gloo/*/*"))):
        ranks = sorted(glob.glob(os.path.join(run, "attempt_0", "*", "*.log")))
        if ranks:
            groups.append(ranks)
    wild = sorted(f for f in glob.glob(str(ROOT / "tests/data/wild/*/*")) if f.endswith((".txt", ".log")))
    return recorded + [f for g in groups for f in g] + wild, groups


_CORPUS: tuple[list[bytes], list[list[bytes]]] | None = None


def corpus() -> tuple[list[bytes], list[list[bytes]]]:
    global _CORPUS
    if _CORPUS is None:
        files, groups = corpus_files()
        _CORPUS = ([Path(f).read_bytes() for f in files], [[Path(f).read_bytes() for f in g] for g in groups])
    return _CORPUS


# --- the grammar ----------------------------------------------------------------------------------

OPS = (
    "ALLREDUCE",
    "ALLGATHER",
    "_ALLGATHER_BASE",
    "REDUCE_SCATTER",
    "BROADCAST",
    "BARRIER",
    "ALLTOALL",
    "SEND",
    "RECV",
    "all_reduce",
    "all_gather",
    "gloo:all_reduce",
    "AllReduce",
    "AllGather",
    "ReduceScatter",
    "Broadcast",
    "nccl:all_reduce",
    "",
    "???",
)
TEMPLATES = (
    "[E1129 22:27:23.883942729 ProcessGroupNCCL.cpp:{n}] [Rank {r}] Watchdog caught collective operation timeout: "
    "WorkNCCL(SeqNum={n}, OpType={op}, NumelIn={n}, NumelOut={n}, Timeout(ms)={n}) ran for {n} milliseconds before "
    "timing out.",
    "[E1129 22:27:23.88 ProcessGroupNCCL.cpp:2190] [PG ID {n} PG GUID {n}(default_pg) Rank {r}]  failure detected by "
    "watchdog at work sequence id: {n} PG status: last enqueued work: {n}, last completed work: {n}",
    "[E1129 22:27:23.88 ProcessGroupNCCL.cpp:9] Timeout at NCCL work: {n}, last enqueued NCCL work: {n}, last "
    "completed NCCL work: {n}.",
    " - [{r}] Timeout at collective: {op}, #{n}",
    "[{r}] Rank {r} is stuck in collective {op} #{n}",
    "RuntimeError: Detected mismatch between collectives on ranks. Rank {r} is running collective: "
    "CollectiveFingerPrint(SequenceNumber={n}, OpType={op}, TensorShape=[{n}, {n}], TensorDtypes=Float, "
    "TensorDeviceTypes=TensorOptions(dtype=float (default), device=cpu, layout=Strided (default))), but Rank {r} is "
    "running collective: CollectiveFingerPrint(SequenceNumber={n}, OpType={op}, TensorShape=[{n}], "
    "TensorDtypes=Float, TensorDeviceTypes=TensorOptions(dtype=float (default), device=cpu, layout=Strided "
    "(default))).Collectives differ in the following aspects:   Tensor Tensor shapes: {n} {n}vs {n}",
    "Detected mismatch between collectives on ranks. Rank {r} is running collective: "
    "CollectiveFingerPrint(SequenceNumber={n}OpType={op}), but Rank {r} is running collective: "
    "CollectiveFingerPrint(SequenceNumber={n}OpType={op}).",
    "{host}:{pid}:{pid} [{r}] NCCL INFO {op}: opCount {h} sendbuff 0x{h} recvbuff 0x{h} count {n} datatype {n} op {n} "
    "root {n} comm 0x{h} [nranks={n}] stream 0x{h}",
    "{host}:{pid}:{pid} [{r}] NCCL INFO {op}: opCount {h} sendbuff 0x{h} recvbuff 0x{h} count {n} datatype {n} op {n} "
    "root {n} comm 0x{h} [nranks={n}] stream 0x{h} task {n} globalrank {n}",
    "{host}:{pid}:{pid} [{r}] NCCL INFO comm 0x{h} rank {n} nranks {n} cudaDev {n} nvmlDev {n} busId {h} commId 0x{h} "
    "- Init COMPLETE",
    "{host}:{pid}:{pid} [{r}] NCCL INFO ncclCommInitRank comm 0x{h} rank {n} nranks {n} cudaDev {n} busId {h} - Init "
    "COMPLETE",
    "{host}:{pid}:{pid} [{r}] NCCL WARN NET/IB : Got completion from peer {host}<{n}> with error {n}, opcode {n}, "
    "len {n}, vendor err {n} (Recv)",
    "{host}:{pid}:{pid} [{r}] NCCL INFO init.cc:{n} -> {n}",
    "{host}:{pid}:{pid} [{r}] NCCL INFO proxy.cc:{n} -> {n} [Progress Thread]",
    "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:{n}, "
    "unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version {n}.{n}.{n}",
    "RuntimeError: NCCL error: unhandled cuda error (run with NCCL_DEBUG=INFO for details)",
    "RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:{n}] Connection closed by peer "
    "[127.0.0.1]:{n}",
    "RuntimeError: [../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:{n}] Timed out waiting {n}ms for recv "
    "operation to complete",
    "RuntimeError: [enforce fail at ../third_party/gloo/gloo/transport/tcp/pair.cc:{n}] op.preamble.length <= "
    "op.nbytes. {n} vs {n}",
    "[E1129 22:37:26.285475132 ProcessGroupGloo.cpp:{n}] [Rank {r}]: Rank {r} failed to pass monitoredBarrier in {n} ms",
    "E0101 00:00:00.000000 {pid} torch/distributed/elastic/multiprocessing/api.py:{n}] failed (exitcode: {n}) "
    "local_rank: {n} (pid: {n}) of binary: /usr/bin/python",
    "W1129 22:27:47.979000 {pid} torch/distributed/elastic/multiprocessing/api.py:{n}] Sending process {n} closing "
    "signal SIGTERM",
    "[{n}]:",
    "  time      : 2024-01-01_00:00:00",
    "  host      : {host}",
    "  rank      : {n} (local_rank: {n})",
    "  exitcode  : {n} (pid: {n})",
    "  error_file: <N/A>",
    "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
    "Traceback (most recent call last):",
    '  File "train.py", line {n}, in <module>',
    "    dist.all_reduce(t)",
    '  File "/usr/lib/python3/site-packages/torch/distributed/distributed_c10d.py", line {n}, in all_reduce',
    "RuntimeError: boom {n}",
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {n}.00 MiB. GPU {n} has a total capacity of {n}.00 "
    "GiB of which {n}.00 MiB is free.",
    "Fatal Python error: Aborted",
    "-- Process {n} terminated with the following error:",
    "Collective sequence number: {n} has errors",
    "Not all ranks joining collective, sequence number: {n}",
    "internal record id: {n}",
    "group info: {n}:default_pg",
    "collective: nccl:{op}",
    "missing ranks: {{{n}, {n}}}",
    "total input numel: {n}",
    "input sizes: [[{n}, {n}]]",
    "world size: {n}",
    "expected ranks: {{{n}, {n}}}",
    "error msg: Culprit rank {n}; Error type: SIZE_OR_SYNTAX_MISMATCH, Expected input sizes: '[[{n}]]' does not match "
    "found input sizes: '[[{n}]]'",
    "Not all ranks joining collective {n} at entry {n}",
    "Missing dump files from ranks {{{n}, {n}}}",
    "[I1129 ProcessGroupNCCL.cpp:{n}] [PG ID {n} PG GUID {n} Rank {r}] ProcessGroupNCCL initialization options: "
    "size: {n}, global rank: {n}, TIMEOUT(ms): {n}",
    "Initializing distributed: GLOBAL_RANK: {n}, MEMBER: {n}/{n}",
    "[INFO] [launch.py:{n}:main] global_rank_mapping=defaultdict(<class 'list'>, {{'{host}': [{n}, {n}]}})",
    "[INFO] [launch.py:{n}:sigkill_handler] Killing subprocess {n}",
    "[ERROR] [launch.py:{n}:sigkill_handler] ['python', 'train.py'] exits with return code = {n}",
    "  global_ranks=[{n}, {n}]",
    "  global_world_sizes=[{n}, {n}]",
    "/usr/lib/python3/site-packages/torch/distributed/distributed_c10d.py:{n}: UserWarning: barrier(): using the "
    "device under current context. You can specify `device_id` in `init_process_group` to mute this warning.",
    '{{"v":1,"event":"meta","rank":{n},"world_size":{n},"pid":{n},"host":"vm","backend":"gloo"}}',
    '{{"v":1,"event":"issue","rank":{n},"world_size":{n},"pg":"{n}","seq":{n},"op":"{op}","in_shapes":[[{n}]],'
    '"out_shapes":[[{n},{n}]],"dtypes":["float32"],"t_wall":{n},"t_mono":{n}}}',
    '{{"v":1,"event":"done","rank":{n},"pg":"{n}","seq":{n},"op":"{op}","t_wall":{n}.5,"t_mono":{n}}}',
    '{{"v":1,"event":"error","rank":{n},"pg":"{n}","seq":{n},"op":"{op}","error":"x {n}","t_wall":{n}}}',
    "process group has NOT been destroyed before it is being destructed",
)
PREFIXES = (
    "",
    "",
    "[rank{r}]:",
    "[rank{r}]: ",
    "[default{r}]:",
    "[{r},{r}]<stdout>:",
    "(RayWorkerWrapper pid={pid}, ip=10.0.0.1) ",
    "(VllmWorker rank={r} pid={pid}) ",
    "2024-01-01T00:00:00.123456789Z ",
    "May  1 12:00:00 {host} python[{pid}]: ",
    "rank{r}.log:",
    "> ",
    "{r}: ",
    "[{r}]:",
    "\x1b[36m[rank{r}]:\x1b[0m ",
    "worker-{r}  | ",
    "ERROR 07-24 08:26:01 [worker.py:{n}] ",
)
BIG = (
    0,
    1,
    -1,
    7,
    2**31 - 1,
    2**31,
    -(2**31) - 1,
    2**32,
    2**63 - 1,
    2**63,
    -(2**63) - 1,
    2**64,
    10**20,
    10**30,
    -(10**20),
    10**100,
)


def number(rng: random.Random) -> str:
    """A number as a log might print it, or something in its place."""
    k = rng.random()
    if k < 0.35:
        return str(rng.randrange(0, 64))
    if k < 0.7:
        return str(rng.choice(BIG))
    if k < 0.78:
        return "9" * rng.choice((19, 20, 40, 300, 4301, 5000))  # past Python's int-string digit limit too
    if k < 0.84:
        return "-" + str(rng.randrange(0, 10 ** rng.randrange(1, 25)))
    if k < 0.9:
        return rng.choice(("", "NaN", "inf", "1e309", "0x" + "f" * 30, "1.5", "٣", "１２", "--1", "+7", "0" * 50))
    return str(rng.randrange(0, 10 ** rng.randrange(1, 40)))


def hexnum(rng: random.Random) -> str:
    return rng.choice(
        ("0", "1a", "ffffffffffffffff", "f" * rng.choice((17, 32, 200)), f"{rng.randrange(1 << 40):x}", "zz", "")
    )


def grammar_line(rng: random.Random, tpl: str | None = None, prefix: str | None = None) -> str:
    tpl = rng.choice(TEMPLATES) if tpl is None else tpl
    prefix = rng.choice(PREFIXES) if prefix is None else prefix
    fields = {
        "r": lambda: number(rng) if rng.random() < 0.5 else str(rng.randrange(8)),
        "n": lambda: number(rng),
        "h": lambda: hexnum(rng),
        "op": lambda: rng.choice(OPS),
        "pid": lambda: number(rng) if rng.random() < 0.3 else str(rng.randrange(1000, 99999)),
        "host": lambda: rng.choice(("node-1", "h", "", "x" * 70, "10.0.0.1", "ñode")),
    }

    def fill(t: str) -> str:
        return (
            re.sub(
                r"\{(r|n|h|op|pid|host)\}",
                lambda m: fields[m.group(1)](),
                t.replace("{{", "\x00").replace("}}", "\x01"),
            )
            .replace("\x00", "{")
            .replace("\x01", "}")
        )

    return fill(prefix) + fill(tpl)


def grammar_log(rng: random.Random) -> bytes:
    if rng.random() < 0.1:  # a tracer JSONL file: every line from the tracer's templates
        lines = [
            grammar_line(rng, rng.choice([t for t in TEMPLATES if t.startswith('{{"v"')]), prefix="")
            for _ in range(rng.randrange(1, 60))
        ]
        return ("\n".join(lines) + "\n").encode("utf-8", "surrogatepass")
    n = rng.randrange(1, 120)
    lines = []
    for _ in range(n):
        if rng.random() < 0.25:
            lines.append(rng.choice(("epoch 1 step 3 loss 0.25", "", "INFO: training", "   ", "{}", "x" * 81)))
        else:
            lines.append(grammar_line(rng))
    return ("\n".join(lines) + rng.choice(("\n", "", "\r\n"))).encode("utf-8", "surrogatepass")


# --- mutations ------------------------------------------------------------------------------------


def _flip(rng, d: bytes) -> bytes:
    b = bytearray(d)
    for _ in range(rng.randrange(1, 1 + max(1, len(b) // 200))):
        if b:
            b[rng.randrange(len(b))] = rng.randrange(256)
    return bytes(b)


def _truncate(rng, d: bytes) -> bytes:
    return d[: rng.randrange(0, len(d) + 1)]


def _splice(rng, a: bytes, b: bytes) -> bytes:
    return a[: rng.randrange(len(a) + 1)] + b[rng.randrange(len(b) + 1) :]


def _garbage(rng, d: bytes) -> bytes:
    for _ in range(rng.randrange(1, 6)):
        pos = rng.randrange(len(d) + 1)
        junk = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 200)))
        d = d[:pos] + junk + d[pos:]
    return d


def _crlf(rng, d: bytes) -> bytes:
    if rng.random() < 0.5:
        return d.replace(b"\n", b"\r\n")
    out = bytearray()
    for line in d.split(b"\n"):
        out += line + rng.choice((b"\n", b"\r\n", b"\r", b"\r\r\n"))
    return bytes(out)


def _ansi(rng, d: bytes) -> bytes:
    codes = (b"\x1b[31m", b"\x1b[0m", b"\x1b[1;32m", b"\x1b[2K", b"\x1b[?25l", b"[36m", b"\x1b[", b"\x1b]0;t\x07")
    lines = d.split(b"\n")
    for i in range(len(lines)):
        if rng.random() < 0.4:
            pos = rng.randrange(len(lines[i]) + 1) if rng.random() < 0.5 else 0
            lines[i] = lines[i][:pos] + rng.choice(codes) + lines[i][pos:]
    return b"\n".join(lines)


def _interleave(rng, logs: list[bytes]) -> bytes:
    streams = [d.split(b"\n") for d in logs]
    out = []
    while any(streams):
        s = rng.choice([s for s in streams if s])
        take = rng.randrange(1, 4)
        out.extend(s[:take])
        del s[:take]
    return b"\n".join(out)


_DIGITS = re.compile(rb"\d+")


def _huge_numbers(rng, d: bytes) -> bytes:
    return _DIGITS.sub(lambda m: number(rng).encode("utf-8") if rng.random() < 0.3 else m.group(0), d)


def _long_line(rng, d: bytes) -> bytes:
    lines = d.split(b"\n")
    i = rng.randrange(len(lines))
    size = rng.choice((1 << 20, (1 << 20) + 1, 3 << 20, 5 << 19))
    filler = rng.choice((b"x", b"[rank1]: gloo ", b"(", b" ", b"\xff", b"NCCL INFO "))
    lines[i] = lines[i] + (filler * (size // len(filler) + 1))[:size]
    if rng.random() < 0.3:  # no newline at the end: the long line ends the file
        lines = lines[: i + 1]
    return b"\n".join(lines)


def _invalid_utf8(rng, d: bytes) -> bytes:
    bad = (b"\xff", b"\xc3", b"\xe2\x82", b"\xed\xa0\x80", b"\xf8\x88\x80\x80\x80", b"\xc0\xaf", b"\x80\x80")
    for _ in range(rng.randrange(1, 20)):
        pos = rng.randrange(len(d) + 1)
        d = d[:pos] + rng.choice(bad) + d[pos:]
    return d


def _nul(rng, d: bytes) -> bytes:
    if rng.random() < 0.2:
        return b"\x00" * rng.randrange(1, 20000)
    for _ in range(rng.randrange(1, 30)):
        pos = rng.randrange(len(d) + 1)
        d = d[:pos] + b"\x00" * rng.randrange(1, 8) + d[pos:]
    return d


def compress(rng, d: bytes) -> tuple[str, bytes]:
    kind = rng.choice(("gz", "zst", "bz2", "xz"))
    if kind == "gz":
        c = gzip.compress(d, mtime=0)
    elif kind == "bz2":
        c = bz2.compress(d)
    elif kind == "xz":
        c = lzma.compress(d)
    else:
        import zstandard

        c = zstandard.ZstdCompressor(level=3).compress(d)
    k = rng.random()
    if k < 0.35 and c:
        c = c[: rng.randrange(len(c))]  # truncated
    elif k < 0.55:
        c = _flip(rng, c)  # corrupt
    elif k < 0.6:
        c = c + bytes(rng.randrange(256) for _ in range(rng.randrange(1, 50)))  # trailing garbage
    return kind, c


def make_case(seed: int, index: int) -> tuple[str, list[tuple[str, bytes]]]:
    """(kind, [(file name, bytes)]) of case ``index``."""
    rng = random.Random(seed * 1_000_003 + index)
    kind = rng.choices(KINDS, WEIGHTS)[0]
    texts, groups = corpus()

    def base() -> bytes:
        return rng.choice(texts) if rng.random() < 0.8 else grammar_log(rng)

    def name(i: int = 0) -> str:
        return rng.choice(("combined.log", f"rank{i}.log", "stdout.log", "log.txt", f"nccl.h.{1000 + i}.log", "x.out"))

    if kind == "flip":
        files = [(name(), _flip(rng, base()))]
    elif kind == "truncate":
        files = [(name(), _truncate(rng, base()))]
    elif kind == "splice":
        files = [(name(), _splice(rng, base(), base()))]
    elif kind == "garbage":
        files = [(name(), _garbage(rng, base()))]
    elif kind == "crlf":
        files = [(name(), _crlf(rng, base()))]
    elif kind == "ansi":
        files = [(name(), _ansi(rng, base()))]
    elif kind == "interleave":
        g = rng.choice(groups) if groups and rng.random() < 0.7 else [base(), base()]
        files = [("combined.log", _interleave(rng, list(g)))]
    elif kind == "huge_numbers":
        files = [(name(), _huge_numbers(rng, base()))]
    elif kind == "long_line":
        files = [(name(), _long_line(rng, base()))]
    elif kind == "invalid_utf8":
        files = [(name(), _invalid_utf8(rng, base()))]
    elif kind == "nul":
        files = [(name(), _nul(rng, base()))]
    elif kind == "compressed":
        ext, blob = compress(rng, base())
        files = [(f"{name()}.{ext}", blob)]
    elif kind == "grammar":
        files = [(name(i), grammar_log(rng)) for i in range(rng.randrange(1, 4))]
    else:  # multi_file: good files next to broken ones
        files = []
        for i in range(rng.randrange(2, 5)):
            d = base()
            r = rng.random()
            if r < 0.4:
                ext, blob = compress(rng, d)
                files.append((f"rank{i}.log.{ext}", blob))
            elif r < 0.5:
                files.append((f"rank{i}.bin", bytes(rng.randrange(256) for _ in range(rng.randrange(0, 3000)))))
            elif r < 0.55:
                files.append((f"rank{i}.log", b""))
            else:
                mut = rng.choice((_flip, _huge_numbers, _invalid_utf8, _crlf, _ansi))
                files.append((f"rank{i}.log", mut(rng, d)))
    return kind, files


# --- one case -------------------------------------------------------------------------------------


class CaseTimeout(BaseException):
    """Raised by the per-case alarm (a BaseException: no ``except Exception`` swallows it)."""


def _alarm(signum, frame):
    raise CaseTimeout()


def physical_lines(data: bytes) -> int:
    data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")  # a lone CR ends a line, as CRLF does
    return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)


def run_case(files: list[tuple[str, bytes]], folder: str) -> dict:
    import denpex_nb as dx
    from denpex_nb.errors import DenpexError

    case_dir = tempfile.mkdtemp(dir=folder)
    paths = []
    for i, (name, data) in enumerate(files):
        sub = os.path.join(case_dir, str(i))
        os.makedirs(sub, exist_ok=True)
        p = os.path.join(sub, name)
        Path(p).write_bytes(data)
        paths.append(p)
    out = {
        "outcome": "ok",
        "escaped": None,
        "conservation": None,
        "memory_error": False,
        "verdict": None,
        "reader_failure": None,
        "rule_failure": None,
        "load_s": 0.0,
        "diagnose_s": 0.0,
    }
    try:
        signal.alarm(CASE_TIMEOUT_S)
        try:
            t0 = time.perf_counter()
            inc = dx.load(*paths, progress=False, jobs=1, strict=False, unreadable="report")
            out["load_s"] = round(time.perf_counter() - t0, 4)
            out["conservation"] = check_conservation(inc, files, paths)
            failed = [n for n in inc.notes if n.startswith("reader '")]
            if failed:
                out["reader_failure"] = re.sub(r" at \S+?:\d+:", ":", failed[0])[:240]
            t0 = time.perf_counter()
            diag = dx.diagnose(inc)
            out["verdict"] = str(diag.verdict)
            # a rule that raised is contained (the others still run), but it is a defect all the same
            rule_failed = [n for n in diag.notes if n.startswith("rule ") and " failed on this input" in n]
            if rule_failed:
                out["rule_failure"] = rule_failed[0][:240]
            str(diag)
            out["diagnose_s"] = round(time.perf_counter() - t0, 4)
        finally:
            signal.alarm(0)
    except CaseTimeout:
        out["outcome"] = "timeout"
    except MemoryError:
        out["outcome"] = "memory_error"
        out["memory_error"] = True
    except DenpexError as e:
        out["outcome"] = "input_error"  # the CLI's one line and exit 2
        if "MemoryError" in str(e):
            out["memory_error"] = True
    except Exception as e:
        out["outcome"] = "escaped"
        import traceback

        tb = traceback.extract_tb(e.__traceback__)
        where = f"{tb[-1].filename.split('denpex_nb/')[-1]}:{tb[-1].lineno}" if tb else "?"
        out["escaped"] = f"{type(e).__name__} at {where}: {str(e)[:200]}"
    finally:
        import shutil

        shutil.rmtree(case_dir, ignore_errors=True)
    return out


def check_conservation(inc, files, paths) -> str | None:
    """None when every line is accounted for, else what is wrong."""
    s = inc.sources
    for row in s.itertuples(index=False):
        total, parsed, unparsed = (
            int(x) if x == x and x is not None else 0 for x in (row.lines_total, row.lines_parsed, row.lines_unparsed)
        )
        if total != parsed + unparsed:
            return f"{os.path.basename(str(row.file))}: total {total} != parsed {parsed} + unparsed {unparsed}"
    un = inc.unparsed
    if len(un):
        per_file = un.groupby(un["file"].astype("object"))["n_lines"].sum().to_dict()
    else:
        per_file = {}
    for row in s.itertuples(index=False):
        want = int(row.lines_unparsed) if row.lines_unparsed == row.lines_unparsed else 0
        got = int(per_file.get(row.file, 0))
        if got != want:
            return f"{os.path.basename(str(row.file))}: unparsed rows hold {got} lines, sources says {want}"
    by_path = {p: d for p, (_, d) in zip(paths, files)}
    for row in s.itertuples(index=False):
        data = by_path.get(str(row.file))
        if data is None or str(row.format) != "text" or str(row.file).endswith((".gz", ".zst", ".bz2", ".xz")):
            continue
        if isinstance(row.error, str) and row.error:  # a read that stopped: fewer lines is honest
            continue
        if int(row.lines_total) != physical_lines(data):
            return f"{os.path.basename(str(row.file))}: {int(row.lines_total)} lines counted, the file has {physical_lines(data)}"
    return None


def worker(seed: int, start: int, count: int, progress_file: str) -> None:
    """Run cases [start, start + count) and print one JSON line of results."""
    import shutil
    import warnings

    warnings.simplefilter("ignore")
    signal.signal(signal.SIGALRM, _alarm)
    import denpex_nb  # noqa: F401  (import time is not a case's)
    from denpex_nb.ingest.parse import all_text_readers

    all_text_readers()
    folder = tempfile.mkdtemp(prefix="fuzzlog_", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)

    def run_one(i: int) -> dict:
        kind, files = make_case(seed, i)
        return dict(run_case(files, folder), kind=kind, bytes=sum(len(d) for _, d in files))

    try:
        harness.run_cases(start, count, progress_file, run_one, RLIMIT_AS)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


# --- the parent -----------------------------------------------------------------------------------


def campaign(cases: int, seed: int, workers: int, chunk: int, timeout: float) -> dict:
    def worker_args(start: int, count: int, progress: str) -> list[str]:
        return [sys.executable, str(Path(__file__).resolve()), "--worker", str(seed), str(start), str(count), progress]

    def on_crash(i: int, rc, stderr: str) -> dict:
        kind, _ = make_case(seed, i)
        return {"i": i, "kind": kind, "rc": rc, "stderr": stderr[-800:]}

    def one_chunk(start: int, count: int):
        return harness.run_chunk(worker_args, on_crash, start, count, timeout)

    results, crashes, wall = harness.drive(one_chunk, cases, chunk, workers)
    return summarize(results, crashes, wall, seed, workers)


def summarize(results: list[dict], crashes: list[dict], wall: float, seed: int, workers: int) -> dict:
    rows = {}
    for k in KINDS:
        rs = [r for r in results if r["kind"] == k]
        rows[k] = {
            "cases": len(rs) + sum(1 for c in crashes if c["kind"] == k),
            "loaded": sum(r["outcome"] == "ok" for r in rs),
            "input_error": sum(r["outcome"] == "input_error" for r in rs),
            "escaped": sum(r["outcome"] == "escaped" for r in rs),
            "timeouts": sum(r["outcome"] == "timeout" for r in rs),
            "memory_errors": sum(r["memory_error"] for r in rs),
            "conservation": sum(r["conservation"] is not None for r in rs),
            "reader_failures": sum(r["reader_failure"] is not None for r in rs),
            "rule_failures": sum(r["rule_failure"] is not None for r in rs),
            "crashes": sum(1 for c in crashes if c["kind"] == k),
            "slowest_s": max((r["s"] for r in rs), default=0.0),
            "mean_ms": round(1000 * sum(r["s"] for r in rs) / max(1, len(rs)), 1),
        }
    verdicts: dict[str, int] = {}
    for r in results:
        if r["verdict"]:
            verdicts[r["verdict"]] = verdicts.get(r["verdict"], 0) + 1
    total = {
        "cases": len(results) + len(crashes),
        "loaded": sum(r["outcome"] == "ok" for r in results),
        "input_errors": sum(r["outcome"] == "input_error" for r in results),
        "escaped_exceptions": sum(r["outcome"] == "escaped" for r in results),
        "timeouts": sum(r["outcome"] == "timeout" for r in results),
        "memory_errors": sum(r["memory_error"] for r in results),
        "conservation_failures": sum(r["conservation"] is not None for r in results),
        "reader_failures": sum(r["reader_failure"] is not None for r in results),
        "rule_failures": sum(r["rule_failure"] is not None for r in results),
        "crashes": len(crashes),
        "slowest_case_s": max((r["s"] for r in results), default=0.0),
        "slowest_load_s": max((r["load_s"] for r in results), default=0.0),
        "slowest_diagnose_s": max((r["diagnose_s"] for r in results), default=0.0),
        "mean_case_ms": round(1000 * sum(r["s"] for r in results) / max(1, len(results)), 1),
        "peak_rss_mb": max((r["rss_mb"] for r in results), default=0.0),
        "input_mb": round(sum(r["bytes"] for r in results) / 1e6, 1),
        "wall_s": round(wall, 1),
    }
    slowest = sorted(results, key=lambda r: -r["s"])[:5]
    examples = {
        "escaped": [{k: r[k] for k in ("i", "kind", "bytes", "escaped")} for r in results if r["escaped"]][:20],
        "conservation": [
            {k: r[k] for k in ("i", "kind", "bytes", "conservation")} for r in results if r["conservation"]
        ][:20],
        "timeouts": [{k: r[k] for k in ("i", "kind", "bytes")} for r in results if r["outcome"] == "timeout"][:20],
        "slowest": [{k: r[k] for k in ("i", "kind", "bytes", "s", "load_s", "diagnose_s")} for r in slowest],
        "slowest_loads": [
            {k: r[k] for k in ("i", "kind", "bytes", "load_s")} for r in sorted(results, key=lambda r: -r["load_s"])[:5]
        ],
        "reader_failures": _distinct(results),
        "rule_failures": _distinct(results, "rule_failure"),
        "biggest_rss": [
            {k: r[k] for k in ("i", "kind", "bytes", "rss_mb")}
            for r in sorted(results, key=lambda r: -r["rss_mb"])
            if r["rss_grew"]
        ][:5],
        "crashes": crashes[:20],
    }
    ok = (
        total["escaped_exceptions"] == 0
        and total["crashes"] == 0
        and total["timeouts"] == 0
        and total["conservation_failures"] == 0
        and total["memory_errors"] == 0
        and total["reader_failures"] == 0
        and total["rule_failures"] == 0
        and total["slowest_case_s"] < BARS["slowest_case_s"]
        and total["peak_rss_mb"] < BARS["peak_rss_mb"]
    )
    load_ok = (
        total["escaped_exceptions"] == 0
        and total["crashes"] == 0
        and total["timeouts"] == 0
        and total["conservation_failures"] == 0
        and total["memory_errors"] == 0
        and total["slowest_load_s"] < BARS["slowest_case_s"]
    )
    return {
        "benchmark": "bench_fuzz",
        "seed": seed,
        "workers": workers,
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "rlimit_as_mb": RLIMIT_AS >> 20,
        "case_timeout_s": CASE_TIMEOUT_S,
        "bars": BARS,
        "bars_met": ok,
        "load_bars_met": load_ok,
        "totals": total,
        "by_kind": rows,
        "verdicts": verdicts,
        "examples": examples,
    }


def _distinct(results: list[dict], field: str = "reader_failure") -> list[dict]:
    """Reader (or rule) failures grouped by reader and exception type: count and the first case."""
    seen: dict[str, dict] = {}
    for r in results:
        msg = r[field]
        if not msg:
            continue
        key = re.sub(r"\d+", "N", msg)[:120]
        if key not in seen:
            seen[key] = {"count": 0, "i": r["i"], "kind": r["kind"], "message": msg}
        seen[key]["count"] += 1
    return sorted(seen.values(), key=lambda x: -x["count"])[:30]


def print_table(summary: dict) -> None:
    cols = [
        "cases",
        "loaded",
        "input_error",
        "escaped",
        "timeouts",
        "memory_errors",
        "conservation",
        "reader_failures",
        "rule_failures",
        "crashes",
        "slowest_s",
        "mean_ms",
    ]
    short = {
        "input_error": "exit2",
        "memory_errors": "mem.err",
        "conservation": "lines.bad",
        "reader_failures": "rdr.fail",
        "rule_failures": "rule.fail",
    }
    print(f"{'kind':<14}" + "".join(f"{short.get(c, c):>10}" for c in cols))
    for k, row in summary["by_kind"].items():
        print(f"{k:<14}" + "".join(f"{row[c]:>10}" for c in cols))
    t = summary["totals"]
    print(
        f"\ntotal cases {t['cases']} ({t['input_mb']} MB): loaded {t['loaded']}, exit-2 input errors "
        f"{t['input_errors']}, escaped exceptions {t['escaped_exceptions']}, timeouts {t['timeouts']}, memory errors "
        f"{t['memory_errors']}, line-conservation failures {t['conservation_failures']}, crashes {t['crashes']}, "
        f"reader failures contained {t['reader_failures']}, rule failures contained {t['rule_failures']}; "
        f"slowest case {t['slowest_case_s']:.3f} s (load {t['slowest_load_s']:.3f} s, diagnose "
        f"{t['slowest_diagnose_s']:.3f} s; mean {t['mean_case_ms']} ms), peak RSS {t['peak_rss_mb']:.0f} MB, "
        f"wall {t['wall_s']} s -> bars {'met' if summary['bars_met'] else 'MISSED'} "
        f"(load alone: {'met' if summary['load_bars_met'] else 'MISSED'})"
    )
    for name in (
        "escaped",
        "conservation",
        "timeouts",
        "crashes",
        "reader_failures",
        "rule_failures",
        "slowest",
        "slowest_loads",
        "biggest_rss",
    ):
        for ex in summary["examples"][name][:8]:
            print(f"  {name}: {ex}")


def main(argv=None) -> int:
    if argv is None and len(sys.argv) > 1 and sys.argv[1] == "--worker":
        seed, start, count, progress = sys.argv[2:6]
        worker(int(seed), int(start), int(count), progress)
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--chunk", type=int, default=500)
    ap.add_argument("--timeout", type=float, default=1800.0, help="seconds per chunk before it counts as a hang")
    ap.add_argument(
        "--show", type=int, default=None, metavar="I", help="write case I's files to ./fuzz_case_I/ and stop"
    )
    ap.add_argument("--no-write", action="store_true", help="print the JSON summary instead of writing the results")
    args = ap.parse_args(argv)
    if args.show is not None:
        kind, files = make_case(args.seed, args.show)
        out = Path(f"fuzz_case_{args.show}")
        for i, (name, data) in enumerate(files):
            (out / str(i)).mkdir(parents=True, exist_ok=True)
            (out / str(i) / name).write_bytes(data)
        print(f"case {args.show} ({kind}): {len(files)} file(s) in {out}/")
        return 0
    summary = campaign(args.cases, args.seed, args.workers, min(args.chunk, max(1, args.cases)), args.timeout)
    print_table(summary)
    if args.no_write:
        print(json.dumps(summary))
    else:
        out = HERE / "results" / "bench_fuzz.json"
        out.write_text(json.dumps(summary, indent=1) + "\n")
        print(f"wrote {out.relative_to(ROOT)}")
    return 0 if summary["bars_met"] else 1


if __name__ == "__main__":
    sys.exit(main())
