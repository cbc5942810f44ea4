"""Write the ILLUSTRATIVE NCCL-side logs of the teaching scenarios (python data/illustrative/generate.py).

No GPU was available when these were written, so there are no recorded NCCL runs of the lessons.
These logs are assembled from the message templates documented in docs/formats.md
(NCCL_DEBUG=INFO with NCCL_DEBUG_SUBSYS=INIT,COLL, ProcessGroupNCCL watchdog, status and
teardown lines, the torchrun ChildFailedError table) for what a 2-rank job on one node with the
same bug would print. They are labelled as illustrative in their first line, and the teaching
notebooks show that label. Replace them with real runs (data/recorded/nccl/) when a GPU is at hand.
"""

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).resolve().parent
LABEL = (
    "# ILLUSTRATIVE NCCL LOG: written from the documented message templates (docs/formats.md), "
    "NOT the output of a real NCCL run. Scenario: {scenario}. {story}"
)
HOST = "gpu-node-0"
PIDS = (4101, 4102)
COMMS = ("0x55d0c0a0e8f0", "0x5581c0a1b720")
COMM_ID = "0x7e21c4d90a3f5b16"
STREAMS = ("0x55d0bf7e3c10", "0x5581bf7e3e50")


def _nccl(rank, text, tid=None):
    return f"[default{rank}]:{HOST}:{PIDS[rank]}:{tid or PIDS[rank]} [{rank}] NCCL INFO {text}"


def _cpp(rank, sev, clock, src, text):
    return f"[default{rank}]:[rank{rank}]:[{sev}1130 {clock} {src}] {text}"


def _init(rank):
    return [
        _nccl(rank, "cudaDriverVersion 12040"),
        _nccl(rank, "NCCL version 2.21.5+cuda12.4"),
        _nccl(
            rank,
            f"ncclCommInitRank comm {COMMS[rank]} rank {rank} nranks 2 cudaDev {rank} nvmlDev {rank} "
            f"busId {'1b000' if rank == 0 else '1c000'} commId {COMM_ID} - Init COMPLETE",
            tid=PIDS[rank] + 59,
        ),
    ]


def _coll(rank, name, op_count, count, datatype=7, root=0):
    buf = 0x7F0E52000000 + 0x400000 * op_count + 0x10000000 * rank
    return _nccl(
        rank,
        f"{name}: opCount {op_count:x} sendbuff 0x{buf:x} recvbuff 0x{buf + 0x200000:x} count {count} "
        f"datatype {datatype} op 0 root {root} comm {COMMS[rank]} [nranks=2] stream {STREAMS[rank]}",
    )


def _step_log(rank, step, total):
    loss = 2.5 - 0.15 * step + 0.01 * rank
    return f"[default{rank}]:step {step}/{total} rank {rank} loss={loss:.4f}"


def _timeout(rank, seq, op_type, numel_in, numel_out, clock, enqueued, completed):
    pg = f"[PG ID 0 PG GUID 0(default_pg) Rank {rank}]"
    wd = (
        f"[Rank {rank}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum={seq}, OpType={op_type}, "
        f"NumelIn={numel_in}, NumelOut={numel_out}, Timeout(ms)=600000) ran for 600071 milliseconds before timing out."
    )
    return [
        _cpp(rank, "E", clock + ".550218903", "ProcessGroupNCCL.cpp:688", wd),
        _cpp(
            rank,
            "E",
            clock + ".550390114",
            "ProcessGroupNCCL.cpp:2190",
            f"{pg}  failure detected by watchdog at work sequence id: {seq} PG status: last enqueued work: "
            f"{enqueued}, last completed work: {completed}",
        ),
        _cpp(
            rank,
            "E",
            clock + ".550412871",
            "ProcessGroupNCCL.cpp:702",
            f"[Rank {rank}] Some NCCL operations have failed or timed out. Due to the asynchronous nature of CUDA "
            "kernels, subsequent GPU operations might run on corrupted/incomplete data.",
        ),
        _cpp(
            rank,
            "E",
            clock + ".550431077",
            "ProcessGroupNCCL.cpp:708",
            f"[Rank {rank}] To avoid data inconsistency, we are taking the entire process down.",
        ),
        f"[default{rank}]:terminate called after throwing an instance of 'c10::DistBackendError'",
        f"[default{rank}]:  what():  {pg} Process group watchdog thread terminated with exception: {wd}",
    ]


def _child_failed(entry, failures, clock):
    rule = "=" * 56
    out = [
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
        rule,
        f"{entry} FAILED",
        "-" * 56,
        "Failures:",
    ]
    first, rest = failures[0], failures[1:]
    if not rest:
        out.append("  <NO_OTHER_FAILURES>")
    for k, (rank, pid, code, sig) in enumerate(rest, start=1):
        out += [
            f"[{k}]:",
            f"  time      : 2026-11-30_{clock}",
            f"  host      : {HOST}",
            f"  rank      : {rank} (local_rank: {rank})",
            f"  exitcode  : {code} (pid: {pid})  ({sig})",
            "  error_file: <N/A>",
            f"  traceback : Signal 6 ({sig}) received by PID {pid}",
        ]
    rank, pid, code, sig = first
    out += [
        "-" * 56,
        "Root Cause (first observed failure):",
        "[0]:",
        f"  time      : 2026-11-30_{clock}",
        f"  host      : {HOST}",
        f"  rank      : {rank} (local_rank: {rank})",
        f"  exitcode  : {code} (pid: {pid})  ({sig})",
        "  error_file: <N/A>",
        f"  traceback : Signal 6 ({sig}) received by PID {pid}",
        rule,
    ]
    return out


def _shape_mismatch(scenario, story, coll_name, op_type, numel, out_factor):
    lines = [LABEL.format(scenario=scenario, story=story)]
    for r in (0, 1):
        lines += _init(r)
    for step in (1, 2):
        for r in (0, 1):
            lines.append(_coll(r, "AllReduce", step - 1, 16))
            lines.append(_step_log(r, step, 3))
    for r in (0, 1):
        lines.append(_coll(r, coll_name, 2, numel[r]))
    for r in (0, 1):
        lines += _timeout(r, 3, op_type, numel[r], numel[r] * out_factor, "00:20:12", 3, 2)
    lines.append(
        f"E1130 00:20:13.104000 4090 torch/distributed/elastic/multiprocessing/api.py:874] failed "
        f"(exitcode: -6) local_rank: 0 (pid: {PIDS[0]}) of binary: /opt/venv/bin/python3"
    )
    lines += _child_failed("train.py", [(0, PIDS[0], -6, "SIGABRT"), (1, PIDS[1], -6, "SIGABRT")], "00:20:13")
    return lines


def allgather():
    return _shape_mismatch(
        "allgather-shape-mismatch",
        "Rank 0 all_gathers [5, 4] boxes, rank 1 [3, 4]: NCCL checks no sizes, both ranks hang in AllGather until "
        "the watchdog fires after 10 minutes; NumelIn 20 vs 12 at SeqNum 3 is the only trace of the cause.",
        "AllGather",
        "ALLGATHER",
        (20, 12),
        2,
    )


def allreduce():
    return _shape_mismatch(
        "allreduce-shape-mismatch",
        "Rank 0 all_reduces [8, 4], rank 1 [6, 4]: NCCL checks no counts, both ranks hang in AllReduce until the "
        "watchdog fires; NumelIn 32 vs 24 at SeqNum 3 is the only trace of the cause.",
        "AllReduce",
        "ALLREDUCE",
        (32, 24),
        1,
    )


def desync():
    lines = [
        LABEL.format(
            scenario="skipped-collective",
            story="Rank 1 has one batch fewer and runs 3 steps, rank 0 runs 4: rank 0 waits in its "
            "4th AllReduce until the watchdog fires; rank 1 has moved on and reports nothing "
            "about it. The ranks' last enqueued work (4 vs 3) names the laggard.",
        )
    ]
    for r in (0, 1):
        lines += _init(r)
    for step in (1, 2, 3):
        for r in (0, 1):
            lines.append(_coll(r, "AllReduce", step - 1, 16))
            lines.append(_step_log(r, step, 4 if r == 0 else 3))
    lines.append(_coll(0, "AllReduce", 3, 16))
    lines.append("[default1]:rank 1: epoch done after 3 steps, saving checkpoint")
    lines += _timeout(0, 4, "ALLREDUCE", 16, 16, "00:30:15", 4, 3)
    lines.append(
        _cpp(0, "E", "00:30:15.551002317", "ProcessGroupNCCL.cpp:1380", "[PG ID 0 PG GUID 0(default_pg) Rank 0] Rank 0")
    )
    lines += [
        "[default0]:\t - [0] Timeout at collective: ALLREDUCE, #4",
        "[default0]:\t - To our best knowledge, the lagging/dead/mismatched ranks that caused the desync are:",
        "[default0]:\t   - [1] finished collective #3, but didn't join collective #4 (count from 1)",
        "[default0]:\t - Snapshot of ranks' latest states:",
        "[default0]:\t   #3 finished ranks:",
        "[default0]:\t     [1] finished ALLREDUCE",
        "[default0]:\t   #4 started ranks:",
        "[default0]:\t     [0] started ALLREDUCE",
    ]
    lines.append(
        f"E1130 00:30:16.201000 4090 torch/distributed/elastic/multiprocessing/api.py:874] failed "
        f"(exitcode: -6) local_rank: 0 (pid: {PIDS[0]}) of binary: /opt/venv/bin/python3"
    )
    lines += _child_failed("train.py", [(0, PIDS[0], -6, "SIGABRT")], "00:30:16")
    return lines


LOGS = {"allgather-shape-mismatch": allgather, "allreduce-shape-mismatch": allreduce, "skipped-collective": desync}


def main():
    for scenario, make in LOGS.items():
        path = HERE / "nccl" / scenario / "combined.log"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(make()) + "\n", encoding="utf-8")
        print(path)


if __name__ == "__main__":
    main()
