"""Decisions on the socket and connection family of real-log evidence (issue #16: gloo and c10d
sockets, stores, ports), each tested on generated variants (launcher and collector wrappers, subsets
of ranks, cuts), never on one log.

- a server socket that cannot take its port because another process holds it (c10d's store: ``The
  server socket has failed to bind to [::]:29500 (errno: 98 - Address already in use)``, its
  ``failed to listen on any local network address``, a ``DistNetworkError`` saying so, an ``OSError``
  with ``EADDRINUSE``) is the process's own set-up failure, before any collective: ``rank-crash``.
  Without it the user was told ``nccl-error`` (look at the network, NCCL's settings) about a port that
  another job holds (test_a_port_another_process_holds_is_the_process_own_crash).
- c10d's client trying one address of a host name that is not usable from here (EADDRNOTAVAIL: Linux
  ``errno: 99 - Cannot assign requested address``, Windows ``system error: 10049``, its text in
  English or in the local language) at warning level is no failure: c10d goes on with the next
  address. Without it the user was told ``nccl-error`` about a Windows run whose only c10d line is
  that warning (test_a_probe_of_an_address_not_usable_here_is_no_failure); c10d's summary that no
  address could be reached, or a refused connection, still fails
  (test_a_connection_that_failed_for_good_still_fails); a store client that gave up connecting (``The
  client socket has timed out after 1800s while trying to connect to (host, port)``, ``connect() timed
  out``) is the network's failure, as every connection that timed out is: ``nccl-error``, not "cause
  undetermined" (test_a_store_client_that_timed_out_connecting_is_a_network_error).
- libfabric's providers under NCCL's OFI plugin (EFA, verbs) report in their own format: a ``<warn>``
  level tag after the function with ``err: N``, a failed operation's ``prov_errno``. A transport
  failure: ``nccl-error``, beside NCCL INFO lines or alone, behind launchers. Without it the user was
  told ``no-failure`` (a false all-clear) or "nothing distributed"
  (test_a_libfabric_provider_error_is_a_network_error); its ``err: 0`` and info lines are no failure
  (test_a_libfabric_line_without_an_error_is_no_failure).
- torchelastic's ``RendezvousConnectionError`` (the agent cannot reach its rendezvous backend, the c10d
  store) is a connection failure, ``nccl-error``, not a worker's crash: no worker ran
  (test_a_rendezvous_connection_error_is_a_network_error).
- HCCL, Ascend's collective library in NCCL's place, in its own words (``HCCL error in:
  ProcessGroupHCCL.cpp``, ``DIST call hccl api failed``, ``OPS function error: HcclAllreduce, error
  code is 6``) is the collective library's error: ``nccl-error``, not a plain crash of the process
  (test_an_hccl_error_is_the_collective_librarys_error).
- gloo failing to connect the full mesh of pairs a process group needs (``Gloo connectFullMesh failed
  with [.../pair.cc:144] no error``: errno 0's text after the source location) is a network failure at
  set-up: ``nccl-error``, never excused by its ``no error``. Without it the user was told "cause
  undetermined" (test_a_full_mesh_that_could_not_connect_is_a_network_error); a summary line's
  ``no errors`` stays benign (test_a_count_of_no_errors_stays_benign).
- connections a peer closed or reset inside a collective (gloo's ``Connection closed by peer``,
  ``Read error ...: Connection reset by peer``), on one rank or several, behind CI timestamps, Ray,
  launcher or collector prefixes, with the exits they caused, as all the evidence shows: the peer went
  away first, ``rank-crash`` at low confidence naming no one (no address maps to a rank), with a size
  mismatch the peer may have detected and a collective it may have skipped as alternatives. Without
  it the user was told "cause undetermined" about logs where gloo itself says to check the remote
  worker (test_connections_a_peer_closed_are_a_crash_of_the_peer_at_low_confidence); beside a
  timeout, a size or mismatch line, or a cut that took the peer words, it is never that verdict
  (test_beside_a_cause_a_closed_connection_is_not_the_verdict); an application's own HTTP connection
  reset by its server is no rank's peer
  (test_an_application_connection_reset_names_no_peer_process), and a cut that took the peer words
  is never that verdict (test_a_cut_that_took_the_peer_words_is_not_the_verdict). An application's
  reset beside another rank that left a collective through ``sys.exit`` is no closed connection either:
  the exit was no reader's "closed by peer"
  (test_an_application_reset_beside_a_rank_that_exited_in_a_collective_names_no_peer). Beside a
  launcher's line that a process exited (a consequence, as a collective failed) the closed connection
  stays the verdict, in its own words and evidence, not the launcher's line with the peer's story
  attached (test_beside_a_launchers_exit_line_the_closed_connection_stays_the_verdict). A gloo line
  that does not say the peer closed or reset the connection (``Read timeout``, ``Socket closed``) is
  no peer gone: it names no peer and no rule fails on it
  (test_a_gloo_line_without_the_peers_words_is_no_peer_gone). The exits the closed connection went
  with (mp.spawn's ``ProcessExitedException``, a ``SystemExit``) say no more than that a process went
  away: the closed connection stays the verdict
  (test_the_exits_beside_a_closed_connection_leave_it_the_verdict).
"""

from __future__ import annotations

import pytest

from denpex_nb.signals import classify
from tests.signal_variants import WRAPPERS, healthy_lines
from tests.signal_variants import diagnose_files as _diagnose

_ALL = sorted(WRAPPERS)


def _files(lines: list[str], wrapper: str, rank: int, per_rank: bool, healthy: bool) -> dict[str, list[str]]:
    w = WRAPPERS[wrapper]
    body = [w(rank, t) for t in lines]
    if healthy:
        body = healthy_lines(2, 3) + body
    return {f"rank{rank}.log" if per_rank else "job.log": body}


# --- a port another process holds ----------------------------------------------------------------

_PORT = 29500
_BIND = {
    "c10d-warnings-and-summary": [
        f"[W socket.cpp:426] [c10d] The server socket has failed to bind to [::]:{_PORT} (errno: 98 - Address already "
        "in use).",
        f"[W socket.cpp:426] [c10d] The server socket has failed to bind to 0.0.0.0:{_PORT} (errno: 98 - Address "
        "already in use).",
        "[E socket.cpp:462] [c10d] The server socket has failed to listen on any local network address.",
        "Traceback (most recent call last):",
        '  File "/opt/conda/bin/torchrun", line 33, in <module>',
    ],
    "dist-network-error": [
        "torch.distributed.DistNetworkError: The server socket has failed to listen on any local network address. "
        f"The server socket has failed to bind to [::]:{_PORT + 11} (errno: 98 - Address already in use). The "
        f"server socket has failed to bind to 0.0.0.0:{_PORT + 11} (errno: 98 - Address already in use).",
    ],
    "oserror": [
        "Traceback (most recent call last):",
        '  File "train.py", line 12, in <module>',
        '    dist.init_process_group("nccl", init_method="tcp://0.0.0.0:23456", rank=0, world_size=2)',
        "OSError: [Errno 98] Address already in use",
    ],
    "store-errno-name": [
        "RuntimeError: TCPStore: bind() failed: EADDRINUSE (port 6000)",
    ],
    "windows": [
        "[W socket.cpp:558] [c10d] The server socket has failed to bind to [DESKTOP-4]:29500 (system error: 10048 - "
        "Only one usage of each socket address (protocol/network address/port) is normally permitted.).",
        "[E socket.cpp:594] [c10d] The server socket has failed to listen on any local network address.",
    ],
}


@pytest.mark.parametrize("kind", sorted(_BIND))
@pytest.mark.parametrize("wrapper", _ALL)
@pytest.mark.parametrize("healthy", [False, True], ids=["alone", "after-steps"])
def test_a_port_another_process_holds_is_the_process_own_crash(tmp_path, kind, wrapper, healthy):
    """Told ``nccl-error``, the user would check the network and NCCL's settings; the fix is another
    port (or stopping the job that holds it): the process could not set itself up."""
    d = _diagnose(tmp_path, _files(_BIND[kind], wrapper, 1, wrapper != "plain", healthy))
    assert d.verdict == "rank-crash", (d.verdict, d.first.summary if d.first else None)
    assert d.culprit_ranks in ([], [1])
    assert d.confidence != "high"


# --- an address that is not usable from here ---------------------------------------------------

_NOT_HERE = [
    "[W socket.cpp:697] [c10d] The client socket has failed to connect to [DESKTOP-BP72V]:55472 (system error: "
    "10049 - \u00e8\u00af\u00b7\u00e6\u00b1\u0082\u00e7\u009a\u0084).",
    "[W socket.cpp:697] [c10d] The client socket has failed to connect to [DESKTOP-77]:29500 (system error: 10049 - "
    "The requested address is not valid in its context.).",
    "[W socket.cpp:663] [c10d] The client socket has failed to connect to [localhost]:29500 (errno: 99 - Cannot "
    "assign requested address).",
    "[W1201 10:00:00.123456 140 socket.cpp:752] [c10d] The client socket has failed to connect to "
    "[ip6-localhost]:12355 (errno: 99 - Cannot assign requested address).",
]


@pytest.mark.parametrize("text", _NOT_HERE)
@pytest.mark.parametrize("wrapper", ["plain", "torchrun", "mpirun", "ray", "docker"])
def test_a_probe_of_an_address_not_usable_here_is_no_failure(tmp_path, text, wrapper):
    """Told ``nccl-error``, the user would chase a network fault in a run whose c10d client only tried
    an address the host cannot use and went on with the next one."""
    assert classify(text, "W") is None or not classify(text, "W").failure
    d = _diagnose(tmp_path, _files(["WARNING:root:Setting up a new session...", text], wrapper, 0, False, False))
    assert d.verdict in ("no-evidence", "no-failure"), d.first.summary if d.first else d.verdict
    # in a healthy run it leaves the all-clear as it was
    d = _diagnose(tmp_path, _files([text], wrapper, 0, False, True))
    assert d.verdict == "no-failure"


_FOR_GOOD = [
    "torch.distributed.DistNetworkError: The client socket has failed to connect to any network address of "
    "(localhost, 29500). The client socket has failed to connect to [localhost]:29500 (errno: 99 - Cannot assign "
    "requested address).",
    "[W socket.cpp:663] [c10d] The client socket has failed to connect to [node3]:29500 (errno: 111 - Connection "
    "refused).",
    "[E socket.cpp:860] [c10d] The client socket has timed out after 900s while trying to connect to (node3, 29500).",
]


@pytest.mark.parametrize("text", _FOR_GOOD)
@pytest.mark.parametrize("wrapper", ["plain", "torch", "pdsh"])
def test_a_connection_that_failed_for_good_still_fails(tmp_path, text, wrapper):
    """An all-clear here would tell the user a job that could not reach its store was fine."""
    d = _diagnose(tmp_path, _files([text], wrapper, 2, False, True))
    assert d.verdict not in ("no-failure", "no-evidence")


_CONNECT_TIMEOUT = [
    "TimeoutError: The client socket has timed out after 1800s while trying to connect to (127.0.0.1, 48391).",
    "[E socket.cpp:793] [c10d] The client socket has timed out after 600s while trying to connect to (node-3, 29500).",
    "torch.distributed.DistNetworkError: The client socket has timed out after 900000ms while trying to connect to "
    "(10.1.2.3, 12355).",
    "RuntimeError: connect() timed out. Original timeout was 1800000 ms.",
]


@pytest.mark.parametrize("text", _CONNECT_TIMEOUT)
@pytest.mark.parametrize("wrapper", _ALL)
@pytest.mark.parametrize("frames", [False, True], ids=["line", "traceback"])
def test_a_store_client_that_timed_out_connecting_is_a_network_error(tmp_path, text, wrapper, frames):
    """Told "cause undetermined" (a collective's timeout), the user would look for a rank that lagged
    in a collective; nothing was reachable at the store's address: the network, the address or the
    port, or a master that never listened."""
    lines = (["Traceback (most recent call last):", "    return TCPStore("] if frames else []) + [text]
    d = _diagnose(tmp_path, _files(lines, wrapper, 1, False, False))
    assert d.verdict == "nccl-error", d.first.summary if d.first else d.verdict
    assert d.confidence != "high"


# --- gloo's full mesh ---------------------------------------------------------------------------

_MESH = [
    "RuntimeError: Gloo connectFullMesh failed with [../third_party/gloo/gloo/transport/tcp/pair.cc:144] no error",
    "RuntimeError: Gloo connectFullMesh failed with [/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:210] "
    "Connection refused",
    "torch.distributed.DistBackendError: Gloo connectFullMesh failed with [../third_party/gloo/gloo/transport/tcp/"
    "pair.cc:144] no error",
]
_FRAMES = [
    '  File "/usr/lib/python3/dist-packages/torch/distributed/distributed_c10d.py", line 1509, in '
    "_new_process_group_helper",
    "    backend_class = ProcessGroupGloo(backend_prefix_store, group_rank, group_size, timeout=timeout)",
]


@pytest.mark.parametrize("text", _MESH)
@pytest.mark.parametrize("wrapper", _ALL)
@pytest.mark.parametrize("frames", [False, True], ids=["line", "traceback"])
def test_a_full_mesh_that_could_not_connect_is_a_network_error(tmp_path, text, wrapper, frames):
    """Told "cause undetermined" (or nothing, its ``no error`` read as a count), the user would not
    look at the network between the hosts and the interface gloo chose."""
    lines = (["Traceback (most recent call last):"] + _FRAMES if frames else []) + [text]
    d = _diagnose(tmp_path, _files(lines, wrapper, 0, False, False))
    assert d.verdict == "nccl-error", d.first.summary if d.first else d.verdict


@pytest.mark.parametrize(
    "text",
    ["Validation finished: no errors", "checked 128 shards, no errors found", "[check] 4 ranks, no failures"],
)
def test_a_count_of_no_errors_stays_benign(text):
    """Read as a failure, a summary that says nothing failed would take the all-clear away."""
    s = classify(text)
    assert s is None or not s.failure


# --- a peer that closed the connection ------------------------------------------------------------

_GONE = {
    "closed": "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:598] Connection closed by peer "
    "[172.17.0.{h}]:16786",
    "reset": "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:589] Read error [192.168.70.{h}]:25266: "
    "Connection reset by peer",
    "closed-hint": "RuntimeError: [/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:553] Connection closed by "
    "peer [10.0.0.{h}]:29407. This is typically caused by a remote worker crashing. Check the logs of the remote "
    "worker before reporting an error.",
}
_CALLS = {
    "broadcast": "dist.broadcast(tensor_size, src=0, group=dist_group)",
    "barrier": "dist.barrier()",
    "all_reduce": "dist.all_reduce(grad)",
    "unseen": None,
}
#: what else real logs put around the reporter's traceback (CI timestamps, Ray's actor prefix)
_AROUND = {
    **{k: WRAPPERS[k] for k in ("plain", "torch", "torchrun", "mpirun", "slurm", "pdsh", "kubectl", "docker")},
    "ci-timestamp": lambda r, t: f"Jul 13 21:22:3{r}     {t}",
    "ray-pid": lambda r, t: f"(RayWorkerWrapper pid={24270 + r}) {t}",
}


def _reporter(r: int, what: str, call: str | None, w) -> list[str]:
    frames = (
        [
            "Traceback (most recent call last):",
            '  File "/opt/conda/lib/python3.10/site-packages/torch/distributed/distributed_c10d.py", line 2213, '
            f"in {call.split('(')[0].split('.')[-1]}",
            "    work.wait()",
        ]
        if call
        else []
    )
    if call:
        frames.insert(1, '  File "worker.py", line 40, in step')
        frames.insert(2, f"    {call}")
    return [w(r, t) for t in frames + [_GONE[what].format(h=r + 2)]]


@pytest.mark.parametrize("what", sorted(_GONE))
@pytest.mark.parametrize("call", sorted(_CALLS))
@pytest.mark.parametrize("around", sorted(_AROUND))
@pytest.mark.parametrize("reporters", [(3,), (0, 2, 3)], ids=["one-rank", "three-ranks"])
def test_connections_a_peer_closed_are_a_crash_of_the_peer_at_low_confidence(tmp_path, what, call, around, reporters):
    """Told "cause undetermined", the user would not open the log of the process that went away
    first; told it at medium or high, or with a rank named, they would trust a guess the lines do not
    make (the peer's address maps to no rank here)."""
    w = _AROUND[around]
    lines = [ln for r in reporters for ln in _reporter(r, what, _CALLS[call], w)]
    if around == "ci-timestamp":
        lines += [w(3, " exiting process 3 with exit code: 10"), w(3, "Process 2 terminated with exit code 10")]
    d = _diagnose(tmp_path, {"job.log": lines})
    assert (d.verdict, d.confidence, d.culprit_ranks) == ("rank-crash", "low", []), d.first.summary
    assert {"shape-mismatch", "rank-desync"} <= {a.class_id for a in d.alternatives}


_CAUSES = {
    "timeout": "[rank1]:RuntimeError: [../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:81] Timed out "
    "waiting 1800000ms for recv operation to complete",
    "size": "[rank1]:  what():  [enforce fail at ../third_party/gloo/gloo/transport/tcp/pair.cc:456] "
    "op.preamble.length <= op.nbytes. 16 vs 12. Received data size doesn't match expected size. Is there a "
    "distributed collective mismatch in your code?",
    "size-cut": "[rank1]:eceived data size doesn't match expected size. Is there a distributed collective mismatch",
    "abort": "[rank1]:terminate called after throwing an instance of 'gloo::EnforceNotMet'",
}


@pytest.mark.parametrize("cause", sorted(_CAUSES))
@pytest.mark.parametrize("order", ["cause-first", "cause-last"])
def test_beside_a_cause_a_closed_connection_is_not_the_verdict(tmp_path, cause, order):
    """Told "the peer crashed", the user would look past the timeout or the size check that the
    evidence shows, which says more than a closed connection does."""
    gone = _reporter(0, "closed-hint", _CALLS["all_reduce"], WRAPPERS["torch"])
    lines = [_CAUSES[cause]] + gone if order == "cause-first" else gone + [_CAUSES[cause]]
    d = _diagnose(tmp_path, {"job.log": lines})
    assert not (d.verdict == "rank-crash" and d.first.rule == "peer-gone"), d.first.summary
    assert d.verdict != "no-failure"


@pytest.mark.parametrize("cut", [40, 55, 70])
def test_a_cut_that_took_the_peer_words_is_not_the_verdict(tmp_path, cut):
    """Told "the peer crashed" off a line that no longer says so, the user would be given a story the
    evidence lost; it stays a failure."""
    line = _GONE["closed"].format(h=2)[:cut]
    d = _diagnose(tmp_path, {"job.log": _reporter(0, "closed", _CALLS["broadcast"], WRAPPERS["torch"])[:-1] + [line]})
    assert d.first.rule != "peer-gone" and d.verdict != "no-failure"


@pytest.mark.parametrize("wrapper", ["plain", "torch", "docker"])
def test_an_application_connection_reset_names_no_peer_process(tmp_path, wrapper):
    """Told "the peer process closed the connection", the user would hunt for a dead rank when a web
    service reset the application's own HTTP connection."""
    w = WRAPPERS[wrapper]
    lines = [
        w(0, "Traceback (most recent call last):"),
        w(0, '  File "/usr/lib/python3/dist-packages/urllib3/connectionpool.py", line 703, in urlopen'),
        w(0, "ConnectionResetError: [Errno 104] Connection reset by peer"),
    ]
    d = _diagnose(tmp_path, {"job.log": lines})
    assert d.first is None or d.first.rule != "peer-gone"


def _traceback(r: int, call: str | None, exc: str, w) -> list[str]:
    frames = ["Traceback (most recent call last):"]
    if call:
        frames += ['  File "worker.py", line 40, in step', f"    {call}"]
        frames += [
            '  File "/opt/conda/lib/python3.10/site-packages/torch/distributed/distributed_c10d.py", line 2213, '
            f"in {call.split('(')[0].split('.')[-1]}",
            "    work.wait()",
        ]
    else:
        frames += ['  File "/usr/lib/python3/dist-packages/urllib3/connectionpool.py", line 703, in urlopen']
    return [w(r, t) for t in frames + [exc]]


@pytest.mark.parametrize("wrapper", ["plain", "torch", "slurm", "docker"])
@pytest.mark.parametrize("call", ["dist.all_reduce(grad)", "dist.barrier()"])
def test_an_application_reset_beside_a_rank_that_exited_in_a_collective_names_no_peer(tmp_path, wrapper, call):
    """Told "the peer process closed the connection", the user would hunt for a dead rank behind an
    HTTP reset of the application's own, because another rank left a collective through sys.exit (a
    signal handler's exit): neither line says a rank's peer closed a connection."""
    w = WRAPPERS[wrapper]
    lines = _traceback(0, None, "ConnectionResetError: [Errno 104] Connection reset by peer", w)
    lines += _traceback(1, call, "SystemExit: 1", w)
    d = _diagnose(tmp_path, {"job.log": lines})
    assert d.first is not None and d.first.rule != "peer-gone", d.first.summary
    assert d.verdict != "no-failure"


#: a line with NCCL's code word whose failure is the same closed connection (a victim's line)
_NCCL_VICTIM = [
    "socketProgress: Connection reset by peer (ncclSystemError)",
    "ncclSystemError: Connection closed by remote peer",
    "NCCL WARN NET/Socket : unhandled system error, Connection closed by peer",
]
_EXITED = (
    "torch.distributed.elastic.multiprocessing.api:[ERROR] failed (exitcode: 1) local_rank: 1 (pid: 4242) of "
    "binary: /usr/bin/python"
)


@pytest.mark.parametrize("victim", _NCCL_VICTIM)
@pytest.mark.parametrize("wrapper", ["plain", "torch", "slurm"])
def test_beside_a_launchers_exit_line_the_closed_connection_stays_the_verdict(tmp_path, victim, wrapper):
    """Told the launcher's line ("local rank 1 exited with code 1 first ... this exit may be its
    consequence") as the verdict, with the peer's story attached and the launcher's lines as evidence,
    the user would read two stories in one and not be shown the line where gloo says the peer closed
    the connection. The NCCL line decides between the closed connection and NCCL's error by wrapper;
    neither is the launcher's line."""
    w = WRAPPERS[wrapper]
    lines = _reporter(0, "closed", _CALLS["all_reduce"], w) + [w(1, victim), _EXITED]
    d = _diagnose(tmp_path, {"job.log": lines})
    assert d.verdict not in ("no-failure", "no-evidence")
    assert d.first.rule != "launcher-first-failure", d.first.summary  # a consequence: an alternative only
    if "closed the connection" in d.first.summary:
        assert d.first.rule == "peer-gone" and d.first.summary.startswith("The peer process closed")
        assert any("Connection closed by peer" in e.text for e in d.first.evidence)


_EXITS = [
    "torch.multiprocessing.spawn.ProcessExitedException: process 1 terminated with exit code 1",
    "SystemExit: 1",
]


@pytest.mark.parametrize("exit_line", _EXITS)
@pytest.mark.parametrize("wrapper", ["plain", "torch", "slurm"])
def test_the_exits_beside_a_closed_connection_leave_it_the_verdict(tmp_path, exit_line, wrapper):
    """Told "cause undetermined" because a process's exit was printed too, the user would not open the
    log of the process that went away first: an exit says less than the closed connection does."""
    w = WRAPPERS[wrapper]
    lines = _reporter(0, "closed", _CALLS["all_reduce"], w)
    lines += [w(1, t) for t in ("Traceback (most recent call last):", '  File "launch.py", line 3, in <module>')]
    lines += [w(1, exit_line)]
    d = _diagnose(tmp_path, {"job.log": lines})
    assert (d.verdict, d.first.rule, d.confidence) == ("rank-crash", "peer-gone", "low"), d.first.summary


_GLOO_OTHER = [
    "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:575] Socket closed [10.0.0.{h}]:5555",
    "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:445] Read timeout [10.0.0.{h}]:5555",
]


@pytest.mark.parametrize("text", _GLOO_OTHER)
@pytest.mark.parametrize("wrapper", ["plain", "torch", "docker"])
@pytest.mark.parametrize("beside", ["alone", "beside-a-closed-connection"])
def test_a_gloo_line_without_the_peers_words_is_no_peer_gone(tmp_path, text, wrapper, beside):
    """Told "the peer closed the connection" of a read that timed out, the user would look for a dead
    process where a slow or hung one is as likely; before, the peer-gone rule failed on such a line
    (its quote of the peer's words found none), and a failed rule is a note, not a diagnosis."""
    w = WRAPPERS[wrapper]
    lines = [w(1, text.format(h=3))]
    if beside != "alone":
        lines = _reporter(0, "closed", _CALLS["all_reduce"], w) + lines
    d = _diagnose(tmp_path, {"job.log": lines})  # strict: a rule that fails raises here
    assert d.verdict not in ("no-failure", "no-evidence")
    assert d.first.rule != "peer-gone", d.first.summary
    assert not d.culprit_ranks


# --- libfabric providers and the rendezvous backend ------------------------------------------------

_FABRIC = [
    "libfabric:451707:1708520807::efa:cq:efa_rdm_txe_handle_error():737<warn> err: 5, message: Invalid address My "
    "EFA addr: fi_addr_efa://[fe80::13:c2ff:fe6f:f03d]:0:1072483550 Peer EFA addr: fi_addr_efa://[fe80::b8]:0:9476",
    "libfabric:2231:1700000000::efa:ep_ctrl:efa_rdm_ep_post_send():512<warn> err: 110, message: Connection timed out",
    "libfabric:88:1699999999::verbs:fabric:vrb_cq_read():300<warn> err: 12, message: Transport retry counter exceeded",
    "Unable to write to EQ: Missing or unavailable event queue. err: Input/output error (5) prov_errno: Unknown error "
    "-114 (-114) prov/rxr/src/rxr.h:1042",
    "fi_cq_readerr: err: Input/output error (5), prov_errno: Remote unreachable (12) prov/efa/src/rdm/efa_rdm_cq.c:101",
]
_NCCL_INFO = [
    "ip-172-31-69-127:451707:453373 [4] NCCL INFO Channel 00/0 : 0[4] -> 8[4] [send] via NET/AWS Libfabric/4/GDRDMA",
    "ip-172-31-69-127:451707:453373 [4] NCCL INFO Channel 01/0 : 8[4] -> 0[4] [receive] via NET/AWS Libfabric/4/GDRDMA",
]


@pytest.mark.parametrize("text", _FABRIC)
@pytest.mark.parametrize("wrapper", ["plain", "mpirun", "slurm", "pdsh", "docker", "torch"])
@pytest.mark.parametrize("beside", [False, True], ids=["alone", "beside-nccl-info"])
def test_a_libfabric_provider_error_is_a_network_error(tmp_path, text, wrapper, beside):
    """Told ``no-failure`` beside NCCL's channel lines, the user would be given an all-clear over a
    failed network transport; told "nothing distributed", they would not look at the fabric."""
    w = WRAPPERS[wrapper]
    lines = ([w(0, t) for t in _NCCL_INFO] if beside else []) + [w(0, text)]
    d = _diagnose(tmp_path, {"job.log": lines})
    assert d.verdict == "nccl-error", d.first.summary if d.first else d.verdict
    assert d.confidence != "high"


@pytest.mark.parametrize(
    "text",
    [
        "libfabric:1:1700000000::efa:core:efa_device_init():100<info> err: 0, using 4 devices",
        "libfabric:1:1700000000::core:core:ofi_register_provider():474<info> registering provider: efa (119.0)",
        "libfabric:1:1700000000::efa:cq:efa_rdm_cq_poll():737<warn> err: 0, message: Success",
    ],
)
def test_a_libfabric_line_without_an_error_is_no_failure(text):
    """Read as failures, libfabric's start-up chatter would take every EFA run's all-clear away."""
    s = classify(text)
    assert s is None or not s.failure


_RDZV = [
    "WARNING:torch.distributed.elastic.rendezvous.dynamic_rendezvous:The node 'worker-1_17_0' has failed to shutdown "
    "the rendezvous 'none' due to an error of type RendezvousConnectionError.",
    "torch.distributed.elastic.rendezvous.api.RendezvousConnectionError: The connection to the C10d store has failed. "
    "See inner exception for details.",
]


@pytest.mark.parametrize("text", _RDZV)
@pytest.mark.parametrize("wrapper", ["plain", "kubectl", "docker", "slurm"])
def test_a_rendezvous_connection_error_is_a_network_error(tmp_path, text, wrapper):
    """Told "a worker crashed", the user would look for a worker's traceback; no worker ran: the agent
    could not reach its rendezvous store (its address, port, or the network)."""
    lines = [
        "INFO:torch.distributed.elastic.agent.server.api:[default] Rendezvous'ing worker group",
        text,
        "Traceback (most recent call last):",
    ]
    d = _diagnose(tmp_path, {"job.log": [WRAPPERS[wrapper](0, t) for t in lines]})
    assert d.verdict == "nccl-error", d.first.summary if d.first else d.verdict


_HCCL = [
    "RuntimeError: InnerRunOpApi:torch_npu/csrc/framework/OpParamMaker.cpp:281 OPS function error: HcclAllreduce, "
    "error code is 6",
    "RuntimeError: InnerRunOpApi:torch_npu/csrc/framework/OpParamMaker.cpp:281 OPS function error: HcclAllGather, "
    "error code is 7",
    "RuntimeError: [ERROR] HCCL error in: torch_npu/csrc/distributed/ProcessGroupHCCL.cpp:64",
    "[ERROR] 2024-05-21-11:57:54 (PID:927000, Device:3, RankID:3) ERR02200 DIST call hccl api failed.",
]


@pytest.mark.parametrize("text", _HCCL)
@pytest.mark.parametrize("wrapper", ["plain", "torch", "torchrun", "mpirun", "docker"])
def test_an_hccl_error_is_the_collective_librarys_error(tmp_path, text, wrapper):
    """Told "a process crashed", the user of an Ascend cluster would look for an exception of their own
    code; the collective library failed (its network, its devices, a stuck peer)."""
    lines = ["Traceback (most recent call last):", '  File "train.py", line 88, in <module>', text]
    d = _diagnose(tmp_path, {"job.log": [WRAPPERS[wrapper](1, t) for t in lines]})
    assert d.verdict == "nccl-error", d.first.summary if d.first else d.verdict
