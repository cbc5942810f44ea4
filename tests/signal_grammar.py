"""A generated grammar of failure lines, and the healthy logs they are inserted into (issue 16's property).

The property: any healthy log (a recorded fixed run, a negative control of the wild corpus,
generated healthy chatter with NCCL's benign WARNs) with ONE failure line inserted anywhere never
diagnoses as ``no-failure``. The failure lines come from :data:`PHRASINGS`, at least 100 phrasings
across the families of issue 16 (network/NCCL, device, memory, size/shape/dtype, timeout, process
exit, launcher, stall/position), each a template whose slots (rank, host, ip, port, pid, numbers)
are filled from a seeded random source, optionally behind one of :data:`WRAPPERS` (``[rankN]:``,
mpirun, slurm, pdsh, Ray, kubectl/docker timestamps, docker-compose). The phrasings are written from
what the tools print (PyTorch, NCCL, gloo, CUDA, the kernel, torchelastic, DeepSpeed, Ray, Horovod,
Slurm, Open MPI), not copied from any case of the corpus.

``benchmarks/bench_signal_grammar.py`` runs a large sample and records the figure;
``tests/analysis/test_signal_grammar.py`` runs a seeded subset and holds the code to the recorded
figure. One function (:func:`check`) decides, so both count the same way.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RECORDED = ROOT / "data" / "recorded" / "gloo"
WILD = ROOT / "tests" / "data" / "wild"
BLIND = ROOT / "benchmarks" / "results" / "blind"

_NCCL = "{host}:{pid}:{tid} [{dev}] "

#: family -> phrasings; slots: {r} {r2} {host} {ip} {port} {pid} {tid} {dev} {n} {seq} {ms} {big} {ns}
PHRASINGS: dict[str, list[str]] = {
    "network": [
        _NCCL + "transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion from peer {ip}<{port}> with status=12 "
        "opcode=0 len=0 vendor err 129 (Recv) localGid ::ffff:{ip} remoteGids::ffff:{ip}",
        _NCCL + "misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to {ip}<{port}> failed : Software caused "
        "connection abort",
        _NCCL + "misc/socket.cc:50 NCCL WARN socketProgress: Connection closed by remote peer {host}<{port}>",
        _NCCL + "transport/net_socket.cc:440 NCCL WARN NET/Socket : peer {ip}<{port}> message truncated : receiving "
        "1048576 bytes instead of 65536. If you believe your socket network is in healthy state, there may be a "
        "mismatch in collective sizes or environment settings (e.g. NCCL_PROTO, NCCL_ALGO) between ranks",
        _NCCL + "proxy.cc:1496 NCCL WARN [Proxy Service {r}] Failed to execute operation Connect from rank {r2}, "
        "retcode 3",
        _NCCL + "bootstrap.cc:77 NCCL WARN Bootstrap : no socket interface found",
        _NCCL + "NCCL WARN NET/OFI Request {big} completed with error. RC: 5. Error: Input/output error",
        _NCCL + "misc/ibvwrap.cc:190 NCCL WARN Call to ibv_create_qp failed with error Cannot allocate memory",
        _NCCL + "include/socket.h:403 NCCL WARN Net : Connection closed by remote peer {ip}<{port}>",
        "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, "
        "unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.20.5",
        "RuntimeError: NCCL communicator was aborted on rank {r}. Original reason for failure was: NCCL error: "
        "remote process exited or there was a network error, NCCL version 2.18.1",
        "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by peer [{ip}]:{port}",
        "RuntimeError: [/opt/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:598] Connection reset by peer",
        "torch.distributed.DistNetworkError: Connection reset by peer",
        "[E socket.cpp:957] [c10d] The client socket has failed to connect to [{host}]:{port} (errno: 111 - "
        "Connection refused).",
        "ncclInternalError: Internal check failed. Last error: Socket recv failed while polling for opId=0x{seq}",
    ],
    "device": [
        "RuntimeError: CUDA error: an illegal memory access was encountered",
        "RuntimeError: CUDA error: device-side assert triggered",
        "torch.AcceleratorError: CUDA error: uncorrectable ECC error encountered",
        "NVRM: Xid (PCI:0000:{dev}b:00): 79, pid={pid}, name=python, GPU has fallen off the bus.",
        "NVRM: Xid (PCI:0000:{dev}b:00): 48, pid={pid}, An uncorrectable double bit error (DBE) has been detected",
        "RuntimeError: CUDA error: unspecified launch failure",
        "RuntimeError: CUDA error: misaligned address",
        "RuntimeError: CUDA error: invalid device ordinal",
        "RuntimeError: CUDA error: CUBLAS_STATUS_EXECUTION_FAILED when calling `cublasGemmEx( handle, opa, opb, m, "
        "n, k, &falpha, a, CUDA_R_16BF, lda, b, CUDA_R_16BF, ldb, &fbeta, c, CUDA_R_16BF, ldc, CUDA_R_32F, "
        "CUBLAS_GEMM_DEFAULT_TENSOR_OP)`",
        "RuntimeError: cuDNN error: CUDNN_STATUS_INTERNAL_ERROR",
        "RuntimeError: CUDA driver error: unknown error",
        "torch.AcceleratorError: CUDA error: an illegal instruction was encountered",
        "RuntimeError: CUDA error: the launch timed out and was terminated",
        _NCCL + "enqueue.cc:1549 NCCL WARN Cuda failure 'an illegal memory access was encountered'",
    ],
    "memory": [
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU {dev} has a total capacity of "
        "79.15 GiB of which 1.23 GiB is free. Including non-PyTorch memory, this process has 77.90 GiB memory in use.",
        "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU {dev}; 15.78 GiB total "
        "capacity; 14.61 GiB already allocated; 3.50 MiB free; 14.74 GiB reserved in total by PyTorch)",
        "RuntimeError: CUDA error: out of memory",
        "RuntimeError: [enforce fail at alloc_cpu.cpp:114] data. DefaultCPUAllocator: not enough memory: you tried "
        "to allocate {big} bytes.",
        "Out of memory: Killed process {pid} (python) total-vm:214748364kB, anon-rss:104857600kB, file-rss:0kB, "
        "shmem-rss:0kB, UID:1000 pgtables:204800kB oom_score_adj:0",
        "MemoryError: Unable to allocate 8.00 GiB for an array with shape ({big},) and data type float64",
        _NCCL + "include/alloc.h:103 NCCL WARN Cuda failure 'out of memory'",
        "torch.OutOfMemoryError: HIP out of memory. Tried to allocate 1.95 GiB. GPU {dev} has a total capacity of "
        "63.98 GiB of which 0 bytes is free.",
        "ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shared memory (shm).",
        "RuntimeError: DataLoader worker (pid {pid}) is killed by signal: Killed.",
        "slurmstepd: error: Detected 1 oom_kill event in StepId={big}.0. Some of the step tasks have been OOM Killed.",
        _NCCL + "include/alloc.h:48 NCCL WARN Failed to CUDA calloc {big} bytes",
    ],
    "size": [
        "RuntimeError: output tensor size must be equal to world_size times input tensor size",
        "RuntimeError: Split sizes doesn't match total dim 0 size",
        "RuntimeError: split_with_sizes expects split_sizes to sum exactly to {n} (input tensor's size at dimension "
        "0), but got split_sizes=[{seq}, {seq}]",
        "RuntimeError: DDP expects same model across all ranks, but Rank {r} has {n} params, while rank {r2} has "
        "inconsistent {seq} params.",
        "RuntimeError: [{r}]: params[0] in this process with sizes [{n}, 512] appears not to match sizes of the same "
        "param in process 0.",
        "RuntimeError: ProcessGroupGloo::allgather: invalid tensor size at index {r} (expected {n}, got {seq})",
        "RuntimeError: Detected mismatch between collectives on ranks. Rank {r} is running collective: "
        "CollectiveFingerPrint(SequenceNumber={seq}, OpType=ALLREDUCE, TensorShape=[{n}], TensorDtypes=Float, "
        "TensorDeviceTypes=TensorOptions(dtype=float (default), device=cuda, layout=Strided (default), "
        "requires_grad=false (default), pinned_memory=false (default), memory_format=(nullopt))), but Rank {r2} is "
        "running collective: CollectiveFingerPrint(SequenceNumber={seq}, OpType=ALLREDUCE, TensorShape=[{seq}], "
        "TensorDtypes=Float, TensorDeviceTypes=TensorOptions(dtype=float (default), device=cuda, layout=Strided "
        "(default), requires_grad=false (default), pinned_memory=false (default), memory_format=(nullopt))).",
        "RuntimeError: shape '[{n}, 1024]' is invalid for input of size {seq}",
        "RuntimeError: The size of tensor a ({n}) must match the size of tensor b ({seq}) at non-singleton dimension 0",
        "RuntimeError: Tensors must have same number of dimensions: got 2 and 3",
        "RuntimeError: expected scalar type Float but found BFloat16",
        "RuntimeError: Input tensor data type is not supported for NCCL process group: ComplexDouble",
        "RuntimeError: Tensor list input to scatter/gather must match number of collective participants but got "
        "{r} inputs with world_size 8.",
        "RuntimeError: output tensor must have the same type as input tensor",
        "RuntimeError: All tensor operands to scatter/gather must have the same number of elements",
    ],
    "timeout": [
        "[Rank {r}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum={seq}, OpType=ALLREDUCE, "
        "NumelIn={n}, NumelOut={n}, Timeout(ms)=1800000) ran for 1800{ms} milliseconds before timing out.",
        "torch.distributed.DistStoreError: Timed out after 901 seconds waiting for clients. 3/4 clients joined.",
        "RuntimeError: Timed out initializing process group in store based barrier on rank: {r}, for key: "
        "store_based_barrier_key:1 (world_size=8, worker_count=6, timeout=0:30:00)",
        "torch.distributed.DistBackendError: [{r}] is setting up NCCL communicator and retrieving ncclUniqueId from "
        "[0] via c10d key-value store by key '0', but store->get('0') got error: Socket Timeout",
        "RuntimeError: [../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:81] Timed out waiting 1800000ms for "
        "recv operation to complete",
        "[PG ID 0 PG GUID 0(default_pg) Rank {r}] Timeout at NCCL work: {seq}, last enqueued NCCL work: {seq}, last "
        "completed NCCL work: {n}.",
        "torch.distributed.elastic.rendezvous.api.RendezvousTimeoutError",
        "RuntimeError: Socket Timeout",
        "[Rank {r}] ProcessGroupNCCL's watchdog got stuck for 480 seconds without making progress in monitoring "
        "enqueued collectives. This typically indicates a NCCL/CUDA API (e.g., CudaEventDestroy) hang blocking the "
        "watchdog, and could be triggered by another thread holding the GIL inside a CUDA api (for example, "
        "CudaEventDestroy), or other deadlock-prone behaviors.",
        "[Rank {r}] Heartbeat monitor timed out! Process will be terminated after dumping debug info.",
        "torch.distributed.DistNetworkError: The client socket has timed out after 1800s while trying to connect "
        "to ({host}, {port}).",
        "[E ProcessGroupNCCL.cpp:828] [Rank {r}] Some NCCL operations have failed or timed out. Due to the "
        "asynchronous nature of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data.",
    ],
    "exit": [
        "Segmentation fault (core dumped)",
        "Killed",
        "Bus error (core dumped)",
        "Aborted (core dumped)",
        "Fatal Python error: Segmentation fault",
        "terminate called after throwing an instance of 'c10::DistBackendError'",
        "*** SIGSEGV received at time={big} on cpu {dev} ***",
        "srun: error: {host}: task {r}: Exited with exit code 1",
        "srun: error: {host}: task {r}: Killed",
        "mpirun noticed that process rank {r} with PID {pid} on node {host} exited on signal 9 (Killed).",
        "Floating point exception (core dumped)",
        "Illegal instruction (core dumped)",
        "torch.multiprocessing.spawn.ProcessExitedException: process {r} terminated with signal SIGKILL",
        "Process {r} terminated with exit code 1",
        "[{host}:{pid}] *** Process received signal ***",
        "[{host}:{pid}:0:{tid}] Caught signal 11 (Segmentation fault: address not mapped to object at address 0x8)",
    ],
    "launcher": [
        "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: 1) local_rank: {r} (pid: {pid}) of "
        "binary: /usr/bin/python3",
        "[2024-05-01 10:00:00,000] torch.distributed.elastic.multiprocessing.api: [ERROR] failed (exitcode: -9) "
        "local_rank: {r} (pid: {pid}) of binary: /opt/conda/bin/python",
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
        "[2024-05-01 10:00:00,000] [ERROR] [launch.py:321:sigkill_handler] ['/usr/bin/python', '-u', 'train.py', "
        "'--local_rank={r}'] exits with return code = 1",
        "subprocess.CalledProcessError: Command '['/usr/bin/python', '-u', 'train.py', '--local_rank={r}']' returned "
        "non-zero exit status 1.",
        "A worker died or was killed while executing a task by an unexpected system error. To troubleshoot the "
        "problem, check the logs for the dead worker. RayTask ID: ffff Worker ID: 7c3 Node ID: 2a Worker IP address: "
        "{ip} Worker port: {port} Worker PID: {pid} Worker exit type: SYSTEM_ERROR",
        "ray.exceptions.RayActorError: The actor died unexpectedly before finishing this task.",
        "torch.distributed.elastic.rendezvous.api.RendezvousClosedError",
        "INFO:torch.distributed.elastic.agent.server.api:[default] Worker group FAILED. 3/3 attempts left; will "
        "restart worker group",
        "srun: error: Node failure on {host}",
        "slurmstepd: error: *** STEP {big}.0 ON {host} CANCELLED AT 2024-05-01T10:00:00 ***",
        "Primary job  terminated normally, but 1 process returned a non-zero exit code. Per user-direction, the job "
        "has been aborted.",
        "pdsh@{host}: {host}: ssh exited with exit code 1",
        "RuntimeError: Horovod has been shut down. This was caused by an exception on one of the ranks or an attempt "
        "to allreduce, allgather or broadcast a tensor after one of the ranks finished execution.",
    ],
    "stall": [
        "[2024-05-01 10:00:00.000000: W /tmp/pip-req-build/horovod/common/stall_inspector.cc:107] One or more tensors "
        "were submitted to be reduced, gathered or broadcasted by subset of ranks and are waiting for remainder of "
        "ranks for more than 60 seconds. This may indicate that different ranks are trying to submit different "
        "tensors or that only subset of ranks is submitting tensors, which will cause deadlock. Missing ranks: {r}: "
        "[DistributedAdam_Allreduce/cond_{n}/HorovodAllreduce_grad_0]",
        "RuntimeError: Rank {r} failed to pass monitoredBarrier in 30000 ms",
        "RuntimeError: [Rank 0]: Ranks {r}, {r2} failed to pass monitoredBarrier in 30000 ms",
        "[Rank {r}] Observed flight recorder dump signal from another rank via TCPStore.",
        "[Rank {r}] Received a dump signal due to a collective timeout from rank {r2} and we will try our best to "
        "dump the debug info.",
        "[Rank {r}] Exception (either an error or timeout) detected by watchdog at work: {seq}, last enqueued NCCL "
        "work: {seq}, last completed NCCL work: {n}.",
        "Stalled ranks: {r}: [allreduce.noname.{n}]",
        "[E ProcessGroupGloo.cpp:138] Rank {r} successfully reached monitoredBarrier, but received errors while "
        "waiting for send/recv from rank 0. Please check rank 0 logs for faulty rank.",
        "[Rank {r}]  - To our best knowledge, ranks [{r2}] are the lagging ranks that caused this timeout. They "
        "never joined any collectives",
        "Not all ranks joining collective {seq} at entry {n}",
    ],
}

#: wrappers a failure line may arrive behind (``{line}`` is the line)
WRAPPERS: dict[str, str] = {
    "none": "{line}",
    "rank": "[rank{r}]:{line}",
    "mpirun": "[1,{r}]<stderr>:{line}",
    "slurm": "{r}: {line}",
    "pdsh": "{host}: {line}",
    "ray": "(RayWorkerWrapper pid={pid}, ip={ip}) {line}",
    "kubectl": "2024-05-01T10:00:00.{ns}Z {line}",
    "docker": "trainer-1  | {line}",
    "torchrun": "[default{r}]:{line}",
    # horovodrun --prefix-output-with-timestamp / Open MPI --timestamp-output: a ctime stamp glued to the tag
    "stamped": "Fri Sep 25 16:52:53 2020[{r}]<stderr>:{line}",
}


def n_phrasings() -> int:
    return sum(len(v) for v in PHRASINGS.values())


def fill(template: str, rng: random.Random) -> str:
    """A template with its slots filled from ``rng``."""
    r = rng.randrange(0, 8)
    return template.format(
        r=r,
        r2=(r + 1 + rng.randrange(0, 7)) % 8,
        host=rng.choice(["node7", "gpu-a100-03", "ip-10-0-1-23", "worker-2"]),
        ip=f"10.{rng.randrange(256)}.{rng.randrange(256)}.{rng.randrange(1, 255)}",
        port=rng.randrange(1024, 65535),
        pid=rng.randrange(100, 4_000_000),
        tid=rng.randrange(100, 4_000_000),
        dev=rng.randrange(0, 8),
        n=rng.randrange(2, 100_000),
        seq=rng.randrange(1, 10_000),
        ms=rng.randrange(10, 99),
        big=rng.randrange(10**8, 10**10),
        ns=rng.randrange(10**8, 10**9),
    )


def healthy_chatter(rng: random.Random, n_ranks: int = 4) -> list[str]:
    """A generated healthy multi-rank log: NCCL INFO init chatter, NCCL's benign WARNs, progress lines."""
    host = "node1"
    lines = []
    for r in range(n_ranks):
        pid = 4000 + r
        p = f"{host}:{pid}:{pid} [{r}] NCCL INFO "
        lines += [
            f"[rank{r}]:{p}Bootstrap : Using eth0:10.0.0.{r + 1}<0>",
            f"[rank{r}]:{host}:{pid}:{pid} [{r}] NCCL WARN NET/Plugin : dlerror=libnccl-net.so: cannot open shared "
            "object file: No such file or directory No plugin found (libnccl-net.so), using internal implementation",
            f"[rank{r}]:{p}NET/IB : No device found.",
            f"[rank{r}]:{host}:{pid}:{pid} [{r}] NCCL WARN Could not find real path of /sys/class/net/eth0/device",
            f"[rank{r}]:{p}comm 0x55d1c0e{r} rank {r} nranks {n_ranks} cudaDev {r} busId {r}1000 commId 0xabc - Init "
            "COMPLETE",
        ]
    for step in range(rng.randrange(5, 30)):
        lines.append(f"[rank0]:step {step} loss {2.5 / (step + 1):.4f} lr 3e-4 grad_norm 1.02 tokens/s 41230")
    lines += [
        f"[rank{r}]:{host}:{4000 + r}:{4000 + r} [{r}] NCCL INFO comm 0x55d1c0e{r} rank {r} nranks "
        f"{n_ranks} cudaDev {r} busId {r}1000 - Destroy COMPLETE"
        for r in range(n_ranks)
    ]
    return lines


@dataclass(frozen=True)
class Base:
    """A healthy log: one text file's lines (its name keeps the rank a file name gives)."""

    name: str
    lines: tuple[str, ...]


def _blind_scored(batch: str) -> bool:
    return (BLIND / f"{batch}.json").exists()


def bases(rng: random.Random | None = None, *, chatter: int = 4, batches: bool = True) -> list[Base]:
    """Every healthy log: the recorded fixed runs' combined logs, the corpus' negative controls (a
    case of a new batch only once its blind score is recorded; none with ``batches=False``, so a
    seeded subset stays the same as batches arrive), ``chatter`` generated ones and ``chatter`` runs
    shown only by their progress lines (:func:`healthy_progress`)."""
    rng = rng or random.Random(0)
    out = []
    for p in sorted(RECORDED.glob("*/fixed-*/combined.log")):
        out.append(Base(f"recorded/{p.parent.parent.name}/{p.parent.name}", tuple(p.read_text().splitlines())))
    for cj in sorted(WILD.glob("*/case.json")):
        case = json.loads(cj.read_text())
        if case.get("role") != "negative-control":
            continue
        if case.get("batch") and (not batches or not _blind_scored(case["batch"])):
            continue
        for f in case["files"]:
            text = (cj.parent / f).read_text(errors="replace")
            out.append(Base(f"wild/{case['id']}/{f}", tuple(text.splitlines())))
    for k in range(chatter):
        out.append(Base(f"chatter/{k}", tuple(healthy_chatter(rng, n_ranks=2 + 2 * (k % 3)))))
    for k in range(chatter):
        out.append(Base(f"progress/{k}", tuple(healthy_progress(k))))
    return out


#: training and benchmark progress as frameworks print it, with nothing distributed on any line
_PROGRESS_FORMS = (
    "[rank0]:[titan] 2025-05-28 21:13:37,816 - root - INFO - step: {i:2d}  loss:  {loss:.4f}  grad_norm:  0.83  "
    "memory: 9.46GiB(64.99%)  tps: 7,282  tflops: 0.52  mfu: 0.17%",
    "Epoch: [0]  [{i:4d}/7393]  eta: 16:41:59  lr: 0.000100  class_error: 99.64  loss: {loss:.4f} (76.2864)",
    "epoch:1 loss:{loss:.4f}:   7%|7         | {i}/391 [00:05<00:46,  7.91it/s]",
    "{i}\timages/sec: 106.{i} +/- 0.3 (jitter = 1.2)\t7.851",
)


def healthy_progress(k: int, steps: int = 12) -> list[str]:
    """A healthy run shown only by its progress lines (one framework's form each): an all-clear at low
    confidence, which one failure line anywhere must still take away."""
    form = _PROGRESS_FORMS[k % len(_PROGRESS_FORMS)]
    return [form.format(i=i, loss=3.0 - i / 50) for i in range(1, steps + 1)]


@dataclass(frozen=True)
class Trial:
    base: str
    family: str
    phrasing: int
    wrapper: str
    position: int
    line: str
    verdict: str

    @property
    def cleared(self) -> bool:
        return self.verdict == "no-failure"


def make(base: Base, family: str, k: int, wrapper: str, rng: random.Random) -> tuple[list[str], int, str]:
    """The base's lines with one failure line inserted at a random position."""
    line = WRAPPERS[wrapper].replace("{line}", fill(PHRASINGS[family][k], rng).replace("{", "{{").replace("}", "}}"))
    line = fill(line, rng)
    pos = rng.randrange(0, len(base.lines) + 1)
    return list(base.lines[:pos]) + [line] + list(base.lines[pos:]), pos, line


def check(base: Base, family: str, k: int, wrapper: str, rng: random.Random, workdir: Path) -> Trial:
    """Insert, load, diagnose: one trial."""
    import denpex_nb as dx

    lines, pos, line = make(base, family, k, wrapper, rng)
    name = base.name.rsplit("/", 1)[-1]
    if not name.endswith((".log", ".txt")):
        name += ".log"
    path = workdir / name
    path.write_text("\n".join(lines) + "\n")
    d = dx.diagnose(dx.load(str(path), progress=False))
    return Trial(base.name, family, k, wrapper, pos, line, str(d.verdict))


def trial_rng(seed: int, i: int) -> random.Random:
    """Trial ``i``'s own random source: a trial is the same whatever ran before it."""
    return random.Random(seed * 1_000_003 + i)


def run(n: int, seed: int, base_list: list[Base], workdir: Path) -> list[Trial]:
    """``n`` trials of :func:`plan`, each in its own folder under ``workdir``."""
    out = []
    for i, (base, fam, k, wrapper) in enumerate(plan(n, seed, base_list)):
        work = workdir / str(i)
        work.mkdir()
        out.append(check(base, fam, k, wrapper, trial_rng(seed, i), work))
    return out


#: the seeded subset the test runs (stable bases only: no batch case)
SUBSET_SEED = 7
SUBSET_TRIALS = 54


def subset(workdir: Path) -> list[Trial]:
    return run(SUBSET_TRIALS, SUBSET_SEED, bases(random.Random(SUBSET_SEED), batches=False), workdir)


def plan(n: int, seed: int, base_list: list[Base]) -> list[tuple[Base, str, int, str]]:
    """``n`` trials: the phrasings in turn, each behind a random wrapper in a random base."""
    rng = random.Random(seed)
    every = [(fam, k) for fam, v in PHRASINGS.items() for k in range(len(v))]
    return [(rng.choice(base_list), *every[i % len(every)], rng.choice(sorted(WRAPPERS))) for i in range(n)]
