"""The failure catalog, as data: one dict per class, keyed by its stable id.

Written in our own words from the project's ground truth (docs/gloo-ground-truth.md) and the
log-format reference. Every entry has the same keys; :mod:`denpex_nb.analysis.catalog` turns them
into :class:`~denpex_nb.analysis.catalog.CatalogEntry` objects and tests check the shape.

``fingerprints`` are the log signatures that point at the class: ``pattern`` is a Python regex
matched against one log line (prefixes removed), ``evidence`` names the source, ``means`` says what
the line proves. Fingerprints teach and confirm; the diagnosis itself works from parsed frames.
"""

from __future__ import annotations

COLLECT_MORE = (
    "Rerun with TORCH_DISTRIBUTED_DEBUG=DETAIL (every rank checks each collective's fingerprint "
    "before running it), keep Flight Recorder dumps (TORCH_FR_BUFFER_SIZE=2000; on gloo dump "
    "explicitly), set NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,COLL on NCCL, or switch on the "
    "denpex_nb.trace collective tracer (DENPEX_TRACE_DIR=<dir>)."
)

ENTRIES: list[dict] = [
    {
        "id": "shape-mismatch",
        "title": "Ranks passed tensors of different shapes to the same collective",
        "category": "collective-mismatch",
        "tags": ["shapes", "dynamic-shapes", "all_gather", "all_reduce", "padding"],
        "summary": "At one collective the ranks disagree on the number of elements they send or receive, or "
        "send as many elements in differently shaped tensors.",
        "fingerprints": [
            {
                "name": "watchdog-numel-differs",
                "pattern": r"Watchdog caught collective operation timeout: WorkNCCL\(SeqNum=\d+, OpType=\w+, NumelIn=\d+",
                "evidence": "ProcessGroupNCCL watchdog lines of several ranks",
                "means": "Same SeqNum and OpType on every rank but a different NumelIn on some: the shapes differ.",
            },
            {
                "name": "detail-shapes",
                "pattern": r"Collectives differ in the following aspects:.*Tensor Tensor shapes: ",
                "evidence": "TORCH_DISTRIBUTED_DEBUG=DETAIL fingerprint check",
                "means": "DETAIL compared the first tensor's shape of two ranks and names both shapes.",
            },
            {
                "name": "gloo-enforce-bytes",
                "pattern": r"op\.preamble\.length <= op\.nbytes\. \d+ vs \d+",
                "evidence": "gloo EnforceNotMet (the process aborts with SIGABRT)",
                "means": "A peer sent more bytes than this rank's buffer holds: sizes differ (shape or dtype).",
            },
            {
                "name": "gloo-invalid-size",
                "pattern": r"ProcessGroupGloo::\w+: invalid tensor size at index \d+",
                "evidence": "gloo local argument check",
                "means": "The output list does not match the input size; gloo refuses uneven lists.",
            },
            {
                "name": "fr-size-mismatch",
                "pattern": r"Error type: SIZE_OR_SYNTAX_MISMATCH",
                "evidence": "torchfrtrace over Flight Recorder dumps",
                "means": "The analyzer found different input/output sizes at one collective.",
            },
            # The classic pair, in our own words:
            {
                "name": "dynamic-sequence-length-timeout",
                "pattern": r"OpType=(ALLREDUCE|ALLGATHER|_ALLGATHER_BASE), NumelIn=\d+.*ran for \d+ milliseconds before timing out",
                "evidence": "NCCL watchdog timeout after a batch with a different sequence length per rank",
                "means": "Dynamic sequence lengths (padding to the local max, packing, a short last batch) give every "
                "rank a different tensor size; NCCL cannot detect it, blocks, and the watchdog fires "
                "after the timeout (10 min by default) on every rank.",
            },
            {
                "name": "detected-boxes-all-gather-hang",
                "pattern": r"OpType=(ALLGATHER|_ALLGATHER_BASE)",
                "evidence": "dist.all_gather of per-image detections hangs or aborts",
                "means": "A detector keeps a different number of boxes per rank ([N_r, 4]); dist.all_gather "
                "needs the same shape everywhere, so it hangs on NCCL and aborts or corrupts on gloo.",
            },
        ],
        "mechanism": {
            "nccl": "NCCL never checks sizes. Ranks with a larger buffer wait for bytes that never come, so every "
            "rank blocks until the ProcessGroupNCCL watchdog times out (default 10 minutes) and tears the "
            "process down with SIGABRT; or, when sizes happen to line up in chunks, data is silently wrong.",
            "gloo": "gloo checks byte counts per chunk. The rank whose receive buffer is too small aborts with "
            "gloo::EnforceNotMet 'X vs Y' (SIGABRT, no Python traceback); the other rank may get "
            "'Connection reset/closed by peer', may return corrupt data silently, or, for all_reduce, the "
            "smaller rank returns wrong values and the larger one hangs until the timeout.",
            "detail": "TORCH_DISTRIBUTED_DEBUG=DETAIL makes every rank raise at once, naming both ranks' shapes.",
            "same-numel": "Same element count in another shape ([4096] vs [64, 64], [4, 2] vs [2, 4]): no backend "
            "notices, the collective completes and combines elements by flat position, so the "
            "result is silently wrong unless the reshape was meant. Only DETAIL mode, Flight "
            "Recorder shapes or denpex_nb.trace show it.",
        },
        "root_cause": "Data-dependent tensor sizes reach a collective: dynamic sequence lengths, a per-rank number "
        "of detections, an uneven last batch, or code that sizes the output list from the local "
        "tensor. Collectives other than all_to_all need the same size on every rank.",
        "fix": {
            "text": "Exchange the sizes first, pad to the maximum, run the collective, then trim each rank's slice; "
            "or assert equal shapes before the collective in debug runs.",
            "code": "from denpex_nb.fixes import all_gather_uneven, check_same_shapes\n\n"
            "boxes_per_rank = all_gather_uneven(boxes)      # list of [N_r, 4] tensors, N_r may differ\n"
            "check_same_shapes(logits)                       # raises naming every rank's shape\n"
            "dist.all_reduce(logits)",
        },
        "confirm": {
            "checklist": [
                "Print tensor.shape and dtype on every rank right before the collective.",
                "Rerun with TORCH_DISTRIBUTED_DEBUG=DETAIL: a 'Tensor Tensor shapes' mismatch names both shapes.",
                "Compare NumelIn of the watchdog lines of all ranks at the same SeqNum.",
            ],
            "command": "denpex-nb diagnose <logs and dumps>",
        },
        "related": ["dtype-mismatch", "rank-desync", "timeout-undetermined"],
        "broader": [],
        "affects": ["PyTorch", "NCCL", "gloo", "DDP", "FSDP", "DeepSpeed", "torchvision detection"],
    },
    {
        "id": "dtype-mismatch",
        "title": "Ranks passed tensors of different dtypes to the same collective",
        "category": "collective-mismatch",
        "tags": ["dtype", "mixed-precision", "autocast"],
        "summary": "One rank's tensor is float64 (or bfloat16, int64 ...) where the others send float32.",
        "fingerprints": [
            {
                "name": "detail-dtypes",
                "pattern": r"Tensor Tensor dtypes: \w+vs \w+",
                "evidence": "TORCH_DISTRIBUTED_DEBUG=DETAIL",
                "means": "Both ranks' dtypes are named.",
            },
            {
                "name": "gloo-enforce-bytes",
                "pattern": r"op\.preamble\.length <= op\.nbytes\. \d+ vs \d+",
                "evidence": "gloo EnforceNotMet",
                "means": "A byte-count mismatch: a dtype mismatch shows the same way as a shape mismatch.",
            },
            {
                "name": "fr-dtype-mismatch",
                "pattern": r"Error type: COLLECTIVE_DTYPE_MISMATCH",
                "evidence": "torchfrtrace",
                "means": "Different input dtypes at one collective.",
            },
        ],
        "mechanism": {
            "nccl": "NCCL reduces raw bytes with the dtype each rank declares: the ranks hang (different byte "
            "counts) or reduce garbage silently (equal byte counts, e.g. f32[8] vs f64[4]).",
            "gloo": "Different byte counts abort the rank with the smaller buffer (EnforceNotMet '16 vs 8'); equal "
            "byte counts pass unnoticed and every rank gets garbage, exit code 0.",
            "detail": "DETAIL raises on every rank at once with 'Tensor Tensor dtypes: Doublevs Float'.",
        },
        "root_cause": "A tensor created with a different default dtype, autocast or .double() on one code path, "
        "or a metric accumulated in float64 on some ranks only.",
        "fix": {
            "text": "Cast to one agreed dtype right before the collective; check dtypes in debug runs.",
            "code": "from denpex_nb.fixes import check_same_shapes\n\n"
            "t = t.to(torch.float32)\n"
            "check_same_shapes(t)   # also compares dtypes across ranks\n"
            "dist.all_reduce(t)",
        },
        "confirm": {
            "checklist": [
                "Print tensor.dtype on every rank before the collective.",
                "Rerun with TORCH_DISTRIBUTED_DEBUG=DETAIL and look for 'Tensor Tensor dtypes'.",
            ],
            "command": "denpex-nb diagnose <logs and dumps>",
        },
        "related": ["shape-mismatch"],
        "broader": ["shape-mismatch"],
        "affects": ["PyTorch", "NCCL", "gloo", "AMP"],
    },
    {
        "id": "op-mismatch",
        "title": "Ranks called different collectives at the same point",
        "category": "collective-mismatch",
        "tags": ["control-flow", "broadcast", "all_reduce"],
        "summary": "At the same sequence number one rank runs, say, broadcast while the others run all_reduce.",
        "fingerprints": [
            {
                "name": "detail-op-type",
                "pattern": r"Op type: \w+vs \w+",
                "evidence": "TORCH_DISTRIBUTED_DEBUG=DETAIL",
                "means": "Both ranks' collective types are named.",
            },
            {
                "name": "watchdog-optype-differs",
                "pattern": r"WorkNCCL\(SeqNum=\d+, OpType=\w+",
                "evidence": "watchdog lines of several ranks",
                "means": "Same SeqNum with a different OpType across ranks.",
            },
            {
                "name": "fr-type-mismatch",
                "pattern": r"Error type: COLLECTIVE_TYPE_MISMATCH",
                "evidence": "torchfrtrace",
                "means": "Different collective types at one sequence number.",
            },
        ],
        "mechanism": {
            "nccl": "Each rank launches a different kernel; they wait for each other forever, until the watchdog.",
            "gloo": "Both ranks wait for messages that never come and time out together ('Timed out waiting ... "
            "for recv operation'); nothing names the op.",
            "detail": "DETAIL raises at once: 'Op type: ALLREDUCEvs BROADCAST'.",
        },
        "root_cause": "Rank-dependent control flow: `if rank == 0: broadcast(...)` where the other ranks do "
        "something else, or logging/metrics code that runs collectives on some ranks only.",
        "fix": {
            "text": "Make every rank call the same collectives in the same order; move rank-specific work "
            "outside collective code paths.",
            "code": "# every rank takes part, rank 0 is the source\ndist.broadcast(t, src=0)",
        },
        "confirm": {
            "checklist": [
                "Search for collectives inside `if rank == ...` branches.",
                "Rerun with TORCH_DISTRIBUTED_DEBUG=DETAIL: 'Op type: Xvs Y'.",
            ],
            "command": "denpex-nb diagnose <logs and dumps>",
        },
        "related": ["rank-desync"],
        "broader": [],
        "affects": ["PyTorch", "NCCL", "gloo"],
    },
    {
        "id": "rank-desync",
        "title": "Ranks are at different places in the collective sequence",
        "category": "collective-mismatch",
        "tags": ["skip", "extra-collective", "laggard", "uneven-steps"],
        "summary": "A rank skipped, added or never reached a collective; the others wait for it.",
        "fingerprints": [
            {
                "name": "monitored-barrier",
                "pattern": r"failed to pass monitoredBarrier",
                "evidence": "TORCH_DISTRIBUTED_DEBUG=DETAIL",
                "means": "Names the ranks that never arrived.",
            },
            {
                "name": "desync-report",
                "pattern": r"didn't join collective #\d+|never joined any collectives",
                "evidence": "TORCH_NCCL_DESYNC_DEBUG report",
                "means": "Names the lagging ranks.",
            },
            {
                "name": "status-enqueued-differs",
                "pattern": r"last enqueued (NCCL )?work: \d+, last completed (NCCL )?work: \d+",
                "evidence": "watchdog status lines",
                "means": "A lower last-enqueued seq marks the laggard.",
            },
            {
                "name": "fr-not-joining",
                "pattern": r"Not all ranks joining collective",
                "evidence": "torchfrtrace",
                "means": "Names the missing ranks at one sequence number.",
            },
            {
                "name": "ras-count-mismatch",
                "pattern": r"Communicator ranks have different \w+ operation counts",
                "evidence": "NCCL RAS",
                "means": "Some ranks launched fewer operations.",
            },
        ],
        "mechanism": {
            "nccl": "The ranks that went ahead block in a collective the laggard never calls, until the watchdog.",
            "gloo": "If the laggard exits, the others fail at once with 'Connection closed/reset by peer'; if it "
            "stays alive, they hang until the timeout.",
            "detail": "DETAIL's monitoredBarrier names the missing rank (not the op).",
        },
        "root_cause": "An uneven number of batches per rank, an early `break`/`return` on one rank, a collective "
        "in a rank-dependent branch, or a rank that is simply slow (I/O, a straggler).",
        "fix": {
            "text": "Give every rank the same number of steps (DistributedSampler with drop_last, or "
            "torch.distributed.algorithms.Join for uneven inputs).",
            "code": "from torch.distributed.algorithms.join import Join\n\n"
            "with Join([model]):\n"
            "    for batch in loader:\n"
            "        loss = model(batch).sum(); loss.backward()",
        },
        "confirm": {
            "checklist": [
                "Count steps/collectives per rank (the denpex_nb.trace files do).",
                "Rerun with TORCH_DISTRIBUTED_DEBUG=DETAIL for the monitoredBarrier report.",
            ],
            "command": "denpex-nb diagnose <logs and dumps>",
        },
        "related": ["op-mismatch", "rank-crash", "syncbn-eval-hang", "unused-parameters"],
        "broader": [],
        "affects": ["PyTorch", "NCCL", "gloo", "DDP", "FSDP"],
    },
    {
        "id": "unused-parameters",
        "title": "DDP: some parameters received no gradient on some ranks",
        "category": "ddp",
        "tags": ["DDP", "find_unused_parameters", "control-flow"],
        "summary": "Data-dependent branches leave parameters unused on some ranks; DDP's buckets disagree.",
        "fingerprints": [
            {
                "name": "ddp-prior-reduction",
                "pattern": r"Expected to have finished reduction in the prior iteration",
                "evidence": "DDP reducer",
                "means": "A bucket never became ready: a parameter got no gradient.",
            },
            {
                "name": "ddp-param-names",
                "pattern": r"Parameters which did not receive grad for rank \d+",
                "evidence": "DDP reducer with TORCH_DISTRIBUTED_DEBUG=INFO/DETAIL",
                "means": "Names the parameters per rank; sets differing across ranks mean data-dependent control flow.",
            },
        ],
        "mechanism": {
            "nccl": "Ranks all-reduce different buckets: hangs until the watchdog, or the reducer raises on the "
            "next iteration.",
            "gloo": "The reducer raises at the next forward on the rank with unused parameters; peers see a "
            "peer-gone error or time out.",
        },
        "root_cause": "A module whose output does not reach the loss on some steps or ranks (gated branches, MoE "
        "experts, auxiliary heads).",
        "fix": {
            "text": "Pass find_unused_parameters=True, or make every parameter contribute to the loss on every "
            "rank (multiply an unused branch by zero).",
            "code": "model = DDP(model, find_unused_parameters=True)\n"
            "# or: loss = loss + 0.0 * sum(p.sum() for p in model.branch.parameters())",
        },
        "confirm": {
            "checklist": ["Set TORCH_DISTRIBUTED_DEBUG=INFO to get the parameter names per rank."],
            "command": "denpex-nb diagnose <logs>",
        },
        "related": ["rank-desync"],
        "broader": ["rank-desync", "shape-mismatch"],
        "affects": ["PyTorch", "DDP"],
    },
    {
        "id": "syncbn-eval-hang",
        "title": "SyncBatchNorm ran its collective on some ranks only",
        "category": "collective-mismatch",
        "tags": ["SyncBatchNorm", "eval", "rank-0-only"],
        "summary": "Evaluation or a forward pass in train mode on one rank only: SyncBatchNorm's all_gather "
        "waits for ranks that never call it.",
        "fingerprints": [
            {
                "name": "syncbn-stack",
                "pattern": r"sync_batch_norm|SyncBatchNorm",
                "evidence": "tracebacks, Flight Recorder stacks",
                "means": "The pending collective was issued from SyncBatchNorm.",
            },
        ],
        "mechanism": {
            "nccl": "The evaluating rank blocks in SyncBatchNorm's all_gather until the watchdog fires.",
            "gloo": "The evaluating rank hangs until the timeout, or fails when the others exit.",
        },
        "root_cause": "Validation on rank 0 only (`if rank == 0: evaluate(model)`) with the model in train mode, "
        "or SyncBatchNorm in a module that only some ranks run.",
        "fix": {
            "text": "Call model.eval() before rank-0-only evaluation (SyncBatchNorm then uses running stats and "
            "no collective), or run evaluation on every rank.",
            "code": "model.eval()\nwith torch.no_grad():\n    if rank == 0:\n        evaluate(model)",
        },
        "confirm": {
            "checklist": [
                "Check model.training during evaluation.",
                "Look for sync_batch_norm in the stack of the pending collective.",
            ],
            "command": "denpex-nb diagnose <logs and dumps>",
        },
        "related": ["rank-desync"],
        "broader": ["op-mismatch", "rank-desync"],
        "affects": ["PyTorch", "SyncBatchNorm", "DDP"],
    },
    {
        "id": "rank-crash",
        "title": "A rank died first; the other ranks' errors are collateral",
        "category": "process",
        "tags": ["exception", "OOM", "signal", "collateral"],
        "summary": "One rank raised, ran out of memory or was killed; the others then failed in collectives.",
        "fingerprints": [
            {
                "name": "python-exception",
                "pattern": r"^\w+(Error|Exception): ",
                "evidence": "a traceback on one rank before the others' collective errors",
                "means": "That rank stopped taking part in collectives.",
            },
            {
                "name": "cuda-oom",
                "pattern": r"CUDA out of memory",
                "evidence": "CUDA caching allocator",
                "means": "The rank ran out of GPU memory.",
            },
            {
                "name": "killed",
                "pattern": r"exitcode\s*: -9|SIGKILL|SIGSEGV|SIGBUS",
                "evidence": "torchrun ChildFailedError table",
                "means": "The rank was killed or crashed.",
            },
        ],
        "mechanism": {
            "nccl": "Peers block in their next collective until the watchdog; torchrun's 'Root Cause' may name a "
            "peer that timed out, not the rank that died.",
            "gloo": "Peers fail at once with 'Connection closed by peer' (or hang until the timeout).",
        },
        "root_cause": "A bug, bad data or memory pressure on one rank; not the collectives themselves.",
        "fix": {
            "text": "Fix the first rank's error (its traceback); the other ranks' timeouts are consequences.",
            "code": "# read the initiating rank's traceback first:\n# denpex-nb diagnose logs/  ->  initiating rank",
        },
        "confirm": {
            "checklist": [
                "Find the earliest error in time across ranks.",
                "Ignore ranks with exit code -15 (SIGTERM from the agent).",
            ],
            "command": "denpex-nb diagnose <logs>",
        },
        "related": ["rank-desync", "nccl-error"],
        "broader": ["rank-desync"],
        "affects": ["PyTorch", "torchrun", "NCCL", "gloo"],
    },
    {
        "id": "nccl-error",
        "title": "NCCL or system error not caused by a collective mismatch",
        "category": "system",
        "tags": ["NCCL", "network", "CUDA", "driver"],
        "summary": "NCCL reported an error of its own: network, CUDA, invalid usage (duplicate GPU ...).",
        "fingerprints": [
            {
                "name": "nccl-error-in",
                "pattern": r"NCCL error in: .*, (unhandled system error|unhandled cuda error|"
                r"invalid usage|invalid argument|remote process exited)",
                "evidence": "DistBackendError",
                "means": "NCCL failed; the WARN line above says why.",
            },
            {
                "name": "nccl-warn",
                "pattern": r"NCCL WARN",
                "evidence": "NCCL_DEBUG",
                "means": "The cause in NCCL's words.",
            },
        ],
        "mechanism": {"nccl": "The communicator is aborted; all ranks fail.", "gloo": "Not applicable."},
        "root_cause": "Network or NIC problems, two ranks on one GPU, mismatched NCCL versions, CUDA faults.",
        "fix": {
            "text": "Read the NCCL WARN lines; check one process per GPU (LOCAL_RANK -> cuda device), the "
            "network interfaces (NCCL_SOCKET_IFNAME) and NCCL versions.",
            "code": "torch.cuda.set_device(int(os.environ['LOCAL_RANK']))",
        },
        "confirm": {
            "checklist": ["Rerun with NCCL_DEBUG=INFO and read the WARN lines."],
            "command": "NCCL_DEBUG=INFO torchrun ...; denpex-nb diagnose <logs>",
        },
        "related": ["rank-crash", "timeout-undetermined"],
        "broader": [],
        "affects": ["NCCL", "CUDA"],
    },
    {
        "id": "timeout-undetermined",
        "title": "Ranks failed or timed out and this evidence shows no divergence and no cause",
        "category": "undetermined",
        "tags": ["timeout", "hang", "failure", "collect-more-evidence"],
        "summary": "Ranks failed (collective timeouts, peers gone, non-zero exits, distributed errors) but the "
        "evidence does not show which rank diverged, how, or why: a failure, honestly undetermined.",
        "fingerprints": [
            {
                "name": "gloo-timeout",
                "pattern": r"Timed out waiting \d+ms for (recv|send) operation",
                "evidence": "gloo",
                "means": "A collective did not complete in time; no op or peer named.",
            },
            {
                "name": "watchdog-timeout",
                "pattern": r"Watchdog caught collective operation timeout",
                "evidence": "ProcessGroupNCCL",
                "means": "Identical on all ranks: the divergence is not visible.",
            },
        ],
        "mechanism": {
            "nccl": "Every rank times out at the same SeqNum with the same size: no divergence is "
            "visible from the watchdog lines alone.",
            "gloo": "A size mismatch in all_reduce without DETAIL often looks exactly like this.",
        },
        "root_cause": "Unknown from this evidence: a mismatch the logs cannot show, a straggler, a deadlock "
        "outside collectives, or the network.",
        "fix": {
            "text": COLLECT_MORE,
            "code": "import denpex_nb.trace\ndenpex_nb.trace.enable('traces/')   # one line per collective, per rank",
        },
        "confirm": {
            "checklist": ["Collect more evidence: " + COLLECT_MORE],
            "command": "denpex-nb diagnose <logs and dumps>",
        },
        "related": ["shape-mismatch", "rank-desync", "nccl-error"],
        "broader": [],
        "affects": ["PyTorch", "NCCL", "gloo"],
    },
    {
        "id": "no-failure",
        "title": "No collective failure found",
        "category": "none",
        "tags": ["ok"],
        "summary": "The evidence shows no divergence and no failure.",
        "fingerprints": [],
        "mechanism": {"nccl": "-", "gloo": "-"},
        "root_cause": "None visible.",
        "fix": {"text": "Nothing to fix from this evidence.", "code": ""},
        "confirm": {
            "checklist": ["Make sure the logs of every rank were included."],
            "command": "denpex-nb diagnose <logs and dumps>",
        },
        "related": [],
        "broader": [],
        "affects": [],
    },
    {
        "id": "no-evidence",
        "title": "Nothing distributed could be read from this evidence",
        "category": "undetermined",
        "tags": ["collect-more-evidence", "unreadable"],
        "summary": "No reader recognised a collective, a distributed error, a launcher line or an exit status "
        "in the input: this is not an all-clear, it is a 'could not tell'.",
        "fingerprints": [],
        "mechanism": {"nccl": "-", "gloo": "-"},
        "root_cause": "The input holds no evidence the readers know (another format, the wrong files, only "
        "application output), or it is empty.",
        "fix": {
            "text": "Collect the ranks' stdout/stderr (torchrun --log-dir or --tee 3), and "
            + COLLECT_MORE[0].lower()
            + COLLECT_MORE[1:],
            "code": "import denpex_nb.trace\ndenpex_nb.trace.enable('traces/')   # one line per collective, per rank",
        },
        "confirm": {
            "checklist": [
                "Check incident.sources (format per file) and incident.unparsed (what no reader recognised).",
                "Collect more evidence: " + COLLECT_MORE,
            ],
            "command": "denpex-nb diagnose <every rank's logs and dumps>",
        },
        "related": ["timeout-undetermined", "no-failure"],
        "broader": [],
        "affects": [],
    },
]
