"""The decisions about what failed and whose failure it was: ``is_failure``, ``own_failures`` and
the rules ``own-failure``, ``nccl-error``, ``ddp-reducer`` and ``undetermined-failure``.

Decisions of ``is_failure`` (what counts as something failed):

- every error kind but warnings, unreadable inputs and NCCL WARNs is a failure; an NCCL WARN is
  one only when its text reports a failure and is not one of NCCL's benign WARNs (a missing
  plugin or IB library): test_a_benign_nccl_warn_is_not_a_failure,
  test_a_failing_nccl_warn_is_a_failure.

Decisions of ``own_failures`` (is a row its rank's own failure, a crash, not a collective error):

- an exception whose text names a collective failure, or whose traceback ends in a collective
  call, is not an own failure; OOM and device faults always are
  (test_what_is_an_own_failure).
- an exception cut off mid-word whose wrapped tail (up to three lines below, same file and rank)
  another reader recognised as a collective error is that error, not a crash; four lines below
  is unrelated (test_an_exception_cut_off_three_lines_before_its_collective_error_is_not_a_crash).

Decisions of rule ``own-failure``:

- the ranks that failed on their own are named only while they are fewer than the group (all of
  them crashing singles no one out); confidence is high only while they are at most half
  (test_own_failure_names_the_crashed_ranks_only_when_fewer_than_the_group).
- a process ended by a crash signal (SIGSEGV, SIGKILL, SIGBUS, SIGILL, SIGFPE) failed on its own;
  one ended by SIGTERM, SIGINT or SIGHUP did not
  (test_every_crash_signal_is_an_own_failure_and_a_launchers_signals_are_not); so is a rank a
  launcher's table (ChildFailedError) says exited on one
  (test_a_launchers_child_failed_row_with_a_crash_signal_is_that_ranks_own_failure).
- a launcher's statement about a worker (torchelastic's agent line, the ChildFailedError table)
  is left to the launcher rule: no own-failure finding (test_a_launchers_agent_line_is_no_own_failure_finding).

Decisions of rule ``nccl-error``:

- NCCL's own errors are a finding; a device fault wrapped in one is a crash instead; the ranks
  that reported it are named only when a strict majority of the group is seen quiet
  (test_nccl_error_names_reporters_only_against_a_quiet_majority).
- an ncclRemoteError ("remote process exited or there was a network error") is a victim's, no
  finding of its own, unless its ``Last error:`` names the transport's own failure (an IB completion
  with error, a libfabric request completed with error): then it is NCCL's network error; a last
  error that says the peer closed the connection stays a victim's
  (test_a_remote_error_is_nccls_own_only_when_its_last_error_is_a_transport_fault).
- an InfiniBand async event NCCL reports about the local adapter (a local catastrophic error, a
  local work queue error, a port error) names the reporting ranks when they all run on one host: the
  fault is that node's, by NCCL's statement; reporters on several hosts, or without a host, name no
  one (test_a_local_adapter_fault_names_the_ranks_of_its_host).
- another framework's exception whose message is NCCL's own error (an NCCL call that failed with a
  result's text, a result code by name: TensorFlow's UnknownError, Horovod's HorovodInternalError)
  is NCCL's error, not the rank's own crash; an exception that only mentions NCCL in passing is not
  (test_nccls_error_inside_another_frameworks_exception_is_nccls_own).

Decisions of rule ``ddp-reducer``: the reducer's unused-parameter error is a finding, and its
reporters are named only against a quiet majority (test_ddp_reducer_names_reporters_against_a_quiet_majority).
Of DDP's other errors, only those that speak of the reducer's gradients (a parameter marked ready
twice) are that finding; a model differing across ranks is not, and neither is an error of another
kind that uses the same words (test_ddp_reducer_reads_only_ddps_own_errors_about_gradients).

Decisions of rule ``undetermined-failure``: when something failed and no rule says what, the
verdict is ``timeout-undetermined``, never ``no-failure``; nothing failed gives no finding
(test_a_failure_no_rule_explains_is_undetermined_never_all_clear). With no failing line (only a
non-zero exit), it cites no line and has no time
(test_an_undetermined_failure_without_a_failing_line_quotes_no_line). When the failed collectives
share one seq, the finding states it with the first failure's counter
(test_an_undetermined_failure_states_its_one_seq_with_the_first_failures_counter).

Wording of rule ``own-failure``: its summary says "its" for one rank and "their" for several
(test_the_own_failure_summary_says_its_for_one_rank_and_their_for_several).
Wording of rule ``own-failure``: its summary quotes the earliest crash's message, cut at 200
characters (test_the_own_failure_summary_quotes_the_first_crash_cut_at_200_characters).
Wording of rule ``nccl-error``: its summary quotes the first NCCL error, cut at 200 characters
(test_the_nccl_error_summary_quotes_the_first_message_cut_at_200_characters).
"""

from __future__ import annotations

from denpex_nb import diagnose
from denpex_nb.analysis.rules import is_failure, own_failures
from denpex_nb.incident import coerce

from ._frames import err, incident, steps

PLUGIN_WARN = (
    "tern-07:61204:61266 [0] NCCL WARN NET/Plugin : dlerror=libnccl-net.so: cannot open shared object file: "
    "No such file or directory No plugin found (libnccl-net.so), using internal implementation"
)
IB_WARN = "tern-07:61204:61266 [0] NCCL WARN NET/IB : Unable to open libibverbs.so: error loading library"
FAILING_WARN = "tern-07:61204:61270 [0] NCCL WARN Cuda failure 'out of memory'"


def test_a_benign_nccl_warn_is_not_a_failure():
    """A clean run whose ranks log NCCL's plugin-not-found WARN (it says 'dlerror') is no-failure."""
    assert not is_failure("nccl_warn", PLUGIN_WARN) and not is_failure("nccl_warn", IB_WARN)
    warns = [err(r, "nccl_warn", PLUGIN_WARN, t=1, line=2) for r in range(4)]
    warns += [err(r, "nccl_warn", IB_WARN, t=1, line=3) for r in range(4)]
    d = diagnose(incident(steps(4, 3), warns))
    assert d.verdict == "no-failure"
    assert not d.rank_state["failed"].any()


def test_a_failing_nccl_warn_is_a_failure():
    assert is_failure("nccl_warn", FAILING_WARN)
    assert not is_failure("nccl_warn", None) and not is_failure("warning", "error") and is_failure("exit", None)
    d = diagnose(incident(steps(4, 3), [err(2, "nccl_warn", FAILING_WARN, t=1)]))
    assert d.verdict != "no-failure"


def _own(rows):
    return own_failures(coerce("errors", rows))


def test_what_is_an_own_failure():
    assert _own([err(0, "exception", "ValueError: bad batch")]) == [True]
    assert _own([err(0, "exception", "RuntimeError: NCCL communicator was aborted")]) == [False]
    assert _own([err(0, "exception", "ValueError: bad batch", op="all_reduce")]) == [False]
    assert _own([err(0, "oom", "whatever it says")]) == [True]
    assert _own([err(0, "nccl_error", "NCCL error: an illegal memory access was encountered")]) == [True]
    assert _own([err(0, "watchdog_timeout", "Watchdog caught collective operation timeout")]) == [False]
    assert _own([err(0, "signal", "exitcode -11", signal="SIGSEGV")]) == [True]
    assert _own([err(0, "signal", "exitcode -15", signal="SIGTERM")]) == [False]


def test_every_crash_signal_is_an_own_failure_and_a_launchers_signals_are_not():
    """SIGSEGV, SIGKILL, SIGBUS, SIGILL and SIGFPE end a process by its own fault (or the OOM killer's);
    SIGTERM, SIGINT and SIGHUP are the launcher's or a scheduler's doing."""
    for sig in ("SIGSEGV", "SIGKILL", "SIGBUS", "SIGILL", "SIGFPE"):
        assert _own([err(0, "signal", f"died on {sig}", signal=sig)]) == [True], sig
    for sig in ("SIGTERM", "SIGINT", "SIGHUP"):
        assert _own([err(0, "signal", f"died on {sig}", signal=sig)]) == [False], sig


def test_a_launchers_child_failed_row_with_a_crash_signal_is_that_ranks_own_failure():
    """torchelastic's ChildFailedError table says rank 2 exited on SIGSEGV: rank 2 failed on its own
    (status 'failed', the initiating rank), even though the row is the launcher's, not the rank's."""
    row = err(2, "child_failed", "rank: 2 (local_rank: 2) exitcode: -11 (pid: 4242)", t=5, signal="SIGSEGV")
    assert _own([row]) == [True]
    d = diagnose(incident(steps(4, 2), [row]))
    assert (d.rank_state.set_index("rank").loc[2, "status"], d.initiating_rank) == ("failed", 2)


def test_an_exception_cut_off_three_lines_before_its_collective_error_is_not_a_crash():
    """A terminal copy wrapped the exception's message; its tail, three lines below, was read as a
    DETAIL mismatch. The exception is that mismatch, not rank 1's own crash."""
    cut = err(1, "exception", "RuntimeError: Detected mism", t=5, line=10)
    detail = err(
        1,
        "detail_mismatch",
        "Detected mismatch between collectives on ranks. Collectives differ in the following aspects: "
        "Tensor Tensor dtypes: Double vs Float",
        t=5,
        line=13,
        op="all_reduce",
        seq=3,
        seq_kind="detail",
    )
    assert _own([cut, detail]) == [False, False]
    d = diagnose(incident(steps(2, 2), [cut, detail]))
    assert d.verdict == "dtype-mismatch"
    assert not any(f.class_id == "rank-crash" for f in d.findings)
    far = dict(detail, line=14)  # four lines below: another record, the cut exception stands alone
    assert _own([cut, far]) == [True, False]
    other_rank = dict(detail, rank=0)
    assert _own([cut, other_rank]) == [True, False]


def _crash(rank, t=None):
    return err(rank, "exception", "ValueError: bad batch at step 3", t=t, line=rank + 1)


def test_own_failure_names_the_crashed_ranks_only_when_fewer_than_the_group():
    d = diagnose(incident(steps(4, 2), [_crash(1)]))
    assert (d.verdict, d.culprit_ranks, d.first.confidence) == ("rank-crash", [1], "high")
    d = diagnose(incident(steps(4, 2), [_crash(r) for r in (0, 1, 2)]))
    assert (d.verdict, d.culprit_ranks, d.first.confidence) == ("rank-crash", [0, 1, 2], "medium")
    d = diagnose(incident(steps(4, 2), [_crash(r) for r in range(4)]))
    assert (d.verdict, d.culprit_ranks) == ("rank-crash", [])
    assert "no rank can be singled out" in d.first.summary


NCCL_ERR = "NCCL error in: ProcessGroupNCCL.cpp:1, unhandled system error, NCCL version 2.18.1"


def test_nccl_error_names_reporters_only_against_a_quiet_majority():
    d = diagnose(incident(steps(4, 2), [err(1, "nccl_error", NCCL_ERR, t=3)]))
    assert (d.verdict, d.culprit_ranks, d.first.culprit_basis) == ("nccl-error", [1], "own-failure")
    d = diagnose(incident(steps(2, 2), [err(1, "nccl_error", NCCL_ERR, t=3)]))
    assert (d.verdict, d.culprit_ranks) == ("nccl-error", [])  # one quiet rank of two
    fault = err(1, "nccl_error", "NCCL error: unspecified launch failure", t=3)
    assert diagnose(incident(steps(4, 2), [fault])).verdict == "rank-crash"


DDP = (
    "RuntimeError: Expected to have finished reduction in the prior iteration before starting a new one. "
    "This error indicates that your module has parameters that were not used in producing loss."
)


def test_ddp_reducer_names_reporters_against_a_quiet_majority():
    d = diagnose(incident(steps(4, 1), [err(1, "ddp_unused_parameters", DDP, t=2)]))
    assert (d.verdict, d.culprit_ranks) == ("unused-parameters", [1])
    d = diagnose(incident(steps(4, 1), [err(r, "ddp_unused_parameters", DDP, t=2) for r in (0, 1)]))
    assert (d.verdict, d.culprit_ranks) == ("unused-parameters", [])


TWICE = (
    "RuntimeError: Expected to mark a variable ready only once. This error is caused by one of the following "
    "reasons: 1) Use of a module parameter outside the `forward` function. Parameter at index 3 has been marked "
    "as ready twice."
)
SAME_MODEL = "RuntimeError: DDP expects same model across all ranks, but Rank 1 has 12 params, while rank 0 has 14"


def test_ddp_reducer_reads_only_ddps_own_errors_about_gradients():
    """A DDP error about a parameter marked ready twice is the reducer's finding (rank 1 named against
    three quiet ranks); DDP's error about models differing across ranks is not an unused-parameters
    finding, and an ordinary exception quoting 'marked as ready' is not DDP's."""
    d = diagnose(incident(steps(4, 1), [err(1, "ddp_error", TWICE, t=2)]))
    assert (d.verdict, d.culprit_ranks) == ("unused-parameters", [1])
    for row in (
        err(1, "ddp_error", SAME_MODEL, t=2),
        err(1, "exception", "ValueError: the batch was marked as ready", t=2),
    ):
        d = diagnose(incident(steps(4, 1), [row]))
        assert not [f for f in d.findings if f.rule == "ddp-reducer"]


def test_the_own_failure_summary_quotes_the_first_crash_cut_at_200_characters():
    first = "RuntimeError: CUDA error: an illegal memory access was encountered " + "z" * 300
    rows = [err(2, "exception", first, t=1), err(3, "exception", "ValueError: bad batch", t=2)]
    f = next(f for f in diagnose(incident(steps(8, 1), rows)).findings if f.rule == "own-failure")
    assert f.summary == "ranks 2, 3 failed on their own (not in a collective): " + first[:200]


def test_an_undetermined_failure_states_its_one_seq_with_the_first_failures_counter():
    """Two watchdog timeouts at seq 5, rank 0's on the WorkNCCL counter, rank 1's on NCCL's opCount:
    nothing tells the ranks apart; the finding says seq 5 of the first failure's counter (work)."""
    rows = [
        err(0, "watchdog_timeout", "Watchdog caught collective operation timeout", t=1, seq=5, seq_kind="work"),
        err(1, "watchdog_timeout", "Watchdog caught collective operation timeout", t=2, seq=5, seq_kind="nccl_opcount"),
    ]
    f = next(f for f in diagnose(incident(steps(2, 1), rows)).findings if f.rule == "undetermined-failure")
    assert (f.seq, f.seq_kind) == (5, "work")


def test_a_failure_no_rule_explains_is_undetermined_never_all_clear():
    d = diagnose(incident(steps(4, 2), ranks=[dict(rank=2, exit_code=1)]))
    assert (d.verdict, d.culprit_ranks) == ("timeout-undetermined", [])
    d = diagnose(incident(steps(4, 2), [err(0, "warning", "a deprecated call", t=1)]))
    assert d.verdict == "no-failure"


REMOTE = (
    "NCCL error in: ProcessGroupNCCL.cpp:3763, remote process exited or there was a network error, NCCL version "
    "2.28.8\nncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely."
    "\nLast error:{sep}{last}"
)


def test_a_remote_error_is_nccls_own_only_when_its_last_error_is_a_transport_fault():
    faults = [
        "NET/IB : Got completion from peer 10.0.0.2<39138> with error 12, opcode 0, len 0, vendor err 129",
        "NET/OFI Request 0x7f14cc5b60c0 completed with error. RC: 113. Error: 2 (UNDELIVERABLE). Completed length: 0",
    ]
    victims = [
        "NET/Socket : Connection closed by remote peer 10.0.0.2<4412>",
        "socketProgress: Connection reset by peer",
    ]
    for sep in (" ", "\n"):
        for last in faults:
            d = diagnose(incident(steps(4, 2), [err(1, "nccl_error", REMOTE.format(sep=sep, last=last), t=3)]))
            assert d.verdict == "nccl-error", (last, d.summary())
        for last in victims + [""]:
            d = diagnose(incident(steps(4, 2), [err(1, "nccl_error", REMOTE.format(sep=sep, last=last), t=3)]))
            assert d.verdict != "nccl-error" or d.first.rule != "nccl-error", (last, d.summary())


def test_the_own_failure_summary_says_its_for_one_rank_and_their_for_several():
    one = diagnose(incident(steps(4, 1), [err(2, "oom", "torch.OutOfMemoryError: CUDA out of memory", t=1)]))
    assert "rank 2 failed on its own (not in a collective)" in one.first.summary
    two = [err(r, "oom", "torch.OutOfMemoryError: CUDA out of memory", t=1) for r in (1, 2)]
    assert "failed on their own (not in a collective)" in diagnose(incident(steps(4, 1), two)).first.summary


def test_the_nccl_error_summary_quotes_the_first_message_cut_at_200_characters():
    first = "NCCL WARN Call to ibv_modify_qp failed with error Connection timed out " + "y" * 300
    rows = [
        err(1, "nccl_error", first, t=1, line=1),
        err(2, "nccl_error", "NCCL WARN NET/IB : Got completion error", t=2, line=2),
    ]
    f = next(f for f in diagnose(incident(steps(4, 1), rows)).findings if f.rule == "nccl-error")
    assert f.summary == "NCCL reported an error of its own: " + first[:200]


def test_a_launchers_agent_line_is_no_own_failure_finding():
    """torchelastic's agent line about a worker killed by SIGSEGV is read by the launcher rule, not
    as the rank's own-failure finding."""
    agent = err(2, "agent", "failed (exitcode: -11) local_rank: 2 (pid: 4242) of binary", t=5, signal="SIGSEGV")
    d = diagnose(incident(steps(4, 2), [agent]))
    assert not [f for f in d.findings if f.rule == "own-failure"]


def test_an_undetermined_failure_without_a_failing_line_quotes_no_line():
    """Rank 2 exited 1 and the log holds only benign warnings: the undetermined finding cites none of them."""
    warns = [err(0, "warning", f"a deprecated call {i}", t=i, line=i) for i in (1, 2, 3)]
    d = diagnose(incident(steps(4, 2), warns, ranks=[dict(rank=2, exit_code=1)]))
    assert (d.verdict, list(d.first.evidence), d.first.t_wall) == ("timeout-undetermined", [], None)


def test_nccls_error_inside_another_frameworks_exception_is_nccls_own():
    wrapped = [
        "tensorflow.python.framework.errors_impl.UnknownError:  ncclCommInitRank failed: unhandled system error",
        "horovod.common.exceptions.HorovodInternalError: ncclAllReduce failed: unhandled cuda error",
        "RuntimeError: ncclGroupEnd() failed: internal error - please report this issue to the NCCL developers",
        "jaxlib.xla_extension.XlaRuntimeError: INTERNAL: NCCL operation ncclAllGather(...) failed: invalid usage",
        "SomeError: the call returned ncclSystemError",
    ]
    for msg in wrapped:
        d = diagnose(incident(steps(4, 2), [err(1, "exception", msg, t=3)]))
        assert (d.verdict, d.first.rule) == ("nccl-error", "nccl-error"), (msg, d.summary())
    for msg in ("ValueError: set NCCL_DEBUG=INFO to see more", "KeyError: 'nccl_backend'"):
        d = diagnose(incident(steps(4, 2), [err(1, "exception", msg, t=3)]))
        assert d.first is None or d.first.rule != "nccl-error", (msg, d.summary())


def test_a_local_adapter_fault_names_the_ranks_of_its_host():
    events = ("local catastrophic error", "port error", "local access violation work queue error")
    for ev in events:
        for ranks in ((12, 13, 14), (5,)):
            rows = [
                {**err(r, "nccl_warn", f"NET/IB : Got async event : {ev}", t=3, line=i + 1), "host": "node57"}
                for i, r in enumerate(ranks)
            ]
            d = diagnose(incident((), rows))  # the reporters alone: no quiet majority to name them against
            assert (d.verdict, d.culprit_ranks) == ("nccl-error", list(ranks)), (ev, d.summary())
            assert d.first.culprit_basis.startswith("statement:") and "node57" in d.first.culprit_basis
        two_hosts = [
            {**err(r, "nccl_warn", f"NET/IB : Got async event : {ev}", t=3, line=r), "host": f"node{r}"} for r in (3, 9)
        ]
        assert diagnose(incident((), two_hosts)).culprit_ranks == []
        no_host = [err(r, "nccl_warn", f"NET/IB : Got async event : {ev}", t=3, line=r) for r in (3, 9)]
        assert diagnose(incident((), no_host)).culprit_ranks == []
        other = [
            {**err(r, "nccl_warn", "NET/IB : Got completion with error 12", t=3, line=r), "host": "n"} for r in (3, 9)
        ]
        assert diagnose(incident((), other)).culprit_ranks == []
