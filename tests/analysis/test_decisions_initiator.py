"""The decisions of :func:`denpex_nb.analysis.initiator.initiating_rank`, pinned on small inputs.

Decisions of ``initiating_rank`` (the first rank to fail, not torchrun's "Root Cause"):

- an own failure (an exception that is not a collective error, OOM, a crash signal) outranks
  every timeout and peer-gone error, however much earlier those are
  (test_an_own_failure_outranks_earlier_victims).
- within a tier the unique earliest time wins; two ranks at one instant name no initiator, never
  the lowest rank (test_two_own_failures_at_one_instant_name_no_initiator).
- without times, a tier held by one rank names it, by several names none
  (test_without_times_only_a_lone_rank_is_named).
- SIGTERM from the launcher is collateral, SIGSEGV/SIGKILL/SIGABRT are own failures
  (test_a_launchers_sigterm_is_collateral).
"""

from __future__ import annotations

from denpex_nb.analysis.initiator import initiating_rank
from denpex_nb.incident import coerce

from ._frames import err

OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"
TIMEOUT = "Watchdog caught collective operation timeout"


def _first(*rows, ranks=()):
    return initiating_rank(coerce("errors", list(rows)), coerce("ranks", list(ranks)) if ranks else None)


def test_an_own_failure_outranks_earlier_victims():
    assert _first(err(0, "watchdog_timeout", TIMEOUT, t=1), err(3, "oom", OOM, t=50)) == 3
    assert _first(err(0, "watchdog_timeout", TIMEOUT, t=1), err(1, "gloo_peer_gone", "Connection closed", t=2)) == 0


def test_two_own_failures_at_one_instant_name_no_initiator():
    assert _first(err(3, "oom", OOM, t=20), err(0, "oom", OOM, t=20)) is None
    assert _first(err(0, "oom", OOM, t=20), err(3, "oom", OOM, t=20)) is None
    assert _first(err(3, "oom", OOM, t=20), err(0, "oom", OOM, t=21)) == 3
    assert _first(err(3, "oom", OOM, t=20), err(0, "oom", OOM, t=19)) == 0
    ties = [err(r, "watchdog_timeout", TIMEOUT, t=5) for r in (2, 1)]
    assert _first(*ties) is None


def test_without_times_only_a_lone_rank_is_named():
    assert _first(err(2, "oom", OOM), err(2, "oom", OOM, line=2)) == 2
    assert _first(err(2, "oom", OOM), err(1, "oom", OOM)) is None


def test_a_launchers_sigterm_is_collateral():
    timeouts = [err(r, "watchdog_timeout", TIMEOUT, t=5) for r in (0, 1)]
    term = err(2, "child_failed", "exitcode -15", t=9, signal="SIGTERM")
    assert _first(*timeouts, term) is None
    assert _first(*timeouts, ranks=[dict(rank=2, signal="SIGKILL")]) == 2
    assert _first(*timeouts, ranks=[dict(rank=2, signal="SIGTERM")]) is None
