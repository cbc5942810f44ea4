"""Cost of the text readers per candidate line: prefix stripping (``to_lines``) and each reader.

The loader only hands candidate lines (those holding a needle) to Python, so on a 1 GB log with
~0.2 % distributed lines (~30 000 lines) the readers' per-line cost decides whether they matter
next to the byte scan. This measures CPU time (``time.process_time``, so other processes on a
shared machine inflate it less than wall time) over blocks built from real message templates.

    python benchmarks/bench_readers.py            # prints a table, writes results/bench_readers.json
"""

from __future__ import annotations

import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from denpex_nb.ingest.base import FileContext, Output, text_readers  # noqa: E402
from denpex_nb.ingest.prefixes import to_lines  # noqa: E402

DETAIL = (
    "[default{r}]:[rank{r}]: RuntimeError: Detected mismatch between collectives on ranks. Rank {r} is running "
    "collective: CollectiveFingerPrint(SequenceNumber=0, OpType=ALLGATHER, TensorShape=[3, 4], TensorDtypes=Float, "
    "TensorDeviceTypes=TensorOptions(dtype=float (default), device=cpu, layout=Strided (default), requires_grad=false "
    "(default), pinned_memory=false (default), memory_format=(nullopt))), but Rank 0 is running collective: "
    "CollectiveFingerPrint(SequenceNumber=0, OpType=ALLGATHER, TensorShape=[5, 4], TensorDtypes=Float, "
    "TensorDeviceTypes=TensorOptions(dtype=float (default), device=cpu, layout=Strided (default), requires_grad=false "
    "(default), pinned_memory=false (default), memory_format=(nullopt))).Collectives differ in the following "
    "aspects:   Tensor Tensor shapes: 3 4vs 5 4"
)
BLOCKS = [
    [
        "[default{r}]:[rank{r}]:[E1129 22:27:23.883942729 ProcessGroupNCCL.cpp:688] [Rank {r}] Watchdog caught collective "
        "operation timeout: WorkNCCL(SeqNum={s}, OpType=ALLGATHER, NumelIn=8192, NumelOut=65536, Timeout(ms)=600000) ran "
        "for 600071 milliseconds before timing out.",
        "[default{r}]:[rank{r}]:[E1129 22:27:23.883990114 ProcessGroupNCCL.cpp:2190] [PG ID 0 PG GUID 0(default_pg) Rank {r}]"
        "  failure detected by watchdog at work sequence id: {s} PG status: last enqueued work: {s}, last completed work: 3",
    ],
    [
        "[default{r}]:[rank{r}]: Traceback (most recent call last):",
        '[default{r}]:[rank{r}]:   File "train.py", line 88, in <module>',
        "[default{r}]:[rank{r}]:     dist.all_gather(out, t)",
        DETAIL,
    ],
    [
        "[default{r}]:tern-07:6120{r}:6126{r} [{r}] NCCL INFO AllGather: opCount {s:x} sendbuff 0x7f0e52000000 recvbuff "
        "0x7f0e52400000 count 6144 datatype 7 op 0 root 0 comm 0x5581c0a0 [nranks=8] stream 0x5581b7f0"
    ],
    [
        "terminate called after throwing an instance of 'gloo::EnforceNotMet'",
        "  what():  [enforce fail at /__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:456] "
        "op.preamble.length <= op.nbytes. 40 vs 24. Received data size doesn't match expected size.",
    ],
    [
        "E1129 22:27:48.169000 10045 torch/distributed/elastic/multiprocessing/api.py:1002] failed (exitcode: -6) "
        "local_rank: {r} (pid: 1005{r}) of binary: venv/bin/python"
    ],
    ["[default{r}]:step {s} rank {r} loss=2.31 lr=3e-4 (gloo backend)"],  # a needle hit nothing parses
]


def main() -> int:
    ctx = FileContext(file="bench.log", year=2026)
    readers = text_readers()
    blocks = []
    for i in range(400):
        for tpl in BLOCKS:
            blocks.append([(n + 1, t.format(r=i % 8, s=i + 1)) for n, t in enumerate(tpl)])
    n_phys = sum(len(b) for b in blocks)
    t0 = time.process_time()
    logical = [to_lines(b, ctx) for b in blocks]
    t_prefix = time.process_time() - t0
    n_logical = sum(len(x) for x in logical)
    per_reader = {}
    for r in readers:
        out = Output()
        t0 = time.process_time()
        for lines in logical:
            r.parse(lines, ctx, out)
        per_reader[r.name] = time.process_time() - t0
    total = t_prefix + sum(per_reader.values())
    res = {
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "load_average": list(os.getloadavg()),
        "physical_lines": n_phys,
        "logical_lines": n_logical,
        "us_per_line": {
            "to_lines": round(t_prefix / n_phys * 1e6, 1),
            **{k: round(v / n_phys * 1e6, 1) for k, v in per_reader.items()},
            "total": round(total / n_phys * 1e6, 1),
        },
        "seconds_for_30k_candidate_lines": round(total / n_phys * 30000, 2),
    }
    print(f"{'stage':<12} {'us/line':>8}")
    for k, v in res["us_per_line"].items():
        print(f"{k:<12} {v:>8}")
    print(
        f"=> {res['seconds_for_30k_candidate_lines']} s CPU for 30 000 candidate lines "
        f"(load average {res['load_average'][0]:.1f})"
    )
    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
    with open(os.path.join(HERE, "results", "bench_readers.json"), "w") as f:
        json.dump(res, f, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
