"""The decisions of rule ``peer-gone`` (analysis/peers.py), pinned on small inputs.

Decisions of rule ``peer-gone``:

- a closed connection in a point-to-point call that names its peer (``dst=0``) is a rank crash of
  that peer, by statement, and the verdict (test_a_send_naming_its_peer_names_the_peer).
- in a collective, or a call the evidence does not show, the other side may have aborted on a
  mismatch it detected: only an alternative, never the verdict
  (test_in_a_collective_a_closed_connection_is_only_an_alternative).
- beside another collective failure (a timeout) it is only an alternative
  (test_beside_a_timeout_a_closed_connection_is_only_an_alternative).
- a peer that reported the error itself, or several peers, name no culprit
  (test_a_peer_that_reported_it_too_is_no_culprit).
"""

from __future__ import annotations

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


def test_in_a_collective_a_closed_connection_is_only_an_alternative():
    d = diagnose(incident(errors=[_closed(1, "all_reduce", "dist.all_reduce(t)")]))
    (f,) = _peer(d)
    assert f.alternative_only and d.first is not f


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
