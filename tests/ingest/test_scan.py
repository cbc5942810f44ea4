"""The candidate scan: needles, blocks, continuation lines, chunk boundaries, accounting."""

from __future__ import annotations

import io
import random

import pytest

from denpex_nb.ingest.base import FileContext, Output
from denpex_nb.ingest.scan import NeedleMatcher, UnparsedSink, is_continuation, scan_text

from ._loader_helpers import MarkReader


def run_scan(data: bytes, *, chunk_size=1 << 20, budget=1 << 20, engine=None):
    reader = MarkReader()
    out = Output()
    sink = UnparsedSink(budget)
    matcher = NeedleMatcher(reader.needles, use_hyperscan=engine)
    sc = scan_text(
        io.BytesIO(data), [reader], FileContext(file="f.log"), out, sink, matcher=matcher, chunk_size=chunk_size
    )
    return sc, out, sink, reader


def unparsed_lines(sink):
    return [(ln, t) for ln, n, t in zip(sink.line, sink.n_lines, sink.text) for _ in range(1) if n == 1]


@pytest.mark.parametrize("engine", [None, False])
def test_needle_matcher_finds_each_candidate_line_once(engine):
    buf = b"a MARK b MARK\nplain\nMARK\nxx\nend MARK"
    m = NeedleMatcher([b"MARK", b"xx"], use_hyperscan=engine)
    assert m.line_starts(buf) == [0, 20, 25, 28]


def test_hyperscan_and_fallback_agree_on_random_text():
    pytest.importorskip("hyperscan")
    rng = random.Random(7)
    words = [b"MARK", b"Watchdog", b"noise", b"\n", b" ", b"ab", b"NCCL"]
    buf = b"".join(rng.choice(words) for _ in range(20000))
    needles = [b"MARK", b"Watchdog", b"NCCL WARN"]
    hs = NeedleMatcher(needles, use_hyperscan=True)
    py = NeedleMatcher(needles, use_hyperscan=False)
    assert hs.engine == "hyperscan" and py.engine == "bytes.find"
    assert hs.line_starts(buf) == py.line_starts(buf)


def test_only_candidate_lines_and_continuations_reach_readers():
    data = (
        b"step 1 loss=2.3\n"
        b"MARK rank=0 seq=1\n"
        b"    indented continuation\n"
        b'[rank0]:   File "x.py", line 3\n'
        b"frame #0: c10::foo\n"
        b"step 2 loss=2.2\n"
        b"MARK rank=1 seq=1\n"
    )
    sc, out, sink, reader = run_scan(data)
    assert [[ln for ln, _ in b] for b in reader.blocks] == [[2, 3, 4, 5], [7]]
    assert sc.lines_total == 7
    assert len(out.events) == 2
    # the reader consumed 2, 3, 4 (indented) and 7; "frame #0" was offered but not consumed
    assert sorted(ln for ln, n, t in zip(sink.line, sink.n_lines, sink.text)) == [1, 5, 6]
    assert sink.count == 3


def test_wrap_width_and_open_bracket_continue_a_block():
    long_line = b"MARK rank=0 seq=1 " + b"x" * (80 - 18)
    assert len(long_line) == 80
    data = long_line + b"\nwrapped tail\nMARK rank=0 seq=2 (open\nclosed)\nunrelated\n"
    _, _, _, reader = run_scan(data)
    assert [[ln for ln, _ in b] for b in reader.blocks] == [[1, 2, 3, 4]]


def test_is_continuation_rules():
    assert is_continuation(b"MARK", b"\tbody")
    assert is_continuation(b"MARK", b"[default0]:[rank0]:   File x")
    assert is_continuation(b"MARK", b"  what():  boom")
    assert is_continuation(b"MARK", b"Exception raised from checkTimeout at x")
    assert is_continuation(b"x" * 120, b"tail")
    assert is_continuation(b"f(a, [b", b"tail")
    assert not is_continuation(b"MARK", b"step 3 loss=1")
    assert not is_continuation(b"MARK", b"")
    assert not is_continuation(b"MARK", b"    ")


@pytest.mark.parametrize("chunk", [7, 16, 33, 64, 1000])
def test_blocks_across_chunk_boundaries_match_one_big_chunk(chunk):
    rng = random.Random(chunk)
    lines = []
    for i in range(300):
        r = rng.random()
        if r < 0.15:
            lines.append(f"MARK rank={i % 4} seq={i}")
        elif r < 0.3:
            lines.append("   continuation " + "y" * rng.randint(0, 30))
        else:
            lines.append(f"step {i} loss={rng.random():.3f}")
    data = ("\n".join(lines) + "\n").encode()
    big = run_scan(data)
    small = run_scan(data, chunk_size=chunk)
    assert small[0].lines_total == big[0].lines_total == 300
    assert [[ln for ln, _ in b] for b in small[3].blocks] == [[ln for ln, _ in b] for b in big[3].blocks]
    assert small[1].parsed == big[1].parsed
    assert (small[2].line, small[2].text) == (big[2].line, big[2].text)


def test_truncated_last_line_crlf_and_invalid_utf8():
    data = b"ok\r\nbad \xff\xfe bytes\r\nMARK rank=0 seq=3\r\nlast line without newline"
    sc, out, sink, _ = run_scan(data)
    assert sc.lines_total == 4
    assert out.parsed == {3}
    texts = dict(zip(sink.line, sink.text))
    assert texts[1] == "ok"
    assert texts[2] == "bad \ufffd\ufffd bytes"
    assert texts[4] == "last line without newline"


def test_empty_input_and_only_newlines():
    sc, _, sink, _ = run_scan(b"")
    assert sc.lines_total == 0 and sink.count == 0
    sc, _, sink, _ = run_scan(b"\n\n\n")
    assert sc.lines_total == 3 and sink.count == 3


def test_budget_collapses_runs_but_accounts_every_line():
    data = b"".join(b"step %d loss=1.0\n" % i for i in range(1000)) + b"MARK rank=0 seq=1\n" + b"tail\n" * 10
    sc, out, sink, _ = run_scan(data, budget=100)
    assert sc.lines_total == 1011
    assert sink.count == 1010 == sum(sink.n_lines)
    with_text = [t for t in sink.text if t is not None]
    assert with_text and sum(map(len, with_text)) <= 100
    assert max(sink.n_lines) > 900  # one collapsed run, not a row per line
    assert len(sink.line) < 20


def test_chunk_boundary_inside_a_long_line():
    data = b"a" * 5000 + b" MARK rank=2 seq=9\nnext\n"
    sc, out, sink, _ = run_scan(data, chunk_size=64)
    assert sc.lines_total == 2 and out.parsed == {1}


def test_a_failing_reader_loses_no_lines():
    class Broken(MarkReader):
        name = "broken"

        def parse(self, block, ctx, out):
            raise ValueError("bug")

    out, sink = Output(), UnparsedSink(1 << 20)
    sc = scan_text(
        io.BytesIO(b"MARK rank=0 seq=1\nx\n"), [Broken()], FileContext(file="f", options={"strict": False}), out, sink
    )
    assert sc.lines_total == 2 and sink.count == 2
    assert sc.failure_note().startswith("reader 'broken' failed at f:1: ValueError: bug")
    with pytest.raises(ValueError, match="bug"):
        scan_text(
            io.BytesIO(b"MARK rank=0 seq=1\nx\n"),
            [Broken()],
            FileContext(file="f", options={"strict": True}),
            Output(),
            UnparsedSink(1 << 20),
        )


@pytest.mark.parametrize("engine", [None, False])
def test_line_hits_say_which_readers_own_the_line(engine):
    m = NeedleMatcher([b"AAA", b"BBB", b"CCC"], groups=[(b"AAA",), (b"BBB", b"CCC"), (b"CCC",)], use_hyperscan=engine)
    starts, masks = m.line_hits(b"x AAA\nnone\nBBB and AAA\nCCC\n")
    assert starts == [0, 11, 23]
    assert masks == [0b001, 0b011, 0b110]


def test_blocks_reach_only_readers_with_a_line_in_them():
    class Other(MarkReader):
        name = "other"
        needles = (b"OTHER",)

    mark, other = MarkReader(), Other()
    out, sink = Output(), UnparsedSink(1 << 20)
    matcher = NeedleMatcher.for_readers([mark, other])
    scan_text(
        io.BytesIO(b"MARK rank=0 seq=1\nplain\nOTHER thing\n  indented\n"),
        [mark, other],
        FileContext(file="f"),
        out,
        sink,
        matcher=matcher,
    )
    assert [[ln for ln, _ in b] for b in mark.blocks] == [[1]]
    assert [[ln for ln, _ in b] for b in other.blocks] == [[3, 4]]


# --- the line cap (issue #10) ------------------------------------------------------------------------


def run_capped(data: bytes, *, cap: int, chunk_size: int = 1 << 16, budget: int = 1 << 20):
    reader = MarkReader()
    out = Output()
    sink = UnparsedSink(budget)
    sc = scan_text(
        io.BytesIO(data),
        [reader],
        FileContext(file="f.log"),
        out,
        sink,
        matcher=NeedleMatcher(reader.needles, use_hyperscan=False),
        chunk_size=chunk_size,
        line_cap=cap,
    )
    return sc, out, sink, reader


@pytest.mark.parametrize("chunk_size", [1 << 10, 1 << 12, 1 << 16])
@pytest.mark.parametrize("where", ["candidate", "plain", "last_no_newline"])
def test_a_line_past_the_cap_is_read_up_to_it_and_the_rest_counted(chunk_size, where):
    cap = 1000
    head = b"MARK rank=0 seq=1 " if where == "candidate" else b"noise "
    long = head + b"x" * 50_000
    lines = [b"MARK rank=1 seq=1", b"step", long, b"MARK rank=2 seq=2", b"tail"]
    if where == "last_no_newline":
        lines = lines[:2] + [long]
    data = b"\n".join(lines) + (b"" if where == "last_no_newline" else b"\n")
    sc, out, sink, reader = run_capped(data, cap=cap, chunk_size=chunk_size)
    assert sc.lines_total == len(lines)  # one physical line stays one line
    assert sc.overlong == [(3, len(long) - cap)]
    assert sum(sink.n_lines) == sink.count and sink.count + len(out.parsed) == sc.lines_total
    offered = [t for b in reader.blocks for n, t in b if n == 3]
    if where == "candidate":
        assert offered and all(len(t) <= cap for t in offered) and 3 in out.parsed
    else:
        kept = [t for ln, t in zip(sink.line, sink.text) if ln == 3 and t is not None]
        assert kept == [long[:cap].decode()]
    rows = sc.overlong_rows("f.log")
    assert rows["n_lines"] == [0] and rows["line"] == [3]
    assert rows["text"] == [f"line 3: {len(long) - cap} bytes past the line cap (1000 B) not read"]
    assert "DENPEX_LINE_CAP" in sc.overlong_note()


def test_a_huge_line_costs_one_pass_and_the_cap_in_memory():
    import time
    import tracemalloc

    class Stream(io.RawIOBase):  # 200 MB of one line, never held anywhere
        def __init__(self):
            self.left = 200 << 20

        def readable(self):
            return True

        def readinto(self, b):
            n = min(len(b), self.left)
            b[:n] = b"[rank1]: gloo " * (n // 14) + b"g" * (n % 14)
            self.left -= n
            return n

    tracemalloc.start()
    t = time.perf_counter()
    reader = MarkReader()
    out = Output()
    sink = UnparsedSink(1 << 20)
    sc = scan_text(
        io.BufferedReader(Stream(), 1 << 20),
        [reader],
        FileContext(file="f.log"),
        out,
        sink,
        matcher=NeedleMatcher(reader.needles, use_hyperscan=False),
        chunk_size=4 << 20,
        line_cap=1 << 20,
    )
    took = time.perf_counter() - t
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert sc.lines_total == 1 and sc.overlong == [(1, (200 << 20) - (1 << 20))]
    assert peak < 64 << 20, peak  # chunks + the cap, not the line
    assert took < 20, took


def test_many_long_lines_inside_one_chunk_are_each_capped():
    lines = [b"MARK rank=%d seq=1 " % i + b"y" * (3000 + i) for i in range(5)] + [b"plain " + b"z" * 5000]
    data = b"\n".join(lines) + b"\n"
    sc, out, sink, reader = run_capped(data, cap=2000, chunk_size=1 << 20)
    assert [ln for ln, _ in sc.overlong] == [1, 2, 3, 4, 5, 6]
    assert [x for _, x in sc.overlong] == [len(line) - 2000 for line in lines]
    assert len(out.events) == 5 and sc.lines_total == 6


def test_long_line_detector_is_exact():
    from denpex_nb.ingest.scan import _has_long_line

    rng = random.Random(3)
    for _ in range(3000):
        lines = [b"x" * rng.choice([0, 1, 5, 9, 10, 11, 30]) for _ in range(rng.randrange(1, 8))]
        buf = b"\n".join(lines) + b"\n"
        assert _has_long_line(buf, 0, len(buf), 10) == any(len(line) > 10 for line in lines), lines


@pytest.mark.parametrize("chunk_size", [1, 2, 3, 7, 64, 1 << 20])
@pytest.mark.parametrize("ending", [b"\r", b"\r\n"])
def test_lone_carriage_returns_end_lines_as_crlf_does(chunk_size, ending):
    """A log written with ``\\r`` line ends (or CRLF) reads as the same lines as with ``\\n``, at
    any chunk size: a CR at the end of one read and the LF at the start of the next are one end."""
    lines = [b"step 1", b"MARK rank=3 seq=7", b"", b"progress 10%", b"MARK rank=1 seq=8", b"tail"]
    want_sc, want_out, want_sink, _ = run_scan(b"\n".join(lines) + b"\n")
    sc, out, sink, _ = run_scan(ending.join(lines) + ending, chunk_size=chunk_size)
    assert sc.lines_total == want_sc.lines_total == 6
    assert out.parsed == want_out.parsed == {2, 5}
    assert unparsed_lines(sink) == unparsed_lines(want_sink)
    assert all("\r" not in t for t in sink.text if t)


def test_mixed_line_ends_count_each_line_once():
    data = b"a\r\nb\rc\nMARK rank=0 seq=1\r\rd"
    sc, out, sink, _ = run_scan(data, chunk_size=2)
    assert sc.lines_total == 6 and out.parsed == {4}
    assert [t for t in sink.text] == ["a", "b", "c", "", "d"]


def test_empty_lines_keep_rows_bounded_by_the_budget():
    """Each kept line costs its text plus ROW_COST: a run of empty lines cannot keep a row per line."""
    from denpex_nb.ingest.scan import ROW_COST

    sc, out, sink, _ = run_scan(b"\n" * 200_000 + b"MARK rank=0 seq=1\n" + b"\n" * 1000, budget=64 * ROW_COST)
    assert sc.lines_total == 201_001 and sink.count == 201_000 == sum(sink.n_lines)
    assert sum(1 for t in sink.text if t is not None) <= 64
    assert len(sink.line) < 70


@pytest.mark.parametrize("chunk_size", [64, 1 << 20])
def test_watched_words_are_noticed_in_unparsed_and_parsed_lines_while_reading(tmp_path, chunk_size):
    """``Incident.mentions`` names the files whose lines mention a watched word (SyncBatchNorm), found
    by the same literal search that finds the candidates: an unparsed line counts, and a line that
    holds only a watched word is not made a candidate (it stays unparsed, as before)."""
    import denpex_nb as dx

    noise = b"".join(b"step %d loss=1.0\n" % i for i in range(50))
    (tmp_path / "a.log").write_bytes(noise + b"model: converted 48 BatchNorm layers to SyncBatchNorm\n" + noise)
    (tmp_path / "b.log").write_bytes(noise)
    (tmp_path / "c.log").write_bytes(b'Traceback (most recent call last):\n  File "x.py", line 3, in sync_batch_norm\n')
    inc = dx.load(str(tmp_path), chunk_size=chunk_size)
    assert sorted(inc.mentions["syncbn"]) == [str(tmp_path / "a.log"), str(tmp_path / "c.log")]
    a = inc.unparsed[inc.unparsed["file"] == str(tmp_path / "a.log")]
    assert a["text"].str.contains("SyncBatchNorm").sum() == 1  # still kept, line for line
    assert int(inc.sources.set_index("file").loc[str(tmp_path / "a.log"), "lines_unparsed"]) == 101
    assert dx.load(str(tmp_path / "b.log")).mentions == {"syncbn": [], "distributed": []}
    # the words of a distributed job (a backend, a collective), in any line, parsed or not
    (tmp_path / "d.log").write_bytes(noise + b"> initializing torch distributed ...\n" + noise)
    (tmp_path / "e.log").write_bytes(noise + b"NCCL version 2.21.5+cuda12.4\n")
    inc = dx.load(str(tmp_path), chunk_size=chunk_size)
    assert sorted(inc.mentions["distributed"]) == [str(tmp_path / "d.log"), str(tmp_path / "e.log")]


def test_a_repeated_block_is_remembered_without_losing_its_signals(tmp_path, monkeypatch):
    """The scanner skips a block whose bytes already yielded nothing in the file (the same warning
    every few hundred steps); the result is the same as reading every repeat, signals included."""
    import glob

    import denpex_nb as dx
    from denpex_nb.ingest import scan

    logs = sorted(glob.glob("tests/data/wild/*/log.txt"))[:12]
    noise = b"".join(b"step %d loss=1.0\n" % i for i in range(20))
    for k, src in enumerate(logs):
        body = open(src, "rb").read()
        (tmp_path / f"r{k}.log").write_bytes((body + noise) * 3)
    with_memo = dx.load(str(tmp_path))
    monkeypatch.setattr(scan, "_MEMO_MAX", 0)
    without = dx.load(str(tmp_path))
    for name in ("events", "errors", "unparsed", "sources", "signals"):
        a, b = getattr(with_memo, name), getattr(without, name)
        assert a.astype(str).equals(b.astype(str)), name


@pytest.mark.parametrize("single", [False, True])
@pytest.mark.parametrize("engine", [None, False])
def test_groups_in_names_every_group_found_anywhere_in_a_buffer(engine, single):
    """:meth:`NeedleMatcher.groups_in` (the whole-buffer search for files read whole): the OR of the
    groups whose needles occur, at the start, the end or across what would be line ends, with
    hyperscan (stopping once all are found) and without it."""
    m = NeedleMatcher(
        [b"alpha", b"beta", b"gamma"],
        groups=[(b"alpha", b"beta"), (b"gamma",)],
        use_hyperscan=engine,
        single_match=single,
    )
    assert m.groups_in(b"") == 0
    assert m.groups_in(b"nothing here\n" * 100) == 0
    assert m.groups_in(b"beta" + b"\x00" * 10_000) == 1
    assert m.groups_in(b"\x00" * 10_000 + b"gamma") == 2
    assert m.groups_in(b"gamma\nalpha\ngamma alpha") == 3
    assert m.groups_in(b"alph\na gamm") == 0
    assert m.groups_in(b"beta " * 100_000 + b"gamma") == 3  # a repeated word, then the other group


@pytest.mark.parametrize(
    "layout", ["dense-from-the-start", "dense-after-the-window", "across-the-window-edge", "none", "every-subset"]
)
def test_once_reported_needles_are_found_alike_with_the_window_split(monkeypatch, layout):
    """A big search finds the once-reported needles (progress) of its first bytes apart and leaves
    them out of hyperscan's database (:meth:`NeedleMatcher._once_split`): the lines and masks are
    those of the whole database and of ``bytes.find``, whether the needles fill every line from the
    start, appear only after the window, one sits across its edge, none does, or more sets of them
    are found than databases are compiled."""
    pytest.importorskip("hyperscan")
    from denpex_nb.ingest import scan
    from denpex_nb.ingest.parse import all_text_readers

    readers = all_text_readers()
    hs = NeedleMatcher.for_readers(readers, signals=True, use_hyperscan=True)
    py = NeedleMatcher.for_readers(readers, signals=True, use_hyperscan=False)
    assert hs.once and hs.once == py.once
    rng = random.Random(layout)
    step = [b"step 7 loss=2.1 grad_norm=3.2 tokens/s=12000", b"[rank3]:it 4 LOSS 3 it/s 7 mfu 40"]
    other = [b"NCCL INFO comm 0x1 rank 3", b"[rank1]: Watchdog caught collective operation timeout", b"noise"]
    w = scan._ONCE_WINDOW
    bufs = []
    if layout == "dense-from-the-start":
        bufs.append(b"\n".join(rng.choice(step + other) for _ in range(20_000)))
    elif layout == "dense-after-the-window":
        head = b"\n".join(rng.choice(other) for _ in range(2 * w // 20))
        bufs.append(head + b"\n" + b"\n".join(rng.choice(step + other) for _ in range(20_000)))
    elif layout == "across-the-window-edge":
        for d in range(-9, 2):  # "loss" starts d bytes after the window's end: cut by it for -3..-1
            pad = b"x" * 99 + b"\n"
            head = pad * ((w + d) // 100) + b"y" * ((w + d) % 100)
            bufs.append(head + b"loss=3 step 4\n" + b"\n".join(rng.choice(step + other) for _ in range(8_000)))
    elif layout == "none":
        bufs.append(b"\n".join(rng.choice(other) for _ in range(40_000)))
    else:  # each buffer holds another set of the needles at its start
        words = [b"loss", b"Loss", b"it/s", b"mfu", b"TFLOPS", b"tokens/s", b"grad_norm", b"us bandwidth"]
        for _ in range(scan._ONCE_VARIANTS + 4):
            have = rng.sample(words, rng.randint(1, 4))
            bufs.append(b"\n".join(b"step %d " % i + rng.choice(have) + b" 3" for i in range(30_000)))
    for buf in bufs:
        buf += b"\n" + b"\n".join(rng.choice(step + other) for _ in range(100)) + b"\n"
        assert len(buf) >= scan._ONCE_SPLIT_MIN
        split = hs.line_hits(buf)
        monkeypatch.setattr(scan, "_ONCE_SPLIT_MIN", len(buf) + 1)
        whole = hs.line_hits(buf)
        monkeypatch.undo()
        assert split == whole == py.line_hits(buf)
        n = len(buf) - 50  # a search of the buffer's first bytes only
        n = buf.rfind(b"\n", 0, n) + 1
        assert hs.line_hits(buf, n) == py.line_hits(buf, n)
    assert len(hs._without) <= scan._ONCE_VARIANTS


def test_watched_words_are_noticed_in_a_dump_read_whole(tmp_path):
    """A Flight Recorder dump (a file read whole) that names SyncBatchNorm in a frame is a mention,
    one that does not is not; both decode (the search does not change what is read)."""
    import pickle

    import denpex_nb as dx

    def dump(frame_name: str) -> bytes:
        entry = {
            "record_id": 0,
            "pg_id": 0,
            "process_group": ("0", "default_pg"),
            "collective_seq_id": 1,
            "p2p_seq_id": 0,
            "profiling_name": "nccl:all_reduce",
            "state": "completed",
            "input_sizes": [[4]],
            "output_sizes": [[4]],
            "input_dtypes": ["Float"],
            "output_dtypes": ["Float"],
            "frames": [{"name": frame_name, "filename": "model.py", "line": 3}],
        }
        return pickle.dumps({"version": "2.10", "pg_config": {}, "pg_status": {}, "entries": [entry]})

    (tmp_path / "nccl_trace_rank_0").write_bytes(dump("SyncBatchNorm.forward"))
    (tmp_path / "nccl_trace_rank_1").write_bytes(dump("forward"))
    inc = dx.load(str(tmp_path))
    assert inc.mentions["syncbn"] == [str(tmp_path / "nccl_trace_rank_0")]
    assert len(inc.events) == 2


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\n\n",
        b"step 1\nMARK rank=0 seq=1\ntail",  # no newline at the end
        b"a\rMARK rank=2 seq=3\r\rb\r",  # lone CRs, one last
        b"a\r\nMARK rank=2 seq=3\r\n",
        b"MARK rank=1 seq=1\n" + b"noise " * 400 + b"\nMARK rank=2 seq=2 " + b"y" * 3000,  # lines past the cap
        b"    indented\nMARK rank=0 seq=1\n    continued\n\ttab\n",
    ],
)
def test_a_head_that_is_the_whole_file_scans_as_the_streamed_file(data):
    """A small file is read whole before the scan (``at_eof``): its lines, parsed lines, unparsed
    rows and lines past the cap are those of the same bytes streamed in small chunks. Wrongly:
    a tiny file's last line, a CR line end or a cut long line would read differently from a big file's."""

    def scan(stream, head, at_eof):
        reader = MarkReader()
        out, sink = Output(), UnparsedSink(1 << 20)
        sc = scan_text(
            stream,
            [reader],
            FileContext(file="f.log"),
            out,
            sink,
            head=head,
            at_eof=at_eof,
            matcher=NeedleMatcher(reader.needles, use_hyperscan=False),
            chunk_size=7,
            line_cap=1000,
        )
        return sc.lines_total, sc.overlong, sorted(out.parsed), out.events, unparsed_lines(sink), sink.count

    assert scan(io.BytesIO(b""), data, True) == scan(io.BytesIO(data), b"", False)
