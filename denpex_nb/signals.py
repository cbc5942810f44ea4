"""Failure signals: every input line, read by a reader or not, gets a severity and a family.

Why: the readers recognise formats; a failure printed in a format no reader knows (an ``NCCL WARN``
from a transport, an NCCL error code inside another exception, a line a paste cut mid-way) would
otherwise leave the diagnosis without a failure, and a failure it cannot see ends as ``no-failure``.
This layer reads generic vocabulary only (severity markers, exception class names, error words,
exit codes and signals), independent of any one format, so a failure still *signals* when nothing
parses it. Diagnosis uses it two ways (``denpex_nb.analysis.signals``): ``no-failure`` needs no
failure signal on any rank, and when no specific rule explains a failure the verdict's family
follows the first failure signal.

The vocabulary is data, in this module only (documented in ``docs/signals.md``):

* :data:`NEEDLES`: the literal prefilter. The scanner searches them in the same multi-literal pass as
  the readers' needles (:mod:`.scan`), so a line holding none of them costs nothing here.
* :data:`SEVERITY`: markers of fatal / error / warning lines (glog letters, level words,
  ``Traceback``, exception class names).
* :data:`FAILURE_WORDS`: words that say something failed whatever the level (``failed``,
  ``refused``, ``reset by peer``, ``timed out``, ``killed``, ``abort``, a non-zero exit code ...).
* :data:`FAMILIES`: ordered (family, pattern) pairs; the first that matches names the family.
  A size family needs a collective or cross-rank word too (:data:`COLLECTIVE_CONTEXT`): a local
  ``size of tensor a must match`` is the process's own error.
* :data:`BENIGN`: lines that look like failures and are not (NCCL's plugin-not-found WARNs,
  deprecation warnings, "0 errors", a process group destroyed after a clean finish, ...).
* :data:`FINISH`: lines that say the work finished (a crash after one is a teardown crash).

:func:`classify` returns a :class:`Signal` or None (nothing worth a row). It runs on the few
lines the needles found, so its regular expressions never meet ordinary training output; each is
linear (no nested quantifiers; the hang guard in tests/test_regex_linear.py checks them).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from .vocab import SignalFamily, SignalSeverity

# --- the literal prefilter -----------------------------------------------------------------------

#: every line holding one of these is classified; the rest never is. Each family's and each
#: severity's vocabulary is reachable through one of them (case variants spelled out: the search is
#: literal and case-sensitive).
NEEDLES: tuple[bytes, ...] = (
    # severities and exception class names
    b"ERROR",
    b"Error",
    b"error",
    b"Exception",
    b"FATAL",
    b"Fatal",
    b"CRITICAL",
    b"WARN",
    b"Traceback",
    # failure words
    b"fail",
    b"Fail",
    b"FAIL",
    b"refused",
    b"reset",
    b"closed",
    b"timed out",
    b"Timed out",
    b"timeout",
    b"Timeout",
    b"killed",
    b"Killed",
    b"abort",
    b"Abort",
    b"ABORT",
    b"Segmentation fault",
    b"core dumped",
    # C++'s abort on an uncaught exception, found even where a paste cut it before the exception's name
    b"terminate called",
    b"exit code",
    b"exitcode",
    b"exit status",
    b"return code",
    b"SIGSEGV",
    b"SIGABRT",
    b"SIGKILL",
    b"SIGBUS",
    b"SIGTERM",
    b"Signal ",
    b"on signal",
    b"received signal",
    b"Caught signal",
    b"caught signal",
    b"eadline exceeded",
    # the distributed runtimes of other frameworks (JAX / XLA / TensorFlow's coordination service over
    # gRPC): a status code in capitals, a gRPC description, a task's missed heartbeats
    b"eadline Exceeded",
    b"DEADLINE_EXCEEDED",
    b"UNAVAILABLE",
    b"eartbeat",
    b"CANCELLED",
    b"reempt",
    b"non-zero",
    # a transport's work completion that failed (IB: ``with status=12 ... vendor err 129``)
    b"with status=",
    b"vendor err",
    # libfabric's providers (EFA, verbs ...) under NCCL's OFI plugin: their warning level, their errno
    b"<warn>",
    b"prov_errno",
    # a stack dump of a live process (py-spy, faulthandler, gdb: STACK_DUMP)
    b"most recent call first",
    b"(idle)",
    b"(active",
    b"(LWP ",
    # families without an error word of their own
    b"out of memory",
    b"OOM",
    b"Xid",
    b"ECC",
    b"stall",
    b"Stall",
    b"Missing ranks",
    b"not joined",
    b"ot all ranks",
    b"lagging",
    b"dump signal",
    b"mismatch",
    b"Mismatch",
    # a cross-rank check that found ranks disagreeing (a rank whose value differs from the others')
    b"disagree",
    b"ifferent value",
    # a library saying its ranks or workers fell out of step (OUT_OF_SYNC)
    b"out of sync",
    b"out-of-sync",
    b"inconsistent between",
    b"inconsistent across",
    # a connection failing at INFO level while retrying, and one made after all
    b"No route",
    b"unreachable",
    b"Connected after",
    b"Init COMPLETE",
    # the job stopped from outside (a user's interrupt, a scheduler's or an operator's signal)
    b"death signal",
    b"KeyboardInterrupt",
    b"got signal",
    b"closing signal SIG",
    b"^C",
    b"srun: interrupt",
    b"Ctrl-C",
    b"Forwarding signal",
    # benign lines only a running distributed job prints (ACTIVITY)
    b"under current context",
    b"to perform barrier",
    b"Guessing device ID",
    b"bucket view strides",
    b"did not find any unused parameters",
    b"buckets have been rebuilt",
    b"in distributed setting",
    b"Skipping step",
    b"skipped=",
    b"finished initializing model",
    b"number of skipped iterations",
    b"status.SUCCEEDED",
    b"successfully finished",
    # a rank announcing that it enters process-group initialisation (ACTIVITY, INIT_ENTERING)
    b"nitializing ddp",
    b"nitializing distributed",
    b"nitializing torch distributed",
    b"nitializing TorchBackend",
    b"nitializing process group",
    b"Added key: store_based_barrier",
    b"Init START",
    b"NCCL version ",
    # a rank waiting at init for the others to join (and the wait ending)
    b"store based barrier",
    b"store-based barrier",
    # work finished (a crash after it is a teardown crash)
    b"inished",
    b"omplete",
)

# --- severity ------------------------------------------------------------------------------------

#: an exception class name; not a function that returns an error (``cudaGetLastError``, ``cudaPeekAtLastError``)
_CLASS_NAME = r"\b[A-Za-z_]\w*?(?<!GetLast)(?<!PeekAtLast)(?:Error|Exception)\b"
#: TensorFlow's / XLA's log header, a level letter between a timestamp and the source location
#: (``2024-04-12 23:39:41.656900: E external/xla/xla/pjrt/distributed/client.cc:96] ...``): the glog
#: letter in another place; ``{}`` is the letter
_TF_HEADER = r"\d\d:\d\d:\d\d\.\d{{3,9}}: {} [\w./-]{{1,200}}:\d{{1,6}}\]"
#: Ray's C++ log header (its core worker, raylet, GCS: ``[2023-11-02 13:17:59,227 E 19045 21937] logging.cc:97:
#: ...``): the level letter between the time and the pid and thread id; ``{}`` is the letter (a year and
#: milliseconds of two digits: :func:`classify` reads every run of digits as ``11``)
_RAY_HEADER = r"\[\d{{2,4}}-\d\d-\d\d \d\d:\d\d:\d\d,\d{{2,3}} {} \d{{1,10}} \d{{1,10}}\]"
#: severity markers, most severe first (the first that matches is the line's severity)
SEVERITY: tuple[tuple[SignalSeverity, re.Pattern], ...] = (
    (
        SignalSeverity.FATAL,
        re.compile(
            r"\bFATAL\b|\bFatal\b|(?:^|[\s\[])F\d{4} \d\d:\d\d|Segmentation fault|core dumped|terminate called|"
            + _TF_HEADER.format("F")
            + "|"
            + _RAY_HEADER.format("[FC]")
            + r""
            r"|Fatal Python error|\bSIG(?:SEGV|ABRT|BUS|ILL|FPE)\b"
            # oneCCL's level tag (``2023:11:28-16:35:45:(35980) |CCL_FATAL| ...``; ``|CCL_ERROR|`` below)
            r"|\|CCL_FATAL\|"
        ),
    ),
    (
        SignalSeverity.ERROR,
        re.compile(
            # (``socket.gaierror``: an exception class Python spells in lower case)
            r"\bERROR\b|\bCRITICAL\b|(?:^|[\s\[])E\d{4} \d\d:\d\d|"
            + _TF_HEADER.format("E")
            + "|"
            + _RAY_HEADER.format("E")
            + r"|Traceback \(most recent call last\)|\bgaierror\b|"
            + _CLASS_NAME
            + r"|\b(?:[Ee]rror|ERR)\s*[:!\]]|\b(?:NCCL|CUDA|cuda|nccl|[Ss]ocket|[Ss]ystem|[Ii]nternal|[Rr]emote|"
            r"[Uu]nhandled|[Rr]untime|[Nn]etwork|[Cc]onnection|I/?O|[Ff]atal|[Ii]nvalid) error\b"
            # a C++ exception nothing caught, logged before the process aborts (Ray's terminate handler:
            # ``Unhandled exception: N3c105ErrorE. what(): ...``)
            r"|\b[Uu]nhandled exception\b|\|CCL_ERROR\|"
        ),
    ),
    # (libfabric writes its level as a tag after the function: ``...handle_error():737<warn> err: 5``)
    (
        SignalSeverity.WARNING,
        re.compile(
            r"\bWARN(?:ING)?\b|\bWarning\b|(?:^|[\s\[])W\d{4} \d\d:\d\d|<warn>|"
            + _TF_HEADER.format("W")
            + "|"
            + _RAY_HEADER.format("W")
        ),
    ),
)
#: a glog / NCCL level letter from the prefix stripper (``Line.severity``) as a severity
LEVEL_LETTERS = {
    "F": SignalSeverity.FATAL,
    "E": SignalSeverity.ERROR,
    "C": SignalSeverity.ERROR,
    "W": SignalSeverity.WARNING,
    "WARN": SignalSeverity.WARNING,
    "WARNING": SignalSeverity.WARNING,
    "ERROR": SignalSeverity.ERROR,
    "FATAL": SignalSeverity.FATAL,
    "I": SignalSeverity.INFO,
    "INFO": SignalSeverity.INFO,
    "D": SignalSeverity.INFO,
    "DEBUG": SignalSeverity.INFO,
    "V": SignalSeverity.INFO,
    "TRACE": SignalSeverity.INFO,
    "CALL": SignalSeverity.INFO,
    "VERSION": SignalSeverity.INFO,
    "ABORT": SignalSeverity.FATAL,
}

# --- failure words -------------------------------------------------------------------------------

#: a cross-rank consistency check that failed: ranks disagree on a value (FSDP's ``Rank 1 has different
#: values for step: 8016.0. Other ranks: 7870.0``, DeepSpeed ZeRO-3's ``disagreement between rank0 and
#: rank2``, ``rank 3 differs from the other ranks``): the ranks are in different states (a position, a
#: trace of modules), a desync; a size, shape or dtype named in it makes it the size family instead
_DISAGREE = (
    r"(?i:disagree(?:ment|s|d)?\s+(?:between|among|across|on)\s+(?:the\s+)?(?:ranks?|processes|workers)"
    r"|\branks?\s?\d+\s+(?:has|have|holds?|reports?|sees?|got)\s+(?:a\s+)?different\s+values?\s+(?:for|of)"
    r"|\branks?\s?\d+\s+(?:and|vs\.?)\s+(?:ranks?\s?)?\d+\s+disagree|\b(?:ranks|processes|workers)\s+disagree(?:d)?\b"
    r"|\b(?:differs?|is\s+different)\s+(?:from|than)\s+(?:that\s+of\s+)?(?:the\s+)?other\s+ranks)"
)
#: a library saying that its ranks or workers fell out of step with each other (fairseq's ``all_gather_list
#: requires all workers to enter the function together, so this error usually indicates that the workers
#: have fallen out of sync somehow``, ``ranks are out of sync``, its ``Fatal error: gradients are
#: inconsistent between workers``): a desync stated in words, the stall family, ahead of any cause the same
#: message guesses at (``Workers can fall out of sync if one of them runs out of memory``: an out-of-memory
#: that happened is a line of its own, and comes first)
OUT_OF_SYNC = (
    r"(?i:\b(?:ranks|workers|processes|replicas|nodes|gpus|devices)\b[^\n]{0,40}?\b(?:(?:have|has|had)\s+)?"
    r"(?:fallen|fell|falls?|gone|got(?:ten)?|gets?|are|were|is|was|becomes?|became|went|goes)\s+out[ -]of[ -]sync\b"
    r"|\bout[ -]of[ -]sync\s+(?:ranks|workers|processes|replicas)\b"
    r"|\b(?:are|is|were|was)\s+inconsistent\s+(?:between|across|among)\s+(?:the\s+)?(?:ranks|workers|processes|replicas)\b)"
)
#: a communication kernel's own report that it gave up waiting on its peers, in the words of the
#: collective and the role that waited (DeepEP's dispatch / combine kernels and their forks: ``dispatch NVL
#: receiver timeout``, ``combine forwarder timeout``, ``timeout for combine receivers``); not a setting of
#: such a timeout (``dispatch receiver timeout: 30``)
KERNEL_TIMEOUT = (
    r"(?:(?:dispatch|combine|all_?to_?all|all_?reduce|all_?gather|reduce_?scatter|broadcast|send|recv)\b[^\n]{0,40}?"
    r"\b(?:receiver|sender|forwarder|coordinator)s? timeout\b(?!\s*(?:[:=]|is|to|of|set to)\s*\d)"
    r"|timeout for (?:the )?(?:dispatch|combine|all_?to_?all|send|recv)\w* (?:receivers?|senders?|forwarders?)\b)"
)
#: a line holding one of these reports a failure whatever its level
FAILURE_WORDS = re.compile(
    r"(?<![\w/-])(?:[Ff]ail(?:ed|ing|ure|s)?|FAIL(?:ED|URE)?)(?![\w-])|\brefused\b|\b(?:reset|closed) by (?:the )?(?:remote )?peer\b"
    r"|[Cc]onnection (?:reset|closed|refused|aborted|lost)|[Bb]roken pipe|\b[Tt]imed out\b|\btiming out\b"
    r"|[Tt]imeout (?:error|exceeded|expired|reached|occurred)|\b[Tt]imeout (?:at|while|waiting|during)\b|\b(?:[Kk]illed|KILLED)\b|\b(?:[Aa]bort(?:ed|ing)?|ABORT(?:ED)?)\b"
    r"|Segmentation fault|core dumped|terminate called|out of memory|\bOOM\b|uncorrectable ECC|\bXid\b"
    r"|exit(?:ed)?(?: with)? (?:code|status)[ :=]*-?[1-9]\d*|exitcode\s*[:=]?\s*-?[1-9]\d*"
    r"|return ?code[ :=]*-?[1-9]\d*|exited on signal|(?:[Rr]eceived|[Cc]aught) signal\b|\bSIG(?:SEGV|ABRT|KILL|BUS|ILL|FPE|TERM)\b|\bSignal \d+\b"
    # c10d's watchdog catching a collective's failure (``Exception (either an error or timeout) detected by
    # watchdog at work: 9969``): the words say so only in its own phrasing
    r"|\bException \(either an error or timeout\)|\bdetected by (?:the )?watchdog\b"
    r"|[Ss]talled|Missing ranks|not (?:yet )?join(?:ed|ing)\b|[Nn]ot all ranks (?:have )?(?:joined|joining|arrived|reached)"
    r"|did not (?:arrive|join|reach)|failed to pass|lagging ranks?\b|flight recorder dump|dump signal"
    r"|(?<![\w/-])(?:[Mm]ismatch(?:ed|es)?|desync(?:hroni[sz]ed)?)(?![\w-])|(?i:deadline[ _]exceeded)|non-?zero exit"
    # an absl / gRPC status of a failed call in its capitals (JAX / XLA / TensorFlow's coordination service:
    # ``Coordination service agent in error status: DEADLINE_EXCEEDED``, ``UNAVAILABLE: Task ... heartbeat
    # timeout``, ``absl::Status: UNAVAILABLE: Failed to send RPC``); not the word inside an identifier
    r"|(?<![\w-])(?:DEADLINE_EXCEEDED|UNAVAILABLE)(?![\w-])"
    # a library's call that returned a non-zero status (NVSHMEM's error lines: ``transport.cpp:400: non-zero
    # status: 7 connect EPS failed``, ``ibgda.cpp:1345: non-zero status: 121 Error in mlx5dv_devx_obj_modify``)
    r"|\bnon-zero status:? ?-?[1-9]"
    # a call whose result was an error, as a library's check states it (Habana's HCCL process group:
    # ``Collective call returned error``); not an error code of 0
    r"|\breturned (?:an )?error\b(?!\s*(?:code\s*)?[:=]?\s*0\b)"
    # a transport's work completion that failed, whatever wraps it (IB's ``Got completion from peer
    # 10.0.0.3<49024> with status=12 ... vendor err 129``, ``with error 12``): status 0 is success
    r"|\bcompletion\b[^\n]{0,80}?\bwith (?:status ?[=:]? ?|error )0*[1-9]\d*|\bvendor err(?:or)? 0*[1-9]\d*"
    # libfabric's provider-specific errno, printed with a failed operation's error entry (``prov_errno:
    # Unknown error -114``); 0 is none
    r"|\bprov_errno:? ?(?!0\b)[\w(-]"
    r"|" + _DISAGREE + r"\b"
    r"|"
    + OUT_OF_SYNC
    # a communication kernel that gave up waiting on its peers, said as "<role> timeout" (DeepEP's ``DeepEP
    # dispatch NVL receiver timeout, channel: 3, ...``, ``combine RDMA receiver timeout``, ``dispatch
    # forwarder timeout (RDMA check)``, ``timeout for dispatch receivers, rank 3``, the same kernels in
    # forks: ``grpcoll dispatch NVL receiver timeout``): a collective that waited and got nothing
    + r"|\b"
    + KERNEL_TIMEOUT
)

# --- families ------------------------------------------------------------------------------------

#: words that put a size / shape message in a collective or across ranks
COLLECTIVE_CONTEXT = re.compile(
    # "broadcast" as the collective, not tensor broadcasting ("cannot be broadcast to", "broadcasting",
    # "broadcastable", "broadcast together": a local shape rule of one process)
    r"(?i:all_?reduce|all_?gather|reduce_?scatter|all_?to_?all|broadcast(?!ing|able|ed\b| together| to\b)"
    r"|collective|\bgather\b|\bscatter\b"
    r"|ranks?\b|across|world|\bprocess(?:es)? \d|process ?group|\bnccl\b|\bgloo\b|\bc10d\b|fingerprint|zero|fsdp|ddp|shard"
    r"|bucket|flat_?param|partition|tensor.parallel|pipeline)"
)
_SIZE = (
    r"(?i:\bsizes?\b|\bshapes?\b|\bnumel\b|split_?sizes?|number of (?:elements|parameters|params|tensors)"
    # a collective's list of tensors of the wrong length: c10d's ``Tensor list input to scatter/gather
    # must match number of collective participants``, a library's ``output list has 2 entries, expected 4``
    r"|number of (?:collective )?participants|\b\d+ entries\b|\bentries, expected"
    r"|(?:parameter|param|element|tensor) counts?|\bparams?\b|\bdtypes?\b|\blength\b)"
)
#: size checks whose words are c10d's own (raised inside a collective call, they name no collective):
#: ``Split sizes doesn't match total dim 0 size`` (all_to_all_single's split sizes)
C10D_SIZE = re.compile(r"Split sizes doesn't match total dim")
#: size errors of one process's own operations, whatever collective-sounding words a paste puts around
#: them (``DDP RuntimeError: The size of tensor a (3) must match ...``): torch's elementwise broadcasting
#: rule, and ``torch.cuda.comm``'s gather / scatter across the devices of one process (``nn.DataParallel``,
#: no process group: ``gather got an input of invalid size: got 1x1, but expected 3x1``). Never the size
#: family: the process's own error
LOCAL_SIZE = re.compile(
    r"The size of tensor a \(\d+\) must match the size of tensor b \(\d+\)"
    r"|\b(?:gather|scatter) got an input of invalid size"
)
#: a checkpoint whose saved sizes do not fit the model loading it (``load_state_dict``'s ``size mismatch
#: for w: copying a param with shape ... from checkpoint, the shape in current model is ...``, its
#: ``Error(s) in loading state_dict``, torch.distributed.checkpoint's ``Size mismatch between saved
#: torch.Size([...]) and current: ...``): whatever FSDP / ZeRO / shard words name the parameter, the sizes
#: are the file's and the model's, not a collective's. Never the size family: the process's own error
CHECKPOINT_SIZE = re.compile(
    r"\bsize mismatch for [\w.]{1,200}: copying a param|from checkpoint, the shape in current model is"
    r"|Error\(s\) in loading state_dict|Size mismatch between saved\b"
)
#: a parallel layout that does not fit the job, found by a start-up check (``World size 2 must be divisible
#: by the product of all parallel degrees``, ``world_size (1) is not divisible by tensor parallel size 2``):
#: the process's configuration error, raised before any collective ran, not a collective's sizes. Never the
#: size family: the process's own error
LAYOUT_SIZE = re.compile(
    r"(?i:\bworld[ _]?size\b[^\n]{0,40}?\b(?:must be|is not|isn't|should be|not) (?:evenly )?divisible by"
    r"|divisible by (?:the )?(?:product of (?:all )?(?:the )?)?(?:(?:tensor|pipeline|data|expert|context|sequence)[ _-]?)?"
    r"parallel(?:ism)?[ _-]?(?:degrees?|sizes?|world size)\b)"
)
#: NCCL's own error vocabulary, and its peers' (HCCL, oneCCL, the PSM transport), whatever exception,
#: framework or logger wraps it (TensorFlow's ``UnknownError: ncclCommInitRank failed: unhandled system
#: error``, Horovod's ``HorovodInternalError: ncclAllReduce failed: unhandled cuda error``, XLA's ``async
#: NCCL error``): an ``ncclResult_t`` by name, its ``ncclGetErrorString`` text, an NCCL API call that
#: failed. The network / NCCL family.
NCCL_CODES = re.compile(
    r"\bnccl(?:UnhandledCudaError|SystemError|InternalError|InvalidArgument|InvalidUsage|RemoteError)\b"
    r"|\bnccl[A-Z]\w{2,40}(?:\([^()\n]{0,40}\))? failed\b|\bunhandled (?:system|cuda) error\b|internal error - please report"
    r"|remote process exited or there was a network error|\basync NCCL error\b|\bNCCL (?:error|failure)\b"
    # HCCL, Ascend's collective library in NCCL's place (torch_npu's ProcessGroupHCCL): its errors in
    # its own words (``HCCL error in: ProcessGroupHCCL.cpp``, ``DIST call hccl api failed``, ``OPS function
    # error: HcclAllreduce, error code is 6``)
    r"|\bHCCL error\b|\bhccl api failed\b|\bHccl[A-Z]\w{2,40},? error code is [1-9]"
    # a process group's check that its library's collective call succeeded (Habana's HCCL process group:
    # ``TORCH_CHECK(hcclSuccess == hccl_result, "Collective call returned error")``)
    r"|\b[Cc]ollective call returned (?:an )?error\b"
    # oneCCL, Intel's collective library (the ``ccl`` / ``xccl`` backend of torch-ccl and XPU builds): its
    # error log level (``2024:08:21-10:24:26:( 4456) |CCL_ERROR| atl_ofi.cpp:243 init: can't find suitable
    # provider``) and the exception it throws (``RuntimeError: oneCCL: exec.cpp:134 start_workers: EXCEPTION:
    # failed to start worker # 0``)
    r"|\|CCL_(?:ERROR|FATAL)\||\boneCCL: [\w./\\-]{1,120}:\d{1,6} \w{1,80}: EXCEPTION\b"
    # PSM (PSM2, PSM3: the transport under libfabric and MPI that oneCCL and MPI run on) failing its own
    # check (``host:rank1: Assertion failure at psm3/ptl_am/ptl.c:196: nbytes == ...``): it aborts the process
    r"|\bAssertion failure at [^\s:]{0,80}?(?:\bpsm[23]?|\bptl_(?:am|ips|self))[/\\]"
)
#: a command line its parser rejected, so the program exited (code 2) before it ran anything: click's
#: ``Error: No such command 'run'.`` (``No such option: --nproc_per_node``, ``Missing argument
#: 'CONFIG'.``, ``Invalid value for '--nnodes': ...``, ``Got unexpected extra argument (x)``) and
#: argparse's ``prog: error: unrecognized arguments: ...`` (``the following arguments are required:
#: ...``, ``argument cmd: invalid choice: 'run' ...``). A launch of a distributed job that never
#: started (``tune run --nproc_per_node 8``, ``torchrun``): family ``exit``, the process's own failure
USAGE_ERROR = (
    r"\bError: (?i:no such (?:command|option)|missing (?:argument|option|parameter)|invalid value for"
    r"|got unexpected extra arguments?)\b"
    r"|: error: (?:unrecognized arguments|the following arguments are required|argument [\w/-]+: invalid (?:choice|\w+ value)"
    r"|invalid choice)"
)
#: a port that could not be bound because another process holds it (errno 98 on Linux, 48 on macOS,
#: WSAEADDRINUSE 10048 on Windows), and c10d's summary when no address of the host could be bound:
#: ``The server socket has failed to bind to [::]:29500 (errno: 98 - Address already in use)``,
#: ``The server socket has failed to listen on any local network address``, ``bind failed``
PORT_IN_USE = re.compile(
    r"(?i:address already in use|\bEADDRINUSE\b|\berror 10048\b|only one usage of each socket address"
    r"|failed to listen on any local (?:network )?address|\bbind(?:\(\))? failed\b)"
)
#: NCCL's own check of a CUDA call it made (``NCCL WARN Cuda failure 'invalid argument'``, ``Cuda failure 1
#: 'initialization error'``: the WARN behind ``ncclUnhandledCudaError``, printed from its transports and
#: proxy): NCCL's error, the network / NCCL family. Not when the failure is the device's own fault that
#: NCCL's call merely found (an illegal memory access, a launch failure, a device-side assert, ECC) nor
#: memory (``'out of memory'``: the memory family comes first)
NCCL_CUDA = re.compile(
    r"NCCL WARN [^\n]{0,80}?Cuda failure(?: \d+)? '(?!an illegal|illegal|unspecified launch|misaligned|device-side"
    r"|uncorrectable|ECC|out of memory)"
)
#: a host name that does not resolve (``getaddrinfo``'s texts: ``Name or service not known``, ``Temporary
#: failure in name resolution``, macOS's ``nodename nor servname provided, or not known``, Windows'
#: ``getaddrinfo failed``; old c10d's TCPStore ``host not found: ...``, ``socket.gaierror``; gloo's TCP
#: device finding no usable address for the host name or the interface it was given, ``[enforce fail at
#: .../gloo/transport/tcp/device.cc:127] rp != nullptr. Unable to find address for: dgx-1.ai``): the
#: rendezvous or a peer cannot even be looked up, the network's (DNS, /etc/hosts, a service not up yet)
#: failure. Not a web client's (``HTTPSConnectionPool``, a URL: a download, not a rank's peer)
NAME_NOT_RESOLVED = re.compile(
    r"^(?![^\n]*(?:https?://|HTTPS?ConnectionPool|Max retries exceeded))[^\n]*?"
    r"(?i:name or service not known|temporary failure in name resolution|nodename nor servname provided"
    r"|\bhost not found\b|getaddrinfo failed|\bgaierror\b|could not resolve host(?:name)?\b"
    r"|no address associated with hostname|unable to find address for\b)"
)
#: the path between two GPUs that a collective library's own kernels use (NCCL's P2P transport, the
#: custom all-reduce of vLLM / sglang / TensorRT-LLM over CUDA IPC buffers) could not be set up: peer
#: access unsupported or not enabled between the devices (``'peer access is not supported between these
#: two devices'``, ``cudaErrorPeerAccessUnsupported``, ``peer mapping resources exhausted``), a CUDA IPC
#: handle that would not open (``failed to open CUDA IPC handle``, ``cudaIpcOpenMemHandle ... failed``),
#: or a CUDA call a custom all-reduce checked that failed (``Failed: Cuda error
#: .../custom_all_reduce.cuh:307 '...'``) other than the device's own fault (as :data:`NCCL_CUDA`): the
#: collective library's communication path, the network / NCCL family, not a process's device fault
P2P_PATH = re.compile(
    r"(?i:peer access (?:is not supported|has not been enabled|is not enabled)|peer mapping resources exhausted"
    r"|\bcudaErrorPeerAccess(?:Unsupported|NotEnabled)\b|\bCUDA_ERROR_PEER_ACCESS_(?:UNSUPPORTED|NOT_ENABLED)\b"
    r"|\bcudaErrorTooManyPeers\b|failed to open CUDA IPC handle|\bcu(?:da)?IpcOpenMemHandle\b[^\n]{0,80}?(?:failed|error)"
    r"|(?:custom_?all_?reduce[^\n]{0,80}?(?:cuda|cudart) (?:error|failure)|(?:cuda|cudart) (?:error|failure)[^\n]{0,80}?custom_?all_?reduce)"
    r"(?![^\n]{0,80}?(?:illegal|unspecified launch|misaligned|device-side|uncorrectable|ECC|out of memory)))"
)
#: the process's own PyTorch cannot provide the backend the job asks for: a build without it (c10d's
#: ``Distributed package doesn't have NCCL built in``, ``... doesn't have MPI built in. MPI is only included
#: if you build PyTorch from source``, the same for UCC; the Windows and macOS wheels ship without NCCL),
#: or no GPU for it (``ProcessGroupNCCL is only supported with GPUs, no GPUs found!``). Raised in
#: ``init_process_group`` before any communication: the process's own set-up, not the collective
#: library's failure (whatever the backend's name says), the ``setup`` family
BACKEND_MISSING = re.compile(
    r"(?i:distributed package (?:doesn'?t|does not) have \w+|ProcessGroupNCCL is only supported with GPUs"
    r"|\bno GPUs found\b)"
)
#: (family, pattern), first match wins: the order puts the cause before its consequences (an
#: out-of-memory inside an NCCL error is memory; a CUDA fault inside a watchdog line is the device)
FAMILIES: tuple[tuple[SignalFamily, re.Pattern], ...] = (
    # ranks said to be out of step: the statement is the failure, a cause it guesses at is not (see OUT_OF_SYNC)
    (SignalFamily.STALL, re.compile(OUT_OF_SYNC)),
    (
        SignalFamily.MEMORY,
        re.compile(
            r"(?i:out of memory|OutOfMemoryError|\bOOM\b|oom[-_ ]kill|Cannot allocate memory|std::bad_alloc"
            r"|\bMemoryError\b|memory limit exceeded|(?:can't|cannot|unable to|failed to) allocate)"
        ),
    ),
    (SignalFamily.NETWORK, NCCL_CUDA),
    (SignalFamily.NETWORK, P2P_PATH),
    (
        SignalFamily.DEVICE,
        re.compile(
            r"CUDA error|Cuda error|CUDART error|cudaError\w*|CUDA_ERROR\w*|illegal memory access|device-side assert|uncorrectable ECC"
            r"|\bECC error|\bXid\b|fallen off the bus|CUBLAS_STATUS_(?!SUCCESS)|CUDNN_STATUS_(?!SUCCESS)"
            r"|unspecified launch failure|Cuda failure|misaligned address|invalid device ordinal"
            r"|\bGPU (?:hang|reset|fault|lost)|NVLink (?:error|fault)|HIP error|hipError\w*"
        ),
    ),
    (  # a server socket (a rendezvous store, NCCL's bootstrap, any listener) that could not take its
        # port: another process holds it. The process's own set-up failed, before any collective; the
        # network is fine (before the network family: ``DistNetworkError``, ``NCCL`` around it say less)
        SignalFamily.PORT,
        PORT_IN_USE,
    ),
    # the process's own build or set-up lacks the backend (before the network family: ``NCCL`` in it
    # names what is missing, not what failed)
    (SignalFamily.SETUP, BACKEND_MISSING),
    (
        SignalFamily.SIZE,
        re.compile(
            _SIZE
            + r"[^\n]{0,80}?(?i:mismatch|do(?:es)? ?n[o']t match|not (?:to )?match|must (?:match|be (?:the )?same|be equal)"
            r"|should (?:match|be (?:the )?same)|differ|inconsistent|not (?:the )?same|expected|invalid|vs\b"
            r"|(?:be|is|are) (?:not )?(?:a |an integer )?multiple of|(?:not )?(?:evenly )?divisible)"
            r"|(?i:mismatch(?:ed)?|different|inconsistent|unequal|uneven|\bsame\b|\bequal\b|\bexpected\b|must match)[^\n]{0,40}?"
            + _SIZE
            + r"|invalid tensor size|Split sizes doesn't match total dim"
            r"|Detected mismatch between collectives|Collectives differ|Tensor Tensor (?:shapes|dtypes)"
        ),
    ),
    (
        SignalFamily.STALL,
        re.compile(
            r"(?i:\bstall(?:ed)?\b|missing ranks|not (?:yet )?join(?:ed|ing)\b|not all ranks|did not (?:arrive|join|reach)|failed to pass"
            r"|monitored ?barrier|lagging ranks?|desync|waiting for (?:the )?(?:remainder|other|remaining) (?:of )?ranks"
            r"|have not (?:yet )?(?:joined|reached|submitted))"
            r"|" + _DISAGREE
        ),
    ),
    (  # NCCL's own error codes, whatever exception or logger wraps them (after memory and device:
        # an NCCL error whose CUDA call ran out of memory is memory)
        SignalFamily.NETWORK,
        NCCL_CODES,
    ),
    (  # a connection that timed out is the network's failure, not a collective's timeout
        SignalFamily.NETWORK,
        re.compile(
            r"(?i:connection timed out|connect(?:ion)? timeout|failed to connect|ETIMEDOUT|connect to [^\n]{0,60}?timed out"
            # gloo could not connect its pairs (the full mesh of TCP connections a process group
            # needs): the network between the hosts or the interface chosen
            r"|connectFullMesh failed"
            # torchelastic's agent that cannot reach its rendezvous backend (the c10d store)
            r"|RendezvousConnectionError"
            # c10d's store client giving up on connecting (``The client socket has timed out after
            # 1800s while trying to connect to (10.0.0.1, 29500)``, older ``connect() timed out``)
            r"|timed out after [^\n]{0,40}?trying to connect|connect\(\) timed out"
            # a collective library's transport whose links or sockets were not established in time
            # (HCCL's ``wait socket establish timeout``, ``Wait links establish completed failed``)
            r"|(?:socket|link|connection)s? establish(?:ment|ed)?\b[^\n]{0,30}?(?:timeout|timed out|fail))"
        ),
    ),
    (  # a host name that does not resolve (the rendezvous, a peer): before a timeout it caused
        SignalFamily.NETWORK,
        NAME_NOT_RESOLVED,
    ),
    (
        SignalFamily.TIMEOUT,
        # a scheduler that cancelled or preempted the job (a time limit): the job ran out of time, no rank crashed
        re.compile(
            r"(?i:timed out|timing out|time ?out|deadline[ _]exceeded|watchdog|heartbeat|hang detected|time limit"
            r"|flight recorder dump|dump signal"
            r"|preempt)|CANCELLED"
        ),
    ),
    (
        SignalFamily.NETWORK,
        re.compile(
            # (HCCL: Ascend's collective library in NCCL's place; its own log lines ``[ERROR] HCCL(pid,proc):``)
            r"\bnccl\w*Error\b|\bNCCL\b|\bnccl\b|\bHCCL\b|Dist(?:Backend|Network)Error"
            # NVSHMEM (DeepEP's communication library) and its RDMA transports (IBGDA, IBRC, IBDEVX), their
            # verbs calls on the queue pairs (``mlx5dv_devx_obj_modify for INIT2RTR_QP``): its source paths
            # and names on its own error lines
            r"|(?i:nvshmem)|\bib(?:gda|rc|devx)(?![a-z])|\bmlx5dv?_\w+|\b(?:INIT2RTR|RTR2RTS|RESET2INIT)(?:_QP)?\b"
            r"|(?i:connection (?:reset|closed|refused|aborted|lost)|(?:closed|reset) by (?:the )?(?:remote )?peer"
            r"|broken pipe|ECONNREFUSED|ECONNRESET|EPIPE|no route to host|network is unreachable"
            r"|address already in use|EADDRINUSE|\bNET/|libfabric|\bofi\b|\bibv_|infiniband|completion from peer|vendor err"
            r"|prov_errno|\befa\b"
            r"|\bRDMA\b|\bUCX\b|\bMPI_ERR)"
        ),
    ),
    (
        SignalFamily.LAUNCHER,
        re.compile(
            r"ChildFailedError|torch\.distributed\.elastic|\belastic\b|torchrun|mpirun|prterun|Primary job"
            r"|srun: error|slurmstepd|RayActorError|ActorDiedError|WorkerCrashedError|RayTaskError"
            r"|(?i:worker (?:died|exited|failed|crashed)|closing signal|rendezvous closed|local_rank)"
        ),
    ),
    (
        SignalFamily.EXIT,
        re.compile(
            r"(?i:exit(?:ed)?(?: with)? (?:code|status)|exitcode|return ?code|\bsignal\b|Segmentation fault|core dumped"
            r"|\bkilled\b|\babort(?:ed|ing)?\b|terminate called|\bSIG[A-Z]{3,5}\b)"
            # glog's fatal CHECK (``F0415 ... file.cc:86] Check failed: x > 0 (0 vs. 0)``, TensorFlow's / XLA's
            # ``... F tensorflow/...:86] Check failed: ...``, then ``*** Check failure stack trace: ***``):
            # it aborts the process (SIGABRT), the process's own end
            r"|:\d{1,6}\] Check failed: |\*\*\* Check failure stack trace"
            r"|" + USAGE_ERROR
        ),
    ),
    (
        # last: a distributed component is named, in words or in a source path, and no family above
        # says what went wrong (a cut `[enforce fail at .../gloo/transport/tcp/pair.`, a logged
        # `backend_name: gloo`, a store's teardown line): a collective's failure of undetermined
        # cause, not a network fault
        SignalFamily.COMPONENT,
        re.compile(
            r"\bgloo\b|\bGloo\b|\bc10d\b|TCPStore|DistStoreError"
            r"|(?i:socket|rendezvous|bootstrap|transport|\bpeer\b)"
        ),
    ),
)
#: on a warning line, these say that something failed (an ``NCCL WARN ... with error 12``)
WARNING_FAILURE = re.compile(
    r"(?i:\berror\b|\berrno\b|status=\d+|\binvalid\b|\bunhandled\b|\bcould not\b|\bunable to\b|\berr: ?-?[1-9]"
    r"|\bno (?:\w+ ){1,3}found\b|\bnot found\b)"
)
#: the job was stopped from outside, by its user or its scheduler, not by a process's own failure: the
#: launcher received a death signal (torchelastic: ``Received 2 death signal``, ``Received
#: Signals.SIGHUP death signal``, its ``SignalException: Process P got signal: 2``), a Python
#: ``KeyboardInterrupt``, a launcher forwarding an interrupt or a hang-up it received (torchelastic
#: sends SIGTERM when a worker failed, SIGINT / SIGHUP only when it got them; ``srun: interrupt``,
#: ``sending Ctrl-C``, mpirun's ``Forwarding signal 2``), the terminal's ``^C``. (A number of two digits
#: is 15: these handlers are installed for SIGINT, SIGTERM, SIGHUP and SIGQUIT only; :func:`classify`
#: reads every run of two or more digits as ``11``.) A failure signal of
#: family ``stop``: never an all-clear (the work did not finish), never a crash; a hang's cause, if it
#: was stopped because it hung, is not in it (``timeout-undetermined`` when nothing failed before it)
STOPPED = re.compile(
    r"Received (?:Signals\.)?(?:SIG(?:INT|TERM|HUP|QUIT)|[1-3]|1\d) death signal|\bKeyboardInterrupt\b"
    r"|got signal:? (?:SIG(?:INT|TERM|HUP)|[12]|1\d)\b|closing signal SIG(?:INT|HUP)\b|^\^C|srun: interrupt"
    r"|sending Ctrl-C|Forwarding signal (?:SIG(?:INT|TERM|HUP)|[12]|1\d) to job"
)

#: a stack dump of a LIVE process, taken by someone who looks at why it does not go on: py-spy's ``py-spy
#: dump --pid`` (``Thread 120142 (idle): "MainThread"``, ``(active+gil)``), Python's faulthandler
#: (``Thread 0x00007f3a (most recent call first):``, ``Current thread 0x...``: ``dump_traceback_later``'s
#: timeout, a ``faulthandler.register`` signal), gdb's ``thread apply all bt`` (``Thread 3 (Thread
#: 0x7f2a1c7fe700 (LWP 12345)):``). Evidence of a suspected hang (the job did not finish), so never an
#: all-clear and never "nothing read": a failure of family ``timeout`` (the cause is in the frames, not
#: named). A process that crashed prints its own fatal line before such a dump, and that comes first
STACK_DUMP = re.compile(
    r"(?<![\w.-])Thread \d{1,10} \((?:idle|active)(?:\+gil)?\): \"|(?<![\w.-])(?:Current thread|Thread) 0x[0-9a-fA-F]{4,16} "
    r"\(most recent call first\):|(?<![\w.-])Thread \d{1,6} \(Thread 0x[0-9a-fA-F]{4,16} \(LWP \d{1,10}\)\)"
)
#: a rank announcing that it ENTERS process-group initialisation, printed before the group is up
#: (Lightning's ``initializing ddp: GLOBAL_RANK: 1, MEMBER: 2/2`` / ``Initializing distributed: ...``,
#: Megatron's ``> initializing torch distributed ...``, DeepSpeed's ``Initializing TorchBackend in
#: DeepSpeed``, c10d's ``Added key: store_based_barrier_key:1 to store for rank: R`` as a rank enters
#: the store-based barrier of torch <= 1.13, NCCL's ``ncclCommInitRank comm 0x.. rank R nranks N ... - Init
#: START`` as a communicator starts to come up, its ``Init COMPLETE`` saying it came up; ``NCCL version
#: 2.18.1+cuda12.1``, the line rank 0 prints as its first communicator starts, in every NCCL since
#: 2.0; an error message that quotes the version is a failure, never an ACTIVITY line): an
#: ACTIVITY line (the distributed machinery started), and, when every log ends at
#: it with nothing after, a job that never got past init as far as the evidence goes (a hang at
#: init or in the first collective, or a copy that stops there): never an all-clear
INIT_ENTERING = re.compile(
    r"(?i:initiali[sz]ing (?:ddp|distributed|torch distributed|torchbackend|process group)\b)"
    r"|Added key: store_based_barrier_key|- Init START\b|\bNCCL version \d"
)
#: benign lines that only a running distributed job prints, and that say nothing failed: positive
#: evidence of distributed activity, which ``no-failure`` needs (with no failure signal anywhere). Each
#: is printed by the distributed machinery itself once it ran: c10d guessing a barrier's device (a
#: barrier was issued: ``barrier(): using the device under current context``, older ``using GPU N to
#: perform barrier as devices used by this process are currently unknown``, ``Guessing device ID based
#: on global rank``), DDP's reducer during or after an iteration (``Grad strides do not match bucket view
#: strides``, ``find_unused_parameters=True was specified ... but did not find any unused parameters``,
#: ``Reducer buckets have been rebuilt in this iteration``), Lightning's epoch-end logging with
#: torch.distributed initialised (``... when logging on epoch level in distributed setting``), a rank
#: announcing that it enters process-group initialisation (:data:`INIT_ENTERING`), the per-step
#: reports of training engines that only run distributed (DeepSpeed initialises torch.distributed in
#: ``deepspeed.initialize``, Megatron in ``initialize_megatron``): DeepSpeed's dynamic loss scaler
#: skipping a step with its rank (``[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale:
#: 65536, reducing to 32768``, the older ``fp16 dynamic loss scale overflow! Skipping step``: a scaler
#: that overflowed and carries on lowering its scale, the normal start of fp16 training), its engine's
#: ``step=10, skipped=6, lr=[...]`` report, ZeRO-3 having partitioned the model across the ranks
#: (``finished initializing model - num_params = 291``), Megatron's iteration line (``number of skipped
#: iterations:   0 | number of nan iterations:   0``), the launcher's own report that a worker finished well
#: (torchelastic's JSON event ``torchelastic.worker.status.SUCCEEDED``, its agent's ``worker group
#: successfully finished``; a worker's ``FAILED`` event is a failure, read by the launcher rule). Not here:
#: warnings any process prints, distributed or not (accelerate's kernel-version warning, libibverbs'
#: missing driver, deprecations): they show nothing distributed ran, so alone they stay ``no-evidence``.
ACTIVITY = re.compile(
    r"barrier\(\): using the device under current context|to perform barrier as devices used by this process"
    r"|Guessing device ID based on global rank|Grad strides do not match bucket view strides"
    r"|find_unused_parameters=True was specified in DDP constructor, but did not find any unused parameters"
    r"|Reducer buckets have been rebuilt|when logging on epoch level in distributed setting"
    r"|\[deepspeed\] (?:OVERFLOW! Rank \d+|fp\d+ dynamic loss scale overflow!) Skipping step"
    r"|\bstep=\d+, skipped=\d+, lr=|finished initializing model - num_params = \d+"
    r"|number of skipped iterations: *\d+ \| number of nan iterations"
    r"|torchelastic\.worker\.status\.SUCCEEDED\b|worker group successfully finished"
    r"|" + INIT_ENTERING.pattern
)

#: training or benchmark progress: a line with a progress counter (``step``/``iter``/``iteration``/``epoch``/
#: ``batch``/``update`` N, a unit word cut short as loggers do (``ep 3``, ``it 40``, a user's ``Epoc: 100``),
#: ``N/M``, a progress bar's ``37%|###|``, a benchmark's step number before its rate; a unit in the singular: ``epochs=300`` is a setting) AND a metric with a number (``loss``, ``val_loss``, ``lr``,
#: ``grad_norm``, ``acc``, ``ppl``, ``tps``, ``tflops``, ``mfu``, ``throughput``, a rate ``7.9it/s``, ``106.2
#: images/sec``, ``tokens/s 41230``), or a benchmark's result line (``Total img/sec on 2 GPU(s): 212.4``,
#: nccl-tests' ``Avg bus bandwidth : 21.3``). Printed by the training loop or the benchmark of any framework
#: (torchtitan's ``step: 14  loss:  3.24405  grad_norm: ... tps: 7,282``, DETR's ``Epoch: [0]  [   0/7393]
#: eta: ... loss: 76.2864``, a tqdm bar ``epoch:1 loss:1.77:   7%|▋  | 26/391 [00:05<00:46,  7.91it/s]``,
#: Lightning's ``Epoch 3: 45%|...| 45/100 [..., loss=0.31, v_num=0]``): positive evidence that the run went
#: on up to that line, nothing else (not a dump of settings: ``Namespace(epochs=300, lr=0.1)``, a dict's
#: ``{'epoch': 3, 'lr': 0.1}``). A row of family ``progress`` (never a failure: a line with a failure
#: word or an error or warning level is read as that). With no failure signal anywhere it makes an
#: all-clear at low confidence that says the limit (the job may have hung or died after the last such
#: line); a failure anywhere still decides. Found without a needle per line: :data:`PROGRESS_NEEDLES` are
#: reported once per chunk by the scanner, which then looks for each chunk's last such line from its end
#: (ordinary training output stays unread)
_PROGRESS_COUNTER = (
    r"(?i:\b(?:global[ _]?)?(?:step|iter(?:ation)?|it|epoc?h?|ep|batch|update)\b[ \t]{0,3}[:=#]?"
    r"[ \t]{0,3}\[?[ \t]{0,6}\d"
    r"|\b\d{1,12}[ \t]{0,2}/[ \t]{0,2}\d{1,12}\b|\b\d{1,3}%[ \t]{0,2}\|"
    # a step number leading a benchmark's rate (tf_cnn_benchmarks' ``10\timages/sec: 106.2 +/- 0.3``)
    r"|\b\d{1,9}[ \t]{1,8}(?:img|images|samples|examples|tokens|sequences)/sec\b)"
)
_PROGRESS_METRIC = (
    r"(?i:\b(?:\w{1,30}_)?(?:loss(?:es)?|lr|learning[ _]rate|grad_?norm|acc(?:uracy)?|ppl|perplexity|tps"
    r"|tflops|mfu|throughput)\b[ \t:=|]{0,4}[-+]?(?:\d|nan\b|inf\b)"
    r"|\d[ \t]{0,2}(?:it|s|img|images|samples|examples|tokens|tok|seqs?|sequences)/(?:s|sec|it)\b"
    r"|\b(?:img|images|samples|examples|tokens|tok)/s(?:ec)?\b[ \t:=]{0,4}\d)"
)
#: a step the loop reports as done, in so many words (PyTorch's TP/SP examples' ``Tensor Parallel iter 0
#: completed``, ``Epoch 3 finished``, ``step 120/500 done``, ``Finished epoch 2``, ``Completed iteration 40``):
#: a counter and the word that it completed; ``Finished training`` (no counter) is :data:`FINISH`
_PROGRESS_DONE = (
    r"(?i:\b(?:global[ _]?)?(?:step|iter(?:ation)?|epoch|batch|update)[ \t]{0,3}[:#]?[ \t]{0,3}\[?[ \t]{0,6}\d{1,12}"
    r"(?:[ \t]{0,2}/[ \t]{0,2}\d{1,12})?\]?[ \t]{0,3}(?:(?:is|has been|was)[ \t]{1,3})?(?:completed?|finished|done)\b"
    r"(?![^\n]{0,60}?\b(?:errors?|fail\w*|exception|unsuccessful\w*|abort\w*|crash\w*)\b)"
    r"|\b(?:completed|finished|done with)[ \t]{1,3}(?:the[ \t]{1,3})?(?:training[ \t]{1,3})?"
    r"(?:step|iter(?:ation)?|epoch|batch)[ \t]{0,3}[:#]?[ \t]{0,3}\d)"
)
#: a record of measured metrics (a Python dict or a JSON object, values quoted or not: HF Trainer's
#: ``{'loss': 0.6931, 'grad_norm': 1.2, 'learning_rate': 5e-05, 'epoch': 0.01}``, a JSON step log's ``{"step":
#: 100, "loss": 2.31}``, foundation-model-stack's ``{'loss': '7.6250', 'avg_loss': '8.3703', 'tok/gpu/s':
#: '3,679.1'}``): a key only a running loop measures (a loss, a perplexity, ``grad_norm``, a rate per
#: second, tflops, mfu) with a number. Not a dump of settings (``{'epoch': 3, 'lr': 0.1}``, ``'max_grad_norm':
#: 1.0``, ``'loss': 'ce'``: no measured key, or no number)
_PROGRESS_RECORD = (
    r"[{,][ \t]{0,3}['\"](?:(?:\w{1,30}_)?(?:loss(?:es)?|ppl|perplexity)|grad_norm|tflops|mfu"
    r"|[\w/]{0,30}(?:_per_second|/s(?:ec)?))['\"][ \t]{0,3}:[ \t]{0,3}['\"]?[-+]?(?:\d|nan\b|inf\b)"
)
#: a collective (or a test of one) reported as passed (a native RCCL/NCCL test's ``rank 0 (GPU0): allreduce
#: OK`` and ``... allreduce: PASS``, unittest's ``test_all_reduce_sum (__main__.TestDistBackend) ... ok``,
#: pytest's ``test_allgather PASSED``, ``broadcast succeeded``), or nccl-tests' check that found no wrong
#: value (``# Out of bounds values : 0 OK``): the collectives ran to completion. The pass word ends the line
#: (``allreduce ok, but ...`` is no pass)
_PROGRESS_PASSED = (
    r"(?i:\b\w{0,40}?(?:all_?reduce|all_?gather|reduce_?scatter|all_?to_?all|broadcast|barrier|send_?recv)\w{0,40}"
    r"\b[^\n]{0,80}?[ \t:.\-]"
    r"(?:ok|pass(?:ed)?|succeeded|successful(?:ly)?(?: completed)?|success)[ \t.!]{0,3}$"
    r"|\bout of bounds values[ \t]{0,4}:[ \t]{0,4}0[ \t]{1,4}ok\b)"
)
PROGRESS = re.compile(
    r"^(?![^\n]*?(?:\bNamespace\(|[{,] ?['\"]\w{1,40}['\"]: ))(?=[^\n]*?"
    + _PROGRESS_COUNTER
    + r")[^\n]*?"
    + _PROGRESS_METRIC
    + r"|(?i:\btotal (?:img|images|samples|examples|tokens)/sec\b[^\n]{0,60}?\d|\bavg bus bandwidth[ \t]{0,4}:[ \t]{0,4}\d)"
    + r"|"
    + _PROGRESS_DONE
    + r"|"
    + _PROGRESS_RECORD
    + r"|"
    + _PROGRESS_PASSED
)
#: the literals that find :data:`PROGRESS` candidates (each needle reported once per chunk, see above)
PROGRESS_NEEDLES: tuple[bytes, ...] = (
    b"loss",
    b"Loss",
    b"LOSS",
    b"it/s",
    b"s/it",
    b"/sec",
    b"samples/s",
    b"tokens/s",
    b"tflops",
    b"TFLOPS",
    b"mfu",
    b"MFU",
    b"hroughput",
    b"grad_norm",
    b"us bandwidth",
    b"omplete",  # an iteration reported done (_PROGRESS_DONE), a collective passed (_PROGRESS_PASSED)
    b"inished",
    b"done",
    b"Done",
    b"PASS",
    b"pass",
    b"Pass",
    b" OK",
    b" ok",
    b"succe",
    b"/s'",  # a record's rate key (_PROGRESS_RECORD)
    b'/s"',
)

#: an exception that says this process could not reach another, or lost it (a connection refused,
#: reset, aborted, closed by the peer, a broken pipe): the process that raised it is a victim of the
#: side that was not there (not started, crashed, listening elsewhere), never by itself the rank that
#: failed first. A crash of this kind names no culprit and earns no high confidence (calibration:
#: ``ConnectionRefusedError`` alone was given a named ``rank-crash`` at high confidence)
CONNECTION_LOST = re.compile(
    r"Connection(?:Refused|Reset|Aborted)Error|BrokenPipeError|(?i:connection (?:refused|reset|aborted)"
    r"|closed by (?:the )?(?:remote )?peer|broken pipe)"
)

#: c10d called in a process where no process group exists (``ValueError: Default process group has not
#: been initialized, please make sure to call init_process_group.`` since torch 2.0, the same text as a
#: ``RuntimeError`` before, ``AssertionError: Default process group is not initialized`` in torch <= 1.7's
#: ``_check_default_pg``, libraries' own checks in the same words): the process used the distributed API
#: without joining a group (a ``DistributedSampler`` in a plain single-process run, a collective before
#: ``init_process_group``). Its own error, raised before any collective could run, whatever call it was
#: raised in: never a collective failure between ranks (an init that failed before it says why, and
#: comes first)
NO_PROCESS_GROUP = re.compile(
    r"(?i:default process group (?:has not been|hasn't been|is not|was not|not) (?:yet )?initiali[sz]ed)"
)
#: the innermost frame of a traceback cut before its exception line, in c10d's own check that a default
#: group exists (``distributed_c10d.py:940 in _get_default_group``, torch <= 1.7's ``_check_default_pg``):
#: those functions raise only the error above
NO_PROCESS_GROUP_FRAME = re.compile(r"distributed_c10d\.py:\d+ in (?:_check_default_pg|_get_default_group)\s*$")

#: c10d's client trying one address of a host name that is not usable from here (``[W socket.cpp:697]
#: [c10d] The client socket has failed to connect to [DESKTOP-1]:55472 (system error: 10049 - The
#: requested address is not valid in its context.)`` on Windows, ``[localhost]:29500 (errno: 99 - Cannot
#: assign requested address)`` on Linux, an IPv6 name of localhost; an address of a family this host
#: cannot use, ``(errno: 97 - Address family not supported by protocol)``, or that the kernel refuses as
#: given, ``[ip-26-0-146-37]:22456 (errno: 22 - Invalid argument)``): c10d records the attempt at
#: WARNING level, tries every address the name resolves to and carries on with the next; only its
#: summary (``failed to connect to any network address of ...``, a ``DistNetworkError``, a timeout)
#: says that the connection failed
ADDRESS_NOT_HERE = (
    r"^(?![^\n]*any network address)[^\n]*?client socket has failed to connect to [^\n]{0,200}?"
    r"(?:EADDRNOTAVAIL|EAFNOSUPPORT|EINVAL|cannot assign requested address|not valid in its context"
    r"|address family not supported|incompatible with the requested protocol|invalid argument)"
)
#: error numbers the vocabulary reads by meaning, spelled by name before :func:`classify` reads every
#: run of digits as ``11`` (a localised Windows prints their text in its own language). Found by the
#: literal ``CODE_HINTS`` first
CODE_NUMBERS = {
    "99": "EADDRNOTAVAIL",  # Linux errno
    "10049": "EADDRNOTAVAIL",  # Windows system error (WSAEADDRNOTAVAIL)
    "97": "EAFNOSUPPORT",
    "10047": "EAFNOSUPPORT",
    "22": "EINVAL",
    "10022": "EINVAL",
}
CODE_NAMES = re.compile(r"\b(?:errno:? (99|97|22)|system error:? (10049|10047|10022))\b")
CODE_HINTS = ("10049", "10047", "10022", "errno: 99", "errno 99", "errno: 97", "errno 97", "errno: 22", "errno 22")


def code_name(m: re.Match) -> str:
    """What :data:`CODE_NAMES` matched with its number spelled by name (``errno: EINVAL``: the word
    ``errno`` stays, a failure word wherever no benign pattern excuses the line)."""
    num = m.group(1) or m.group(2)
    return m.group(0)[: -len(num)] + CODE_NUMBERS[num]


#: a line saying that this process's work stopped because ANOTHER process raised or failed, without
#: naming it (Horovod's ``Horovod has been shut down. This was caused by an exception on one of the ranks
#: or ...``, ``aborted due to a failure on another rank``): a crash somewhere, of a process the line does
#: not name; its reporter is a victim, never the culprit
CRASH_ELSEWHERE = re.compile(
    r"(?i:(?:caused by|because of|due to) an? (?:exception|error|failure|crash) (?:on|in|of) "
    r"(?:one of the|another|an?other|some|a remote) (?:ranks?|process(?:es)?|workers?|nodes?|peers?)\b)"
)

#: an exception that only wraps a failure reported elsewhere: it points at the cause (``See root cause
#: above``, ``See stack trace for the root cause``) or says no more than that a start-up failed (vLLM's
#: ``RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}``, its
#: ``Engine process failed to start``, a bare ``Worker initialization failed``). Not a process's own crash:
#: the failure it wraps decides (alone, it is still a failure: the signal layer reads it as a crash)
WRAPPER_FAILURE = re.compile(
    r"(?i:\bsee (?:the )?(?:root cause|(?:stack ?trace|traceback|logs?) (?:above|for (?:the )?(?:root )?cause))"
    r"|^(?:[\w.]{0,80}(?:Error|Exception):\s*)?(?:[\w-]+ ){0,3}(?:initiali[sz]ation|start-?up|init)\s+failed\.?\s*$"
    r"|^(?:[\w.]{0,80}(?:Error|Exception):\s*)?(?:[\w-]+ ){0,3}failed to (?:start|initiali[sz]e)\.?\s*$)"
)
#: NCCL's remote-allocator service thread (bootstrap.cc, NCCL 2.x before 2.12: it allocates memory for a
#: peer that relays through this GPU) failing on a connection that was not meant for it (nccl#555: the
#: socket closed too soon, then random bytes read as a size): ``[Rem Allocator] Allocation failed``,
#: ``[Rem Allocator] Poll failed with error 1``. That thread's failures (the closed socket, a ``Cuda
#: failure 'out of memory'`` for the random size, their call traces) are its own; the job's threads
#: carry on. See :func:`denpex_nb.analysis.signals.allocator_noise`
REMOTE_ALLOCATOR = re.compile(r"\[Rem Allocator\]")
#: NCCL's line prefix ``host:pid:tid [dev]``: which thread of which process printed the line
NCCL_THREAD = re.compile(r"(?<![\w.-])([\w.-]{1,255}):(\d{1,10}):(\d{1,10}) \[\d{1,4}\]")
#: a line that looks like a failure and is not: it gives no failure signal (it may still be kept as
#: a warning). NCCL's plugin / transport probing, deprecation notes, zero counts (not errno 0's text
#: after a source location: gloo's ``connectFullMesh failed with [.../pair.cc:144] no error`` failed),
#: clean teardown.
BENIGN = re.compile(
    r"(?i:NET/Plugin|No plugin found|plugin (?:not found|load)|Failed to open libnccl-net|libnccl-net\S* not found"
    r"|(?:could not|unable to|failed to) (?:find|load|open) (?:lib)?(?:nccl-net|ncclnet|nccl_net|ibverbs|libibverbs|mlx5|rdma)"
    r"|using internal (?:network|net) plugin|libibverbs|No device found|deprecat|FutureWarning|UserWarning"
    r"|DeprecationWarning|will be removed|\b0 (?:errors?|failures?|failed)\b|(?<!\] )\bno (?:errors?|failures?)\b"
    r"|errors?\s*[:=]\s*0\b|failures?\s*[:=]\s*0\b|failed\s*[:=]\s*0\b|exit(?:ed)?(?: with)? (?:code|status)[ :=]*0\b"
    r"|exitcode\s*[:=]?\s*0\b|ProcessGroupNCCL destroyed|destroy_process_group|has NOT been destroyed"
    r"|RUNNING OK|Unknown command (?:\d+ )?from localRank|(?:errors|warnings) (?:will be|are) (?:ignored|suppressed)|ignore_errors|on_error|error_?handl"
    r"|retrying|will retry|\bretry(?:ing)? \d|will (?:proceed|continue|fall ?back|use|be used)|falling back"
    r"|proceeding (?:with|without)|continuing (?:with|without)|using (?:the )?default"
    # c10d's TCPStore at exit: libuv refuses to close a loop whose handles are still closing (EBUSY),
    # the store runs the loop once more and closes it ("uv_loop cleanup finished"), at INFO level
    r"|uv_loop_close failed|" + ADDRESS_NOT_HERE + ")"
)
#: a line shows that a PyTorch process printed it: its objects' reprs (``torch.Size([0])``, a dtype
#: ``torch.float16``) or a path inside the torch package. A failure on such a line is a PyTorch
#: process's own (a ``load_state_dict`` size mismatch), evidence of a failure, not alien input
PYTORCH_OBJECT = (
    r"\btorch\.Size\(|\btorch\.(?:float|bfloat|int|uint|half|bool|complex|long|double)\d*\b"
    r"|site-packages[/\\]torch[/\\]"
    # an exception class named by its module path in the PyTorch stack (``torch.distributed.DistBackendError``,
    # ``pytorch_lightning.utilities.exceptions.MisconfigurationException``, ``deepspeed...``): raised there
    r"|\b(?:torch|pytorch_lightning|lightning|lightning_fabric|deepspeed|accelerate)\.(?:\w+\.){0,6}\w*(?:Error|Exception)\b"
    # PyTorch's own wording of a process's own size errors (:data:`LOCAL_SIZE`)
    r"|" + LOCAL_SIZE.pattern
)
#: a record's field (``backend_name: gloo``, ``master_addr: 10.0.0.1``, ``NCCL_DEBUG=INFO``): DDP's
#: construction record, an environment or config dump. Under a level that only a wrapper gave it (an
#: application logger that forwards a child's stderr at ERROR) a field is a value, not a statement
#: that something failed; a field whose own words say so (``status: failed``, ``exitcode: 1``,
#: ``error: ...``) still signals
FIELD = re.compile(r"^\s*[A-Za-z_][\w.-]{0,63}\s*[:=](?:[ \t]*[^\s:=][^:=]{0,119})?\s*$")
#: the work finished: a crash after such a line on the same rank is a teardown crash, not a failure of
#: the training collectives
FINISH = re.compile(
    r"(?i:training (?:is )?(?:finished|complete[d]?|done|ended)|finished training|training took"
    r"|(?:all|job|run) (?:finished|completed|done) successfully|successfully (?:finished|completed)"
    r"|done training|saving final (?:model|checkpoint)|final checkpoint saved)"
)

#: at INFO level (NCCL's socket retries): a connection that failed this time; not a failure by itself,
#: but a file whose last word on a connection is one of these (no :data:`RECOVERED` line after) failed
RETRYING = re.compile(
    r"(?i:no route to host|connection refused|connection reset|network is unreachable|connect(?:ion)? timed out"
    r"|failed to connect)"
)
#: the words of a client that will try again (c10d's TCPStore client: ``TCP client failed to connect/validate
#: to host 10.0.0.1:29500 - retrying (try=6, timeout=1800000ms, delay=5241ms): Connection reset by peer``, at
#: WARNING): with :data:`RETRYING`, a connection that failed this time, an info row whatever the level it
#: was logged at (a retry is no failure by itself; a file whose last word on a connection is one failed)
RETRY = re.compile(r"(?i:\bretrying\b|\bwill retry\b|\bretry(?:ing)? \d)")
#: a line of a C++ backtrace (c10's ``Exception raised from recvBytes at ...`` and its ``frame #0:
#: c10::Error::Error(...)``): it says where, not what; the statement it belongs to is the line before it
#: (behind a launcher's prefix too: ``[rank1]:frame #0: ...``)
BACKTRACE_LINE = re.compile(r"(?:^|[\s:\])>])(?:frame #\d+: |Exception raised from \S+ at )")
#: a connection made after all (after retries), or a communicator that came up, or a wait for the
#: other ranks (:data:`WAITING`) that ended: they joined
RECOVERED = re.compile(
    r"(?i:connected after \d+ retr|connection established|successfully connected|completed store[- ]based barrier)"
    r"|Init COMPLETE"
)
#: a rank waiting for the others to join the process group at init (c10d's store-based barrier, every
#: wording since torch 1.8: ``... for rank: R, key: K (world_size=W, worker_count=N, timeout=T)``,
#: ``num_workers_joined=N``, ``processgroup`` without the space, the debug form ``for S seconds``):
#: not a failure by itself (ranks come up one by one), but a file whose last word on it is a wait, with
#: no :data:`RECOVERED` line after it (``Completed store-based barrier``) and nothing distributed read
#: after it, hung at init: the ranks it waits for never joined
WAITING = re.compile(r"(?i:waiting in store[- ]based barrier)")
#: a wait at init for the other ranks that timed out: they never all joined (c10d's store-based barrier of
#: torch <= 1.13, ``Timed out initializing process group in store based barrier on rank: 0, for key:
#: store_based_barrier_key:1 (world_size=4, worker_count=16, timeout=0:30:00)``; the TCPStore server of torch
#: >= 2.0, ``DistStoreError: Timed out after 901 seconds waiting for clients. 1/2 clients joined.``). The
#: process that raised it waited for ranks that were not there (never started, started elsewhere, in
#: another job): a timeout, whose cause is on the side that did not come; an exit it leads to is its
#: consequence
INIT_WAIT_TIMEOUT = re.compile(
    r"(?i:timed out initiali[sz]ing process ?group in store[- ]based barrier"
    r"|timed out after [^\n]{0,40}?waiting for clients|\b\d+/\d+ clients joined)"
)

#: c10d's store client saying one try to connect failed (``[W socket.cpp:697] [c10d] The client socket has
#: failed to connect to [host]:29500 (system error: 10049 - ...)``, ``... (errno: 99 - Cannot assign requested
#: address)``): at warning level a probe the run survives (:data:`ADDRESS_NOT_HERE`), unless the process ends
#: right after it (``denpex_nb.analysis.signals.connection_then_cut``)
STORE_CONNECT_TRY = re.compile(r"client socket has failed to connect to")
#: a process's store / rendezvous client that gave up reaching the master, in the words of the error that
#: ends the process (not a probe it survives, :data:`ADDRESS_NOT_HERE`): c10d's summary ``DistNetworkError:
#: The client socket has failed to connect to any network address of (host, port). ... (errno: 113 - No
#: route to host)``, its timeout ``The client socket has timed out after 900s while trying to connect to
#: (host, port)``, old ``connect() timed out``, torchelastic's ``RendezvousConnectionError: The connection to
#: the C10d store has failed``. No collective ran: the address, the port, the route or a master that never
#: listened; an exit it leads to is its consequence
STORE_UNREACHABLE = re.compile(
    r"failed to connect to any network address|RendezvousConnectionError"
    r"|timed out after [^\n]{0,40}?trying to connect|connect\(\) timed out"
)

_MAX_TEXT = 400
#: ranks whose progress rows a file keeps (see :class:`SignalSink`)
_MAX_PROGRESS_RANKS = 4096
#: characters of a line :func:`classify` reads (its shape is made of them)
SHAPE_CHARS = _MAX_TEXT * 2
_WORD = re.compile(r"[A-Za-z]{2}")


@dataclass(frozen=True, slots=True)
class Signal:
    """What one line says: its severity, its family, and whether it reports a failure."""

    severity: str  # SignalSeverity
    family: str  # SignalFamily
    failure: bool


#: a level word where a logger puts it (NCCL's ``NCCL INFO``, a glog ``I1201 10:00``, TensorFlow's / XLA's
#: ``10:00:00.123456: I path:N]``, ``INFO:``, ``[INFO]``, ``| INFO |``): read from the text when the prefix stripper did not give the line's level
TEXT_LEVEL = re.compile(
    r"\bNCCL (INFO|TRACE)\b|(?:^|[\s\[])([ID])\d{4} \d\d:\d\d|(?:^|[\s\[|])(INFO|DEBUG)(?:[\]|:]| -)|"
    + _TF_HEADER.format("[ID]")
)


def severity_of(text: str, level: str | None = None) -> SignalSeverity | None:
    """The line's severity: the level the prefix stripper read (``Line.severity``), else the first
    marker of :data:`SEVERITY` in the text; None for a line without one. A header at INFO or DEBUG
    caps it (only a fatal marker beats it); an INFO word in the text only counts when no error
    marker is there."""
    found = None
    for sev, pat in SEVERITY:
        if pat.search(text):
            found = sev
            break
    if level is None and found is None:
        m = TEXT_LEVEL.search(text)
        if m:
            return SignalSeverity.INFO
    lvl = LEVEL_LETTERS.get(level or "")
    if lvl == SignalSeverity.INFO:  # the line's own header says it is chatter: only a fatal marker beats it
        return found if found == SignalSeverity.FATAL else lvl
    if lvl is not None and (found is None or _RANK[lvl] < _RANK[found]):
        return lvl
    return found


_RANK = {SignalSeverity.FATAL: 0, SignalSeverity.ERROR: 1, SignalSeverity.WARNING: 2, SignalSeverity.INFO: 3}


#: C++'s abort on an uncaught exception names the exception: the abort is that exception's failure
TERMINATE = re.compile(r"terminate called after throwing an instance of '([^']{1,200})'")


def family_of(text: str) -> SignalFamily:
    """The first family of :data:`FAMILIES` whose pattern the text holds (size only beside a
    collective or cross-rank word); :attr:`SignalFamily.OTHER` when none does. ``terminate called
    after throwing an instance of 'X'`` takes the family of ``X`` (its ``what()`` follows on the next
    line: :func:`denpex_nb.analysis.signals.signal_finding` reads that one), the exit family when
    ``X`` has none; cut before ``X`` (a paste's end), no family: what was thrown is unknown."""
    m = TERMINATE.search(text)
    if m:
        fam = _family(m.group(1))
        if fam != SignalFamily.OTHER:
            return fam
    elif "terminate called after throwing" in text:
        # cut before the exception's name: what was thrown (a collective's own error, a crash) is unknown
        return SignalFamily.OTHER
    return _family(text)


def _family(text: str) -> SignalFamily:
    for fam, pat in FAMILIES:
        if pat.search(text):
            if fam == SignalFamily.SIZE and (
                (not COLLECTIVE_CONTEXT.search(text) and not C10D_SIZE.search(text))
                or LOCAL_SIZE.search(text)
                or CHECKPOINT_SIZE.search(text)
                or LAYOUT_SIZE.search(text)
            ):
                continue
            return fam
    return SignalFamily.OTHER


_DIGITS = re.compile(r"\d{2,}")


def classify(text: str, level: str | None = None) -> Signal | None:
    """The signal of one line (see :func:`classify_text`), remembered per shape of the line: a log
    repeats its failure lines with other ranks, sequence numbers and times, and the patterns cost
    tens of microseconds a line. Runs of two or more digits read the same as ``11`` (a count, a
    code or a number other than 0 and 1: what the patterns tell apart stays apart)."""
    if len(text) > SHAPE_CHARS:
        text = text[:SHAPE_CHARS]
    if any(h in text for h in CODE_HINTS):
        text = CODE_NAMES.sub(code_name, text)
    return _classify_shape(_DIGITS.sub("11", text), level)


@functools.lru_cache(maxsize=8192)
def _classify_shape(text: str, level: str | None) -> Signal | None:
    return classify_text(text, level)


def classify_text(text: str, level: str | None = None) -> Signal | None:
    """The signal of one line (prefixes stripped or not), or None when it is worth no row.

    A failure: a fatal or error severity, or a failure word (:data:`FAILURE_WORDS`), on a line no
    :data:`BENIGN` pattern excuses. Warnings with a family are kept as non-failures (an NCCL WARN
    that says nothing failed). A line saying the work finished is kept as a ``finish`` row."""
    if len(text) > _MAX_TEXT * 4:
        text = text[: _MAX_TEXT * 4]
    if _WORD.search(text) is None:  # a level on an empty message (a logger's blank line) says nothing
        return None
    sev = severity_of(text, level)
    if STOPPED.search(text):  # stopped from outside, at whatever level it is logged: not a crash, not an all-clear
        return Signal(
            str(sev if sev in (SignalSeverity.ERROR, SignalSeverity.FATAL) else SignalSeverity.WARNING),
            str(SignalFamily.STOP),
            True,
        )
    if STACK_DUMP.search(text):  # someone dumped the stacks of a live process: a suspected hang
        return Signal(str(SignalSeverity.WARNING), str(SignalFamily.TIMEOUT), True)
    if (
        sev in (None, SignalSeverity.INFO, SignalSeverity.WARNING)
        and ACTIVITY.search(text)
        and not FAILURE_WORDS.search(text)
    ):
        # the distributed machinery ran and says nothing failed: evidence for an all-clear, not a failure
        return Signal(str(sev or SignalSeverity.INFO), str(SignalFamily.ACTIVITY), False)
    if sev in (None, SignalSeverity.INFO, SignalSeverity.WARNING) and WAITING.search(text):
        # a rank waiting for the others at init, at whatever level it is logged: a position, not a failure
        return Signal(str(sev or SignalSeverity.INFO), str(SignalFamily.STALL), False)
    if sev == SignalSeverity.INFO:  # INFO / DEBUG chatter (NCCL INFO, glog I): no failure signal
        if FINISH.search(text):
            return Signal(str(sev), str(SignalFamily.FINISH), False)
        if RECOVERED.search(text):
            return Signal(str(sev), str(SignalFamily.RECOVERED), False)
        if RETRYING.search(text):
            return Signal(str(sev), str(SignalFamily.NETWORK), False)
        if PROGRESS.search(text) and not FAILURE_WORDS.search(text):
            return Signal(str(sev), str(SignalFamily.PROGRESS), False)
        return None
    if (
        sev != SignalSeverity.FATAL
        and LEVEL_LETTERS.get(level or "") in (None, SignalSeverity.WARNING)
        and RETRYING.search(text)
        and RETRY.search(text)
    ):
        # a connection that failed this time and is tried again (the exception it retries on may be
        # quoted, with its backtrace, under the header's WARNING): an info row, not a failure by itself
        return Signal(str(SignalSeverity.INFO), str(SignalFamily.NETWORK), False)
    words = FAILURE_WORDS.search(text) is not None or (
        sev == SignalSeverity.WARNING and WARNING_FAILURE.search(text) is not None
    )
    if not words and level is not None and FIELD.match(text) and severity_of(text) is None:
        return None  # a record's field under its wrapper's level (see FIELD)
    if BENIGN.search(text):
        return Signal(str(sev), str(family_of(text)), False) if sev == SignalSeverity.WARNING else None
    if sev in (SignalSeverity.FATAL, SignalSeverity.ERROR) or words:
        return Signal(str(sev or SignalSeverity.ERROR), str(family_of(text)), True)
    if FINISH.search(text):
        return Signal(str(SignalSeverity.INFO), str(SignalFamily.FINISH), False)
    if sev == SignalSeverity.WARNING:
        fam = family_of(text)
        return Signal(str(sev), str(fam), False) if fam != SignalFamily.OTHER else None
    if RECOVERED.search(text):  # a wait that ended, logged without a level
        return Signal(str(SignalSeverity.INFO), str(SignalFamily.RECOVERED), False)
    if sev is None and PROGRESS.search(text):  # the run went on up to here (no failure word, no level)
        return Signal(str(SignalSeverity.INFO), str(SignalFamily.PROGRESS), False)
    return None


#: rows that are whole statements, never the head of a failure line a paste cut (a wait, a connection
#: made, the machinery running, the work finished)
_WHOLE = (
    SignalFamily.OTHER,
    SignalFamily.FINISH,
    SignalFamily.RECOVERED,
    SignalFamily.ACTIVITY,
    SignalFamily.PROGRESS,
    SignalFamily.STALL,
)


def _cut_head(failure: bool, family: str, severity: str) -> bool:
    """Is a row the head of a failure line a paste cut (a warning of a failure family, no failure yet)?"""
    return not failure and severity == SignalSeverity.WARNING and family not in _WHOLE


class SignalSink:
    """The signal rows of one file, column-wise, at most ``cap`` of them (the first ones: the
    verdict follows the first failure; later rows are counted in ``dropped``)."""

    def __init__(self, file: str, cap: int = 2000):
        self.file = file
        self.cap = cap
        self.dropped = 0
        self.cols: dict[str, list] = {
            k: [] for k in ("rank", "t_wall", "line", "severity", "family", "failure", "text", "host")
        }
        #: progress rows (:data:`PROGRESS`), the first and the last per rank: kept apart from the capped
        #: rows, so that a long run's progress never takes the place of a failure printed after it
        self.progress: dict = {}

    def add(self, sig: Signal, *, line: int, text: str, rank=None, t_wall=None, host=None) -> None:
        if sig.family == SignalFamily.PROGRESS:
            row = (rank, t_wall, line, sig.severity, sig.family, False, text[:_MAX_TEXT], host)
            got = self.progress.get(rank)
            if got is None:
                if len(self.progress) < _MAX_PROGRESS_RANKS:
                    self.progress[rank] = [row, row]
            elif line > got[1][2]:
                got[1] = row
            elif line < got[0][2]:
                got[0] = row
            return
        if len(self.cols["line"]) >= self.cap:
            self.dropped += 1
            return
        c = self.cols
        if (
            sig.failure
            and c["line"]
            and c["line"][-1] == line - 1
            and (rank is None or c["rank"][-1] == rank)
            and _cut_head(c["failure"][-1], c["family"][-1], c["severity"][-1])
        ):
            # the line before said what (a warning of a family) and was cut: this piece says it failed
            c["failure"][-1] = True
            c["text"][-1] = (c["text"][-1] + " " + text)[:_MAX_TEXT]
        c["rank"].append(rank)
        c["t_wall"].append(t_wall)
        c["line"].append(line)
        c["severity"].append(sig.severity)
        c["family"].append(sig.family)
        c["failure"].append(sig.failure)
        c["text"].append(text[:_MAX_TEXT])
        c["host"].append(host)

    def batch(self) -> dict[str, list] | None:
        """The rows as one column batch for the ``signals`` frame (None when there are none)."""
        cols = self.cols
        if self.progress:
            rows = {r[2]: r for pair in self.progress.values() for r in pair}
            if rows:
                names = ("rank", "t_wall", "line", "severity", "family", "failure", "text", "host")
                every = list(zip(*(cols[k] for k in names))) + list(rows.values())
                every.sort(key=lambda r: r[2])  # in line order, as the other rows are
                cols = {k: [r[i] for r in every] for i, k in enumerate(names)}
        n = len(cols["line"])
        if not n:
            return None
        return {"file": [self.file] * n, **cols}
