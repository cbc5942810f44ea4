"""A peer that closed the connection is the suspect (issue 16, kind 5): generated variants.

The rank that stays writes ``Connection closed by peer``; the other side went away first. Its rank
is named only from the failing point-to-point call's peer argument or a group of two; beside
another failure the closed connection is only an alternative.
"""

from __future__ import annotations

import pytest

import denpex_nb as dx
from denpex_nb.analysis.peers import peer_of_call

_GLOO = {
    "closed534": "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by peer "
    "[10.0.0.{h}]:4{h}185",
    "closed598": "RuntimeError: [/opt/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:598] Connection closed by "
    "peer [172.28.0.{h}]:43185",
    "reset589": "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:589] Read error [192.168.70.{h}]:25266: "
    "Connection reset by peer",
}


def _traceback(call: str, err: str, wrap: str) -> list[str]:
    fn = call.split("(")[0].rsplit(".", 1)[-1]  # the c10d frame of the call's own collective
    return [
        wrap + "Traceback (most recent call last):",
        wrap + '  File "/srv/app/worker.py", line 304, in exchange',
        wrap + f"    {call}",
        wrap + f'  File "/usr/lib/python3/dist-packages/torch/distributed/distributed_c10d.py", line 1851, in {fn}',
        wrap + "    work.wait()",
        wrap + err,
    ]


@pytest.mark.parametrize(
    ("call", "peer"),
    [
        ("dist.send(tensor=flat.buffer, dst=0)", 0),
        ("dist.recv(input,0)", 0),
        ("torch.distributed.recv(buf, src=3)", 3),
        ("dist.isend(t, 2)", 2),
        ("dist.irecv(tensor=t, src=5, group=g)", 5),
    ],
)
@pytest.mark.parametrize("err", sorted(_GLOO))
@pytest.mark.parametrize("wrap", ["", "[rank1]:"])
def test_the_point_to_point_peer_is_named(tmp_path, call, peer, err, wrap):
    if wrap and peer == 1:
        pytest.skip("the reporter cannot be its own peer")
    p = tmp_path / "w.log"
    p.write_text("\n".join(_traceback(call, _GLOO[err].format(h=12), wrap)) + "\n")
    d = dx.diagnose(dx.load(str(p), progress=False), strict=True)
    assert d.verdict == "rank-crash" and d.culprit_ranks == [peer]
    assert "names its peer" in d.first.culprit_basis


@pytest.mark.parametrize("err", sorted(_GLOO))
@pytest.mark.parametrize("call", ["dist.broadcast(t, src=0, group=g)", "dist.all_reduce(t)", None])
def test_in_a_collective_alone_it_is_a_crash_of_the_peer_at_low_confidence(tmp_path, err, call):
    """Alone, the closed connection says the peer went away first; the other side of a collective may
    have left on a mismatch it saw (gloo's size check) or past a collective it skipped: those are the
    alternatives, no culprit is named and the confidence stays low."""
    lines = _traceback(call, _GLOO[err].format(h=9), "") if call else [_GLOO[err].format(h=9)]
    p = tmp_path / "w.log"
    p.write_text("\n".join(lines) + "\n")
    d = dx.diagnose(dx.load(str(p), progress=False), strict=True)
    assert (d.verdict, d.confidence, d.culprit_ranks) == ("rank-crash", "low", [])
    assert [a.class_id for a in d.alternatives] == ["shape-mismatch", "rank-desync"]
    assert not any(a.culprit_ranks for a in d.alternatives)


def test_beside_a_timeout_it_is_only_an_alternative(tmp_path):
    lines = _traceback("dist.recv(input,0)", _GLOO["closed598"].format(h=3), "[rank1]:") + [
        "[rank2]:RuntimeError: [../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:81] Timed out waiting "
        "1800000ms for recv operation to complete",
    ]
    p = tmp_path / "w.log"
    p.write_text("\n".join(lines) + "\n")
    d = dx.diagnose(dx.load(str(p), progress=False), strict=True)
    assert d.verdict != "rank-crash"
    assert "rank-crash" in [a.class_id for a in d.alternatives]


@pytest.mark.parametrize(
    ("op", "call", "peer"),
    [
        ("send", "dist.send(t, dst=4)", 4),
        ("recv", "dist.recv(t, 7)", 7),
        ("all_reduce", "dist.all_reduce(t, 0)", None),
        ("send", "dist.send(t)", None),
        (None, "dist.send(t, dst=1)", None),
    ],
)
def test_peer_of_call(op, call, peer):
    assert peer_of_call(op, call) == peer
