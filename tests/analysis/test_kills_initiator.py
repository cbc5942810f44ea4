"""Pins each decision of ``initiator.initiating_rank`` that the semantic mutation campaign
(benchmarks/bench_mutation.py, issue #15) found unpinned: which error kinds are a rank's own failure
(tier 0), which are collateral (tier 1), which launcher signals mean the rank died on its own.

The scene of most tests: ranks 0, 1 and 3 time out in the watchdog at t=5; rank 2 shows one error
at t=60. Whether rank 2 is named depends only on whether its error is its own failure.
"""

from __future__ import annotations

import pytest

from denpex_nb import diagnose
from denpex_nb.analysis.initiator import initiating_rank
from tests.analysis._frames import err, incident


def _timeouts(ranks=(0, 1, 3), t=5):
    return [
        err(r, "watchdog_timeout", "Watchdog caught collective operation timeout", t=t, op="all_reduce", seq=9)
        for r in ranks
    ]


# a message per kind that is no device fault and no crash: only the kind says "own failure"
_OWN_KINDS = {
    "abort": "terminate called after throwing an instance of 'c10::Error'",
    "gloo_enforce": "[enforce fail at gloo/transport/tcp/buffer.cc:72] 8 vs 16",
    "nccl_error": "DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled system error",
    "gloo_invalid_size": "ProcessGroupGloo::allreduce: invalid tensor size at index 0",
    "detail_mismatch": "Detected mismatch between collectives on ranks. Rank 2 is running collective: broadcast",
    "ddp_unused_parameters": "Expected to have finished reduction in the prior iteration",
    "ddp_error": "DDP expects same model across all ranks, but Rank 2 has 3 params",
}


@pytest.mark.parametrize("kind", sorted(_OWN_KINDS))
def test_an_own_failure_kind_outranks_the_earlier_timeouts_it_caused(kind):
    """Rank 2's error of this kind is its own failure: it started the failure although the others'
    timeouts came first."""
    errs = _timeouts() + [err(2, kind, _OWN_KINDS[kind], t=60)]
    assert diagnose(incident(errors=errs)).initiating_rank == 2


@pytest.mark.parametrize("kind", ["signal", "child_failed", "agent"])
def test_a_launcher_report_of_sigabrt_is_the_ranks_own_death(kind):
    """SIGABRT from the launcher (signal row, ChildFailedError table, agent line) is own death."""
    errs = _timeouts() + [err(2, kind, f"rank 2 (pid 4242) {kind}: Signal 6 (SIGABRT)", t=60, signal="SIGABRT")]
    assert diagnose(incident(errors=errs)).initiating_rank == 2


@pytest.mark.parametrize("sig", ["SIGABRT", "SIGSEGV", "SIGKILL", "SIGBUS", "SIGILL", "SIGFPE"])
def test_a_signal_in_the_launchers_rank_table_is_the_ranks_own_death(sig):
    """The rank table (no error row for rank 2) says rank 2 died of ``sig``: rank 2 initiated."""
    d = diagnose(incident(errors=_timeouts(), ranks=[dict(rank=2, signal=sig)]))
    assert d.initiating_rank == 2


def test_a_rank_in_the_launchers_table_without_a_signal_is_no_candidate():
    """Rank 0 listed by the launcher with exit code 0 and no signal did not fail: the one timeout names rank 1."""
    d = diagnose(incident(errors=_timeouts(ranks=(1,)), ranks=[dict(rank=0, exit_code=0)]))
    assert d.initiating_rank == 1


@pytest.mark.parametrize(
    "kind, message",
    [
        ("watchdog_timeout", "Watchdog caught collective operation timeout"),
        ("monitored_barrier", "Rank 1 failed to pass monitoredBarrier in 30000 ms"),
        ("desync_report", "[Rank 1] Timeout at collective: ALLREDUCE, #9"),
        ("exception", "RuntimeError: NCCL communicator was aborted on rank 1"),
    ],
)
def test_collateral_on_one_rank_alone_names_that_rank(kind, message):
    """No own failure anywhere, and only rank 1 shows collateral (a timeout, a monitored barrier, a
    desync report, a collective's exception): the tier of collateral names it."""
    errs = [err(1, kind, message, t=5)]
    assert diagnose(incident(errors=errs)).initiating_rank == 1


def test_without_a_rank_table_only_the_errors_decide():
    """Called without the launcher's rank table (ranks=None): the one timeout names rank 3."""
    assert initiating_rank(incident(errors=_timeouts(ranks=(3,))).errors, None) == 3


def test_without_errors_only_the_rank_table_decides():
    """Called with no errors frame (errors=None): the launcher's SIGSEGV for rank 2 names it."""
    ranks = incident(ranks=[dict(rank=2, signal="SIGSEGV")]).ranks
    assert initiating_rank(None, ranks) == 2
