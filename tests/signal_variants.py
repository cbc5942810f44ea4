"""A grammar of failure lines by family, the wrappers real logs put around them, and the ways a
paste mangles them: the generated variants that tests/ingest/test_signals.py and
tests/analysis/test_signal_verdicts.py check the failure-signal layer with (issue #16).

Each phrase is (family, text, key): ``key`` is a piece of the text that must survive a cut for the
line to still say its family. Phrases are combinations (subsystem x what went wrong), so the
grammar holds well over 100 phrasings; none is copied from a recorded case.
"""

from __future__ import annotations

import itertools

from denpex_nb.vocab import SignalFamily as F

_NCCL_SUBSYS = ("NET/IB", "NET/Socket", "NET/OFI", "bootstrap.cc:73", "transport/net_ib.cc:1295", "proxy.cc:1401")
_NCCL_WHAT = (
    ("Connection closed by remote peer node7<34012>", "closed by remote peer"),
    ("Call to recv from 10.1.2.3<51234> failed : Connection reset by peer", "reset by peer"),
    ("Got completion from peer 10.0.0.3<49024> with error 12, opcode 32753, len 0, vendor err 129", "with error 12"),
    ("socketStartConnect: Connect to 10.0.0.1<1234> failed : Software caused connection abort", "failed"),
    ("ibv_poll_cq error 5: remote access error", "ibv_poll_cq error"),
    ("fi_cq_read failed with error -5 (Input/output error)", "fi_cq_read failed"),
)
_NCCL_CODES = ("ncclInternalError", "ncclSystemError", "ncclRemoteError", "ncclInvalidUsage", "ncclInvalidArgument")
_EXC_WRAPPERS = ("RuntimeError", "torch.distributed.DistBackendError", "ValueError", "Exception")

#: NCCL's own errors inside another framework's exception or log line (TensorFlow, Horovod, XLA, JAX,
#: a plain RuntimeError): an NCCL call that failed with a result's text, or the code by name
_NCCL_CALLS = ("ncclCommInitRank", "ncclAllReduce", "ncclGroupEnd", "ncclBroadcast", "ncclAllGather")
_NCCL_TEXTS = (
    "unhandled system error",
    "unhandled cuda error",
    "internal error - please report this issue to the NCCL developers",
    "invalid usage",
)
_FOREIGN = (
    "tensorflow.python.framework.errors_impl.UnknownError:  {call} failed: {text}",
    "horovod.common.exceptions.HorovodInternalError: {call} failed: {text}",
    "jaxlib.xla_extension.XlaRuntimeError: INTERNAL: external/xla/xla/service/gpu/nccl_utils.cc:297: "
    "NCCL operation {call}(...) failed: {text}",
    "2024-05-01 10:00:00.123456: E external/xla/xla/service/gpu/nccl_utils.cc:191] Aborting communicator: "
    "0x5555a108ff90 due to async NCCL error: {text}",
)
FOREIGN_NCCL = [
    (F.NETWORK, form.format(call=call, text=text), text.split(" - ")[0] if "{text}" in form else call)
    for form, call, text in zip(
        itertools.cycle(_FOREIGN), itertools.cycle(_NCCL_CALLS), [t for t in _NCCL_TEXTS for _ in range(5)]
    )
]
NETWORK = (
    [
        (F.NETWORK, f"host-{k}:2231:2290 [{k}] NCCL WARN {s} : {w}", key)
        for k, (s, (w, key)) in enumerate(itertools.product(_NCCL_SUBSYS, _NCCL_WHAT))
    ]
    + [
        (F.NETWORK, f"{e}: NCCL communicator failed: {c}: internal check failed, NCCL version 2.21.5", c)
        for e, c in itertools.product(_EXC_WRAPPERS, _NCCL_CODES)
    ]
    + [
        (
            F.NETWORK,
            "RuntimeError: [gloo/transport/tcp/pair.cc:534] Connection closed by peer [10.2.0.5]:6140",
            "closed by peer",
        ),
        (F.NETWORK, "torch.distributed.DistNetworkError: Connection reset by peer", "reset by peer"),
        (F.NETWORK, "ConnectionRefusedError: [Errno 111] Connection refused", "Connection refused"),
        (
            F.NETWORK,
            "[c10d] The client socket has failed to connect to [node3]:29500 (errno: 110 - Connection timed out)",
            "failed to connect",  # the words that make it the network's ("socket has failed" alone is c10d's)
        ),
    ]
)
MEMORY = [
    (
        F.MEMORY,
        f"{e}: CUDA out of memory. Tried to allocate {n} GiB. GPU 0 has a total capacity of 79.1 GiB",
        "out of memory",
    )
    for e, n in itertools.product(("torch.OutOfMemoryError", "torch.cuda.OutOfMemoryError", "RuntimeError"), (2, 20))
] + [
    (
        F.MEMORY,
        "RuntimeError: [enforce fail at alloc_cpu.cpp:83] DefaultCPUAllocator: can't allocate memory: you tried",
        "allocate memory",
    ),
    (F.MEMORY, "MemoryError: Unable to allocate 3.2 GiB for an array", "MemoryError"),
]
DEVICE = [
    (F.DEVICE, f"{e}: CUDA error: {w}", w.split()[0] + " " + w.split()[1])
    for e, w in itertools.product(
        ("RuntimeError", "torch.AcceleratorError"),
        (
            "an illegal memory access was encountered",
            "device-side assert triggered",
            "uncorrectable ECC error encountered",
            "unspecified launch failure",
        ),
    )
] + [
    (F.DEVICE, "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.", "Xid"),
    # the key runs into the CUDA error's text: cut before it, NCCL's check of a CUDA call is NCCL's (NCCL_CUDA)
    (F.DEVICE, "NCCL WARN Cuda failure 'an illegal memory access was encountered'", "Cuda failure 'an illegal"),
]
_SIZE_OPS = ("all_gather", "all_reduce", "reduce_scatter", "broadcast", "all_to_all")
SIZE = (
    [
        (
            F.SIZE,
            f"RuntimeError: Tensors must have the same number of elements across ranks for {op}: 4096 vs 4095",
            f"ranks for {op}",
        )
        for op in _SIZE_OPS
    ]
    + [
        (
            F.SIZE,
            f"AssertionError: {what} mismatch across ranks in {op}: rank 0 has 1234, rank 3 has 1240",
            f"ranks in {op}",
        )
        for what, op in itertools.product(("parameter count", "numel", "split sizes"), ("all_gather", "reduce_scatter"))
    ]
    + [
        (
            F.SIZE,
            f"ValueError: split_sizes do not match the world size for {op} (got 7, world 8)",
            f"world size for {op}",
        )
        for op in ("all_to_all_single", "reduce_scatter")
    ]
    + [
        (
            F.SIZE,
            f"RuntimeError: shapes of the {op} inputs differ across ranks: [4096, 1024] vs [4096, 1023]",
            "differ across ranks",
        )
        for op in _SIZE_OPS
    ]
)
SIZE += [
    # a library's check, no exception name on the line (a quoted paste): the plural "mismatches"
    (
        F.SIZE,
        "Cannot apply desired operation due to shape mismatches. All shapes across devices must be valid.",
        "shapes across",  # the cross-rank word is part of what makes it the size family of a collective
    ),
]
SIZE += [
    (
        F.SIZE,
        f"RuntimeError: {lib} expects the same model on every rank, but rank {r} has {n} params, while rank 0 has inconsistent {n - 1} params",
        "inconsistent",
    )
    for lib, r, n in (("DDP", 1, 2247), ("FSDP", 3, 512))
] + [
    (
        F.SIZE,
        f"RuntimeError: [{r}]: params[4] in this process with sizes [243, 256] appears not to match sizes of the same param in process 0.",
        "process 0",
    )
    for r in (1, 2)
]
SIZE += [
    # c10d's own split-size check, raised inside all_to_all_single: its words name no collective
    (F.SIZE, f"{e}: Split sizes doesn't match total dim 0 size", "Split sizes doesn't match total dim")
    for e in ("RuntimeError", "torch.distributed.DistBackendError")
]
TIMEOUT = [
    (F.TIMEOUT, f"{e}: Timed out after {s} seconds waiting for clients. 3/4 clients joined.", "Timed out")
    for e, s in itertools.product(("torch.distributed.DistStoreError", "RuntimeError"), (300, 1800))
] + [
    (F.TIMEOUT, "ERROR: the operation timed out after 600000 ms in the communication layer", "timed out"),
    (F.TIMEOUT, "deadline exceeded while waiting for the collective to complete (timeout)", "deadline exceeded"),
    (
        F.TIMEOUT,
        "slurmstepd: error: *** JOB 77 ON node3 CANCELLED AT 2024-05-01T10:00:00 DUE TO TIME LIMIT ***",
        "CANCELLED",
    ),
]
EXIT = [
    (F.EXIT, w, key)
    for w, key in (
        ("Segmentation fault (core dumped)", "Segmentation fault"),
        ("Fatal Python error: Aborted", "Fatal Python error: Aborted"),
        ("Process 3 terminated with signal SIGKILL", "SIGKILL"),
        ("bash: line 1: 4411 Killed python train.py", "Killed"),
        ("worker process exited with exit code 139", "exit code 139"),
        ("Aborted (core dumped)", "Aborted"),
        ("[node3:4411] *** Process received signal ***", "received signal"),
        ("[node3:4411:0:4411] Caught signal 11 (Segmentation fault: address not mapped to object)", "Caught signal"),
    )
]
LAUNCHER = [
    (F.LAUNCHER, w, key)
    for w, key in (
        ("torch.distributed.elastic.multiprocessing.errors.ChildFailedError:", "ChildFailedError"),
        ("ray.exceptions.RayActorError: The actor died unexpectedly before finishing this task.", "RayActorError"),
        ("srun: error: node12: task 3: Exited with exit code 1", "srun: error:"),
        (
            "mpirun noticed that process rank 3 with PID 1234 on node n1 exited on signal 9 (Killed).",
            "exited on signal",
        ),
        ("Primary job  terminated normally, but 1 process returned a non-zero exit code.", "non-zero exit"),
    )
]
STALL = (
    [
        (F.STALL, w, key)
        for w, key in (
            ("One or more tensors were submitted by a subset of ranks; Stalled ranks: 2, 5", "Stalled ranks"),
            ("Missing ranks: 1, 3 have not yet joined the allreduce", "Missing ranks"),
            ("[Rank 0]: Ranks 3 failed to pass monitoredBarrier in 30000 ms", "failed to pass"),
            ("WARNING: rank 7 has not joined the collective after 120 s (stalled)", "not joined"),
            ("Not all ranks joining collective 12 at entry 3", "Not all ranks joining"),
            (
                "[Rank 0]  - To our best knowledge, ranks [2] are the lagging ranks that caused this timeout.",
                "lagging ranks",
            ),
        )
    ]
    + [
        # a cross-rank check that found the ranks disagreeing on a value: a desync (positions, traces)
        (F.STALL, w, key)
        for w, key in (
            ("Rank 1 has different values for step: 8016.0. Other ranks: 7870.0", "different values for"),
            (
                "RuntimeError: disagreement between rank0 and rank2: rank0: [12, 14, 17] rank2: [2, 3, 4]",
                "disagreement between rank",
            ),
            (
                "AssertionError: the checkpoint step of rank 5 differs from the other ranks (1200 vs 1300)",
                "differs from the other ranks",
            ),
            ("ValueError: ranks 0 and 3 disagree on the number of micro-batches", "disagree"),
        )
    ]
    + [
        # a rank that saw another rank's flight-recorder dump request: a collective timed out somewhere
        (F.TIMEOUT, "[Rank 3] Observed flight recorder dump signal from another rank via TCPStore.", "dump signal"),
        # an NCCL WARN that a thing NCCL needs was not found (not one of the benign plugin probes)
        (
            F.NETWORK,
            "host-1:2231:2290 [1] bootstrap.cc:77 NCCL WARN Bootstrap : no socket interface found",
            "no socket interface found",
        ),
    ]
)
# (NCCL's errors inside other frameworks' exceptions come last: the earlier phrases keep their places
# in the samples tests take by index)
PHRASES: list[tuple[str, str, str]] = (
    NETWORK + MEMORY + DEVICE + SIZE + TIMEOUT + EXIT + LAUNCHER + STALL + FOREIGN_NCCL
)

#: lines that look like failures and are not (nothing failed)
BENIGN = [
    "host-1:2231:2290 [1] NCCL INFO NET/Plugin: No plugin found (libnccl-net.so), using internal implementation",
    "host-1:2231:2290 [1] NCCL WARN NET/Plugin: Failed to open libnccl-net.so : libnccl-net.so: cannot open shared object",
    "host-1:2231:2290 [1] NCCL INFO [Service thread] Connection closed by localRank 1",
    "/opt/conda/lib/python3.11/site-packages/torch/distributed/c10d.py:12: FutureWarning: `foo` is deprecated and will fail in 2.9",
    "UserWarning: TypedStorage is deprecated. It will be removed in the future",
    "step 100: 0 errors, 0 failures, exit code 0",
    "[W1201 10:00:00.000 ProcessGroupNCCL.cpp:1250] Warning: WARNING: process group has NOT been destroyed before we destruct ProcessGroupNCCL.",
    "WARNING: Unable to find hostfile, will proceed with training with local resources only.",
    "INFO: retrying connection to the store, attempt 1 failed",
    "host-1:2231:2290 [1] proxy.cc:1111 NCCL WARN [Service thread] Unknown command 4242 from localRank -1",
    "host-1:2231:2290 [1] net_plugin.cc:765 NCCL WARN Cannot get incoming CPU.",
    "I1201 10:00:00.000000 123 store.cpp:12] connection reset, retrying",
    # a debugger's notice naming a function that returns an error code (not an exception class)
    "warning: Cuda API error detected: cudaGetLastError returned (0x2c0)",
    # c10d's TCPStore at exit: libuv's loop still closing handles (EBUSY), closed on the next pass
    "[I1130 00:45:12.457812345 TCPStoreLibUvBackend.cpp:1354] [c10d] uv_loop_close failed with:-16 errn:EBUSY desc:resource busy or locked",
    "62489 TCPStoreLibUvBackend.cpp:1354] [c10d] uv_loop_close failed with:-16 errn:EBUSY desc:resource busy or locked",
]

#: (name, function of (rank, text) -> line): what launchers and collectors put in front of a line
WRAPPERS = {
    "plain": lambda r, t: t,
    "torch": lambda r, t: f"[rank{r}]:{t}",
    "torchrun": lambda r, t: f"[default{r}]:{t}",
    "mpirun": lambda r, t: f"[1,{r}]<stderr>:{t}",
    "slurm": lambda r, t: f"{r}: {t}",
    "pdsh": lambda r, t: f"node{r}: {t}",
    "ray": lambda r, t: f"(RayTrainWorker pid={4000 + r}, ip=10.0.0.{r + 1}) {t}",
    "kubectl": lambda r, t: f"2024-05-01T10:00:0{r}.123456789Z [rank{r}]:{t}",
    "docker": lambda r, t: f"2024-05-01T10:00:0{r}.123456Z {t}",
}
#: wrappers from which the loader reads a global rank (slurm's ``3: `` is trusted only where several
#: lines carry it: one such line alone could be any text that starts with a number)
RANKED = {"torch", "mpirun", "kubectl"}


def healthy_lines(n_ranks: int = 4, steps: int = 30) -> list[str]:
    """A healthy multi-rank run: NCCL init chatter, training steps, a clean finish."""
    out = []
    for r in range(n_ranks):
        out.append(f"[rank{r}]:node{r}:1{r}00:1{r}01 [{r}] NCCL INFO Bootstrap : Using eth0:10.0.0.{r + 1}<0>")
        out.append(
            f"[rank{r}]:node{r}:1{r}00:1{r}01 [{r}] NCCL INFO comm 0x55d0 rank {r} nranks {n_ranks} cudaDev {r} "
            f"nvmlDev {r} busId 1{r}000 commId 0x7e1 - Init COMPLETE"
        )
    for i in range(steps):
        for r in range(n_ranks):
            out.append(f"[rank{r}]:step {i} loss={2.5 - i * 0.01:.4f} lr=3.0e-04 grad_norm=1.2{r}")
    return out


def diagnose_files(tmp_path, files: dict[str, list[str]]):
    """Write each ``{name: lines}`` to ``tmp_path`` and diagnose them as a user would (``load`` then
    ``diagnose``, strict: a rule that fails is an error here, not a note)."""
    import denpex_nb as dx

    paths = []
    for name, lines in files.items():
        p = tmp_path / name
        p.write_text("\n".join(lines) + "\n")
        paths.append(str(p))
    return dx.diagnose(dx.load(*paths, progress=False), strict=True)
