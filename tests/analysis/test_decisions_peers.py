"""The decisions of rule ``peer-gone`` (analysis/peers.py), pinned on small inputs.

Decisions of rule ``peer-gone``:

- a closed connection in a point-to-point call that names its peer (``dst=0``) is a rank crash of
  that peer, by statement, and the verdict (test_a_send_naming_its_peer_names_the_peer).
- in a collective, or a call the evidence does not show, the other side may have left for a reason
  its own log states (a mismatch it detected, a collective it skipped): the rule's finding is only an
  alternative beside what else the evidence explains; when it is all the evidence shows, it is the
  verdict at low confidence, naming no one, with those reasons as alternatives
  (test_in_a_collective_a_closed_connection_alone_is_a_crash_of_the_peer_at_low_confidence).
- beside another collective failure (a timeout) it is only an alternative
  (test_beside_a_timeout_a_closed_connection_is_only_an_alternative).
- a peer that reported the error itself, or several peers, name no culprit
  (test_a_peer_that_reported_it_too_is_no_culprit).
- the peer's address names a rank only when one rank alone has it (NCCL's Bootstrap line of a
  process its ``nRanks`` line ranks), with that mapping in the culprit basis; an address a whole
  node shares names no one (test_a_peer_address_one_rank_has_names_that_rank).
"""

from __future__ import annotations

import denpex_nb as dx
from denpex_nb import diagnose

from ._frames import err, incident

CLOSED = "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:553] Connection closed by peer [10.0.0.1]:29921"


def _closed(rank, op=None, call=None, line=1):
    row = err(rank, "exception", CLOSED, t=5, op=op, line=line)
    row["collective_call"] = call
    return row


def _peer(d):
    return [f for f in list(d.findings) + list(d.alternatives) if f.rule == "peer-gone"]


def test_a_send_naming_its_peer_names_the_peer():
    d = diagnose(incident(errors=[_closed(1, "send", "dist.send(t, dst=0)")]))
    (f,) = _peer(d)
    assert (f.class_id, list(f.culprit_ranks), f.alternative_only) == ("rank-crash", [0], False)
    assert f.culprit_basis.startswith("statement") and d.verdict == "rank-crash"


def test_in_a_collective_a_closed_connection_alone_is_a_crash_of_the_peer_at_low_confidence():
    """Told "cause undetermined", the user would not look at the process that went away first, the
    one gloo itself says to check; told it at medium or with a culprit, they would trust a guess."""
    d = diagnose(incident(errors=[_closed(1, "all_reduce", "dist.all_reduce(t)")]), strict=True)
    assert (d.verdict, d.confidence, d.culprit_ranks, d.first.rule) == ("rank-crash", "low", [], "peer-gone")
    assert {"shape-mismatch", "rank-desync"} <= {f.class_id for f in d.alternatives}


def test_beside_a_timeout_a_closed_connection_is_only_an_alternative():
    timeout = err(2, "watchdog_timeout", "Watchdog caught collective operation timeout", t=4, seq=9, seq_kind="work")
    d = diagnose(incident(errors=[_closed(1, "send", "dist.send(t, dst=0)"), timeout]))
    (f,) = _peer(d)
    assert f.alternative_only


def test_a_peer_that_reported_it_too_is_no_culprit():
    rows = [_closed(1, "send", "dist.send(t, dst=0)"), _closed(0, "recv", "dist.recv(t, src=1)", line=2)]
    found = _peer(diagnose(incident(errors=rows)))
    assert found and all(list(f.culprit_ranks) == [] for f in found)
    assert all(f.culprit_basis.startswith("undetermined") for f in found)


def _bootstrap(r, addr, host="node1"):
    pre = f"{host}:{4100 + r}:{4107 + r} [{r}] NCCL INFO "
    return [
        pre + f"Bootstrap : Using eth0:{addr}<0>",
        pre + f"comm 0x7f3a{r:02d} rank {r} nRanks 4 nNodes 4 localRanks 1 localRank 0 MNNVL 0",
    ]


def test_a_peer_address_one_rank_has_names_that_rank(tmp_path):
    closed = "[rank0]:" + CLOSED.replace("10.0.0.1", "10.0.0.3")
    lines = [x for r in range(4) for x in _bootstrap(r, f"10.0.0.{r + 1}")] + [closed]
    (tmp_path / "job.log").write_text("\n".join(lines) + "\n")
    d = diagnose(dx.load(str(tmp_path), progress=False), strict=True)
    (f,) = [f for f in _peer(d) if f.culprit_ranks]
    assert list(f.culprit_ranks) == [2] and "Bootstrap line of node1:4102" in f.culprit_basis
    # one node's address, shared by its four ranks: the peer is that node, not a rank
    lines = [x for r in range(4) for x in _bootstrap(r, "10.0.0.3")] + [closed]
    (tmp_path / "job.log").write_text("\n".join(lines) + "\n")
    d = diagnose(dx.load(str(tmp_path), progress=False), strict=True)
    assert all(not f.culprit_ranks for f in _peer(d)) and d.culprit_ranks == []
