"""Properties: random, truncated and mixed inputs never raise and always account for every line."""

from __future__ import annotations

import io
import os

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import denpex_nb as dx  # noqa: E402
from denpex_nb.errors import InputError  # noqa: E402
from denpex_nb.ingest.base import FileContext, Output  # noqa: E402
from denpex_nb.ingest.parse import all_text_readers  # noqa: E402
from denpex_nb.ingest.scan import NeedleMatcher, UnparsedSink, scan_text  # noqa: E402

FR = os.path.join(os.path.dirname(__file__), "data", "fr", "comm_lib_trace_rank_0")

# fragments of real lines (docs/formats.md) plus damage: CR, bad UTF-8, ANSI, tabs
FRAGMENTS = [
    b"[rank0]:",
    b"[default1]:",
    b"[rank1]:[E1129 22:27:23.883942729 ProcessGroupNCCL.cpp:688] ",
    b"[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE, NumelIn=8, "
    b"NumelOut=8, Timeout(ms)=600000) ran for 600071 milliseconds before timing out.",
    b"RuntimeError: Detected mismatch between collectives on ranks. Rank 1 is running collective: "
    b"CollectiveFingerPrint(SequenceNumber=0, OpType=ALLGATHER, TensorShape=[3, 4], TensorDtypes=Float",
    b"terminate called after throwing an instance of 'gloo::EnforceNotMet'",
    b"  what():  [enforce fail at /__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:456] "
    b"op.preamble.length <= op.nbytes. 40 vs 24.",
    b"Traceback (most recent call last):",
    b'  File "train.py", line 88, in <module>',
    b"tern-07:61204:61266 [0] NCCL INFO AllGather: opCount 3a sendbuff 0x7f recvbuff 0x7f count 6144 datatype 7 "
    b"op 0 root 0 comm 0x5581c0a0 [nranks=8] stream 0x55",
    b"E1129 22:27:48.169000 10045 torch/distributed/elastic/multiprocessing/api.py:1002] failed (exitcode: -6) "
    b"local_rank: 1 (pid: 10053) of binary: venv/bin/python",
    b"  exitcode  : -6 (pid: 10053)  (SIGABRT)",
    b"Root Cause (first observed failure):",
    b"step 12 loss=2.31 lr=3e-4",
    b"frame #0: c10::foo",
    b"(",
    b"[",
    b"\t",
    b" ",
    b"\r",
    b"\n",
    b"\n",
    b"\n",
    b"\xff\xfe",
    b"\x1b[31m",
    b"x" * 79,
    b"y" * 119,
]

random_log = st.lists(st.sampled_from(FRAGMENTS), max_size=60).map(b"".join)
SETTINGS = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)


def expected_lines(data: bytes) -> int:
    data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")  # a lone CR ends a line, as CRLF does
    return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)


def scan(data: bytes, chunk: int):
    readers = all_text_readers()
    out, sink = Output(), UnparsedSink(1 << 20)
    matcher = NeedleMatcher(n for r in readers for n in r.needles)
    sc = scan_text(io.BytesIO(data), readers, FileContext(file="f"), out, sink, matcher=matcher, chunk_size=chunk)
    return sc, out, sink


@SETTINGS
@given(random_log, st.integers(min_value=8, max_value=400))
def test_scan_accounts_for_every_line(data, chunk):
    sc, out, sink = scan(data, chunk)
    assert sc.lines_total == expected_lines(data)
    assert sum(sink.n_lines) == sink.count <= sc.lines_total
    unparsed = {ln for ln, n in zip(sink.line, sink.n_lines) for ln in range(ln, ln + n)}
    assert len(unparsed) == sink.count  # no line reported twice
    assert unparsed.isdisjoint(out.parsed)  # parsed and unparsed never overlap
    assert unparsed | {p for p in out.parsed if 1 <= p <= sc.lines_total} == set(range(1, sc.lines_total + 1))


@SETTINGS
@given(random_log, st.integers(min_value=8, max_value=200))
def test_chunk_size_does_not_change_the_result(data, chunk):
    big = scan(data, 1 << 20)
    small = scan(data, chunk)
    assert small[0].lines_total == big[0].lines_total
    assert small[1].parsed == big[1].parsed
    assert (small[2].line, small[2].text) == (big[2].line, big[2].text)
    assert len(small[1].events) == len(big[1].events) and len(small[1].errors) == len(big[1].errors)


def _fr_bytes():
    with open(FR, "rb") as f:
        return f.read()


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(
    st.one_of(
        random_log,
        st.binary(max_size=300),
        st.integers(min_value=0, max_value=2305).map(lambda n: _fr_bytes()[:n]),
        st.lists(
            st.sampled_from(
                [
                    b'{"v":1,"event":"issue","rank":0,"pg":"0","seq":1,"op":"all_reduce"}',
                    b'{"v":1,"event":"done","rank":0,"pg":"0","seq":1}',
                    b'{"v":1,"ev',
                    b"garbage",
                    b"\n",
                ]
            ),
            max_size=20,
        ).map(b"\n".join),
    )
)
def test_load_never_raises_on_mixed_or_truncated_input(tmp_path, data):
    f = tmp_path / "rank0_input"
    f.write_bytes(data)
    try:
        inc = dx.load(str(f), progress=False)
    except InputError as e:  # nothing loadable: a one-line, named error is the contract
        assert str(f) in str(e) and "\n" not in str(e)
        return
    s = inc.sources
    assert (s["lines_total"] == s["lines_parsed"] + s["lines_unparsed"]).all()
    if s["format"][0] == "text":
        assert int(s["lines_total"][0]) == expected_lines(data)
    assert int(inc.unparsed["n_lines"].sum()) == int(s["lines_unparsed"].sum())
