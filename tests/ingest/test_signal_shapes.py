"""The scanner's bulk paths read a log as the line-by-line paths do.

The shape filter of the signal layer (``scan._signalling``) skips exactly the lines that
``signals.classify`` gives no signal (same answer as classifying every line where it is), and
needle matches put on their lines in bulk (``scan._lines_of``) land where the per-match loop puts them.

Why a test of its own: the filter reads bytes (numpy digit runs, CRLF, a cut at what ``classify``
reads) where ``classify`` reads decoded text; any line on which the two could differ must be kept
for the exact path, never skipped.
"""

from __future__ import annotations

import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import denpex_nb as dx
from denpex_nb import signals as sg
from denpex_nb.ingest import scan
from tests.signal_variants import BENIGN, PHRASES

NOISE = [
    "2026-12-01 22:{m:02d}:{s:02d},{ms:03d} - WARNING - trainer - gradient overflow, skipping step {n}",
    "W1201 22:{m:02d}:{s:02d}.{ms:06d} {n} ProcessGroupNCCL.cpp:{n}] timeout={n} set",
    "step {n} loss 2.{ms} exit code {d}",
    "Signal {d} received, errors: {d}",
    "{d} errors, {n} failures in epoch {d}",
]


def _line(rng: random.Random) -> str:
    k = rng.random()
    if k < 0.5:
        t = rng.choice(NOISE)
    elif k < 0.8:
        t = rng.choice([p for _, p, _ in PHRASES] + list(BENIGN)).replace("{", "{{").replace("}", "}}")
    else:
        t = "".join(
            rng.choice("ab Ee0123456789:=-_rorfailEXCEPTIONWARN\u00e9\u0663") for _ in range(rng.randint(0, 60))
        )
        t = t.replace("{", "{{").replace("}", "}}")
    text = t.format(
        m=rng.randrange(60),
        s=rng.randrange(60),
        ms=rng.randrange(10**6),
        n=rng.choice([0, 1, 7, 12, 123456]),
        d=rng.choice([0, 1, 2, 9]),
    )
    if rng.random() < 0.05:
        text = text + "x" * rng.choice([700, 790, 799, 800, 801, 900])  # around the shape's cut
        if rng.random() < 0.5:
            text += " 1234 error"
    return text


def _exact(buf: bytes, at: list[int], line_cap: int) -> list[int]:
    """Every line classified where it is, as the scanner's gap path reads it."""
    out = []
    for s in at:
        e = buf.find(b"\n", s)
        text = buf[s : min(e, s + line_cap)].decode("utf-8", "replace").rstrip("\r")
        if sg.classify(text) is not None:
            out.append(s)
    return out


def _check(lines: list[str], crlf: bool, line_cap: int) -> None:
    end = "\r\n" if crlf else "\n"
    buf = "".join(t + end for t in lines).encode()
    at, pos = [], 0
    for t in lines:
        at.append(pos)
        pos += len((t + end).encode())
    got = scan._signalling(bytearray(buf), at, len(buf), line_cap)
    # the filter may keep a line the exact path skips only when it keeps every line (it gave up)
    assert got == _exact(buf, at, line_cap) or got == at
    assert set(_exact(buf, at, line_cap)) <= set(got)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10**6), crlf=st.booleans(), line_cap=st.sampled_from([1 << 20, 900, 800, 799, 40]))
def test_the_bulk_filter_keeps_exactly_the_lines_that_signal(seed, crlf, line_cap):
    rng = random.Random(seed)
    lines = [_line(rng) for _ in range(rng.randint(scan._SHAPES_MIN, 400))]
    ascii_lines = [t for t in lines if t.isascii()]
    _check(ascii_lines + ["x"] * scan._SHAPES_MIN, crlf, line_cap)  # the bulk path itself
    _check(lines, crlf, line_cap)  # with non-ASCII lines too (the filter may give up)


def test_the_bulk_filter_runs_on_an_ascii_chunk_and_skips_noise():
    noise = [NOISE[0].format(m=1, s=2, ms=3, n=n) for n in range(500)]
    buf = ("\n".join(noise) + "\n").encode()
    at = [0] + [m + 1 for m in range(len(buf) - 1) if buf[m] == 10]
    assert scan._signalling(bytearray(buf), at, len(buf), 1 << 20) == []  # noise only: nothing to classify
    hot = noise + ["RuntimeError: NCCL communicator was aborted on rank 3"]
    buf = ("\n".join(hot) + "\n").encode()
    at = [0] + [m + 1 for m in range(len(buf) - 1) if buf[m] == 10]
    assert scan._signalling(bytearray(buf), at, len(buf), 1 << 20) == [at[-1]]


def test_a_log_of_noise_and_one_failure_gives_the_same_signals_either_way(tmp_path, monkeypatch):
    rng = random.Random(5)
    lines = [NOISE[0].format(m=rng.randrange(60), s=1, ms=2, n=rng.randrange(10**4)) for _ in range(3000)]
    lines[1700] = "2026-12-01 22:10:00,000 - ERROR - trainer - RuntimeError: NCCL error: unhandled system error"
    p = tmp_path / "rank0.log"
    p.write_text("\n".join(lines) + "\n")
    bulk = dx.load(str(p), progress=False).signals
    monkeypatch.setattr(scan, "_SHAPES_MIN", 10**9)  # every line classified where it is
    exact = dx.load(str(p), progress=False).signals
    assert len(bulk) == len(exact) >= 1
    assert bulk.astype(str).equals(exact.astype(str))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10**6), tail=st.booleans())
def test_matches_put_on_their_lines_in_bulk_as_one_by_one(seed, tail):
    """``line_hits`` with the newline index (numpy) gives the lines and masks of the per-match loop."""
    from denpex_nb.ingest.parse import all_text_readers

    rng = random.Random(seed)
    m = scan.matcher_for(all_text_readers(), signals=True)
    lines = [_line(rng) for _ in range(rng.randint(300, 900))]
    buf = bytearray(("\n".join(lines) + ("" if tail else "\n")).encode())
    one_by_one = m.line_hits(buf, len(buf))
    nl = scan.Newlines(buf, len(buf))
    assert m.line_hits(buf, len(buf), newlines=nl) == one_by_one
    if len(one_by_one[0]) >= scan._BULK_HITS:
        assert nl.known is not None  # the bulk path ran


def test_a_log_reads_the_same_with_the_bulk_paths_or_without(tmp_path, monkeypatch):
    rng = random.Random(11)
    lines = [_line(rng) for _ in range(4000)]
    lines[2500] = (
        "[rank3]:[E1129 22:27:23.883942729 ProcessGroupNCCL.cpp:688] [Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE, NumelIn=8, NumelOut=8, Timeout(ms)=600000) ran for 600071 milliseconds before timing out."
    )
    lines[900] = "model = torch.nn.SyncBatchNorm.convert_sync_batchnorm(model)"  # a watched word (mentions)
    p = tmp_path / "rank3.log"
    p.write_text("\n".join(lines) + "\n")
    bulk = dx.load(str(p), progress=False)
    monkeypatch.setattr(scan, "_SHAPES_MIN", 10**9)
    monkeypatch.setattr(scan, "_BULK_HITS", 10**9)
    exact = dx.load(str(p), progress=False)
    for name in ("signals", "events", "errors", "unparsed"):
        a, b = getattr(bulk, name), getattr(exact, name)
        assert a.astype(str).equals(b.astype(str)), name
    assert bulk.lines.unparsed == exact.lines.unparsed
    assert bulk.mentions == exact.mentions and bulk.mentions
