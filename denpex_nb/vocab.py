"""The project's vocabulary, defined once: counters, failure classes, error kinds, ops, states.

Every layer imports these names instead of spelling the strings itself, so a counter's
preference order, the set of timeout kinds or a class id cannot drift between the readers, the
diagnosis and the pictures. The members are ``str`` subclasses: they compare equal to the plain
strings stored in the frames and serialise as those strings.

This module imports nothing heavy (no pandas): the tracer and the CLI can read it cheaply.
"""

from __future__ import annotations

from enum import Enum


class _Name(str, Enum):
    """A name that is also its string (``SeqKind.TRACE == "trace"``, ``str(SeqKind.TRACE) == "trace"``)."""

    def __str__(self) -> str:
        return str.__str__(self)

    def __format__(self, spec: str) -> str:
        return str.__format__(str(self), spec)


class SeqKind(_Name):
    """Sequence counters. Different counters are never compared with each other."""

    TRACE = "trace"  # denpex_nb.trace per-pg counter, 1-based like work
    FR = "fr"  # Flight Recorder collective_seq_id
    DETAIL = "detail"  # DETAIL fingerprint SequenceNumber (0-based)
    WORK = "work"  # WorkNCCL SeqNum / status-line ids
    NCCL_POSITION = "nccl_position"  # ordinal of a COLL line per communicator
    NCCL_OPCOUNT = "nccl_opcount"  # NCCL COLL opCount (hex in the log), per communicator
    DESYNC = "desync"  # desync-report '#N', per rank


#: the one preference order: when one collective is seen through several counters, the most
#: precise comes first (complete per-rank records, then fingerprints, then log lines)
SEQ_KIND_PREFERENCE: tuple[SeqKind, ...] = (
    SeqKind.TRACE,
    SeqKind.FR,
    SeqKind.DETAIL,
    SeqKind.WORK,
    SeqKind.NCCL_POSITION,
    SeqKind.NCCL_OPCOUNT,
    SeqKind.DESYNC,
)
#: counters that can be aligned across ranks per (pg, seq) (desync '#N' is per rank; NCCL opCounts
#: are compared per communicator size by their own rule)
ALIGNABLE_SEQ_KINDS: tuple[SeqKind, ...] = SEQ_KIND_PREFERENCE[:5]
#: counters whose per-rank records are complete up to the rank's end (a dump, a flushed tracer
#: file), unlike log lines, which a copy can cut anywhere
COMPLETE_RECORD_KINDS = frozenset({SeqKind.TRACE, SeqKind.FR})


class ClassId(_Name):
    """Failure classes: the ids of the catalog (``denpex_nb.analysis.catalog``), in its order."""

    SHAPE_MISMATCH = "shape-mismatch"
    DTYPE_MISMATCH = "dtype-mismatch"
    OP_MISMATCH = "op-mismatch"
    RANK_DESYNC = "rank-desync"
    UNUSED_PARAMETERS = "unused-parameters"
    SYNCBN_EVAL_HANG = "syncbn-eval-hang"
    RANK_CRASH = "rank-crash"
    NCCL_ERROR = "nccl-error"
    TIMEOUT_UNDETERMINED = "timeout-undetermined"
    NO_FAILURE = "no-failure"
    NO_EVIDENCE = "no-evidence"


#: verdicts that abstain: a failure whose cause the evidence cannot tell, or nothing readable
ABSTENTIONS = frozenset({ClassId.TIMEOUT_UNDETERMINED, ClassId.NO_EVIDENCE})


class ErrorKind(_Name):
    """Kinds of ``errors`` rows (see ``denpex_nb.incident``)."""

    EXCEPTION = "exception"  # a Python exception with its traceback (message = last line)
    OOM = "oom"  # CUDA / CPU out of memory
    WATCHDOG_TIMEOUT = "watchdog_timeout"  # ProcessGroupNCCL WorkNCCL timeout (also blocking-wait variant)
    WATCHDOG_STATUS = "watchdog_status"  # "failure detected by watchdog at work ..." status lines
    WATCHDOG_ABORT = "watchdog_abort"  # teardown: "Some NCCL operations have failed", taking process down
    HEARTBEAT = "heartbeat"  # heartbeat monitor / watchdog stuck
    DESYNC_REPORT = "desync_report"  # TORCH_NCCL_DESYNC_DEBUG analysis lines
    DETAIL_MISMATCH = "detail_mismatch"  # DETAIL CollectiveFingerPrint mismatch
    MONITORED_BARRIER = "monitored_barrier"  # DETAIL monitoredBarrier: ranks failed to pass
    STALL_REPORT = "stall_report"  # Horovod's stall inspector: ranks missing from tensors others submitted
    DDP_UNUSED_PARAMETERS = "ddp_unused_parameters"
    DDP_ERROR = "ddp_error"  # other DDP reducer / model-consistency errors
    GLOO_ENFORCE = "gloo_enforce"  # gloo::EnforceNotMet "X vs Y" (process aborts)
    GLOO_INVALID_SIZE = "gloo_invalid_size"  # ProcessGroupGloo::<op>: invalid tensor size/type at index
    GLOO_PEER_GONE = "gloo_peer_gone"  # connection reset / closed by peer, socket closed
    GLOO_TIMEOUT = "gloo_timeout"  # Timed out waiting Nms for recv/send operation to complete
    NCCL_WARN = "nccl_warn"  # NCCL WARN line
    NCCL_ERROR = "nccl_error"  # DistBackendError: NCCL error in ..., async NCCL errors, '-> N' traces
    NCCL_RAS = "nccl_ras"  # NCCL RAS MISMATCH/INCOMPLETE/TIMEOUT/DEAD record
    ABORT = "abort"  # terminate called after throwing ... / SIGABRT seen in text
    SIGNAL = "signal"  # a rank ended by a signal (elastic table, spawn, manifest)
    EXIT = "exit"  # a rank exited non-zero without a signal
    CHILD_FAILED = "child_failed"  # torchrun ChildFailedError table row
    AGENT = "agent"  # torchrun agent "failed (exitcode ...)" / closing-signal lines
    FR_FINDING = "fr_finding"  # a finding of torchfrtrace's text output
    LOAD_ERROR = "load_error"  # an input that could not be read (corrupt dump, unreadable file)
    WARNING = "warning"  # a warning worth showing (deprecated collective, etc.)


class SignalSeverity(_Name):
    """How severe a line says it is (the failure-signal layer, ``denpex_nb.signals``)."""

    FATAL = "fatal"
    ERROR = "error"
    WARNING = "warning"
    INFO = "info"


class SignalFamily(_Name):
    """What a failure signal is about (``denpex_nb.signals.FAMILIES``; docs/signals.md)."""

    NETWORK = "network"  # NCCL, or a network statement (reset, refused, closed by peer, a transport fault)
    DEVICE = "device"  # CUDA errors, ECC, Xid
    MEMORY = "memory"  # out of memory
    SIZE = "size"  # sizes, shapes, numel, split sizes, dtypes of a collective or across ranks
    TIMEOUT = "timeout"
    EXIT = "exit"  # exit codes, signals, kills, aborts
    LAUNCHER = "launcher"  # torchrun / mpirun / slurm / Ray saying a worker failed
    STALL = "stall"  # stall reports, ranks that did not join or arrive or disagree on a value (positions)
    PORT = "port"  # a port the process could not bind or listen on (address already in use): its own set-up
    SETUP = "setup"  # the process's own build or set-up cannot do what the job asks (a backend not built in)
    COMPONENT = "component"  # a distributed component named (gloo, c10d, a store, a socket), no cause stated
    STOP = "stop"  # the job was stopped from outside (a user's Ctrl-C, a scheduler's or operator's signal): no crash
    OTHER = "other"  # a failure with no family (a plain exception)
    FINISH = "finish"  # not a failure: the work said it finished
    RECOVERED = "recovered"  # not a failure: a connection that had failed was made after all
    ACTIVITY = "activity"  # not a failure: a line only a running distributed job prints (the job ran)
    PROGRESS = "progress"  # not a failure: training or benchmark progress (a counter and a metric, a result line)


#: error kinds a rank shows when a collective failed under it (someone else may have started it):
#: the timeouts and the peers gone
VICTIM_KINDS = frozenset(
    {
        ErrorKind.WATCHDOG_TIMEOUT,
        ErrorKind.WATCHDOG_STATUS,
        ErrorKind.WATCHDOG_ABORT,
        ErrorKind.HEARTBEAT,
        ErrorKind.GLOO_TIMEOUT,
        ErrorKind.GLOO_PEER_GONE,
    }
)
#: the timeouts among them (a peer gone is not a timeout)
TIMEOUT_KINDS = frozenset(
    {
        ErrorKind.WATCHDOG_TIMEOUT,
        ErrorKind.WATCHDOG_STATUS,
        ErrorKind.WATCHDOG_ABORT,
        ErrorKind.HEARTBEAT,
        ErrorKind.GLOO_TIMEOUT,
    }
)
#: error kinds that mean something failed on their rank (warnings and unreadable inputs do not; an
#: NCCL WARN counts only when its text reports a failure: many are benign)
FAILURE_KINDS = frozenset(set(ErrorKind) - {ErrorKind.WARNING, ErrorKind.LOAD_ERROR, ErrorKind.NCCL_WARN})
#: error kinds that are collective failures themselves, not a rank's own crash
COLLECTIVE_ERROR_KINDS = frozenset(
    {
        ErrorKind.DETAIL_MISMATCH,
        ErrorKind.MONITORED_BARRIER,
        ErrorKind.STALL_REPORT,
        ErrorKind.GLOO_ENFORCE,
        ErrorKind.GLOO_INVALID_SIZE,
        ErrorKind.GLOO_PEER_GONE,
        ErrorKind.GLOO_TIMEOUT,
        ErrorKind.NCCL_ERROR,
        ErrorKind.WATCHDOG_TIMEOUT,
        ErrorKind.WATCHDOG_STATUS,
        ErrorKind.WATCHDOG_ABORT,
        ErrorKind.DESYNC_REPORT,
        ErrorKind.DDP_ERROR,
        ErrorKind.DDP_UNUSED_PARAMETERS,
    }
)

#: Normalised collective names. Readers map every spelling (ALLGATHER, _ALLGATHER_BASE,
#: gloo:all_gather, AllGather ...) onto these with :func:`denpex_nb.ops.normalize_op`.
OPS = (
    "all_reduce",
    "all_reduce_coalesced",
    "all_gather",
    "all_gather_into_tensor",
    "all_gather_coalesced",
    "reduce_scatter",
    "reduce_scatter_tensor",
    "broadcast",
    "reduce",
    "gather",
    "scatter",
    "barrier",
    "all_to_all",
    "all_to_all_single",
    "send",
    "recv",
    "recv_anysource",
    "coalesced",
    "all_reduce_sparse",
    "unknown",
)


class State(_Name):
    """States of a collective record."""

    SCHEDULED = "scheduled"
    STARTED = "started"
    COMPLETED = "completed"
    TIMED_OUT = "timed_out"
    FAILED = "failed"


#: the message of an ``exception`` row whose traceback lost its final line (cut, interleaved):
#: the exception is unknown, so it is not evidence of a rank's own failure
TRUNCATED_TRACEBACK = "traceback without its exception line"

#: the ``warning_category`` of a ``warning`` row for an exception Python ignored and reported
#: (``Exception ignored in: <... __del__ ...>`` and its traceback: raised in a destructor, a callback or
#: at exit, it never reached the program, which went on): not a failure; its lines signal none
IGNORED_EXCEPTION = "ignored exception"

#: words noticed in every line read, parsed or not, while the file is read (the scanner's literal
#: prefilter: no rescan of the text afterwards): name -> the literal spellings that count. The
#: Incident says which files mention each (``Incident.mentions``); the rules read that.
MENTIONS: dict[str, tuple[str, ...]] = {
    "syncbn": ("SyncBatchNorm", "sync_batch_norm"),
    # words of a job of several processes (a backend, the c10d API, a launcher's environment, a
    # collective's name, a device mesh, mpirun's tagged output): a file without any of them, and without a rank, host or group anywhere, is
    # a lone process's (a traceback there is its own crash: analysis/signals.cut_traceback_decides)
    "distributed": (
        "distributed",
        "Distributed",
        "NCCL",
        "nccl",
        "gloo",
        "c10d",
        "world_size",
        "WORLD_SIZE",
        "MASTER_ADDR",
        "local_rank",
        "LOCAL_RANK",
        "all_reduce",
        "allreduce",
        "all_gather",
        "allgather",
        "reduce_scatter",
        "all_to_all",
        "alltoall",
        "broadcast",
        "barrier",
        "DeviceMesh",  # torch.distributed.device_mesh (TP, FSDP2, HSDP): a mesh of ranks
        "device_mesh",
        "]<stdout>:",  # mpirun --tag-output's "[job,rank]<stdout>:", wherever a line holds it
        "]<stderr>:",
    ),
}
