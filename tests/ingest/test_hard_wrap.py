"""Hard-wrapped copies of a log (a terminal or a collector cut every physical line at one width W;
the first piece keeps the prefix, the rest follows on unprefixed lines, cut mid-word) read like the
unwrapped log: same rows, same accounting (:mod:`denpex_nb.ingest.hardwrap`).

The closed loop: every recorded run's ``combined.log`` and per-rank logs, behind each wrapper kind
(none, kubectl, syslog, ``grep -H``, docker-compose, app logger), wrapped at 60/80/100/120/160,
gives the rows of the unwrapped view. The full sweep (64 runs x 2 sources x 6 wrappers x 5 widths)
runs with ``DENPEX_SLOW=1``; the default run takes one run per scenario.
"""

from __future__ import annotations

import io
import os
import tempfile
from pathlib import Path

import pytest

import denpex_nb as dx
from denpex_nb.ingest import hardwrap
from denpex_nb.ingest.base import FileContext, Output
from denpex_nb.ingest.parse import all_text_readers
from denpex_nb.ingest.prefixes import to_lines
from denpex_nb.ingest.scan import NeedleMatcher, UnparsedSink, scan_text
from denpex_nb.vocab import ClassId

from ..keyhole import Recipe, recorded_runs, render, write_view

PREFIX_KINDS = (None, "kubectl", "syslog", "grep", "compose", "applog")
WIDTHS = (60, 80, 100, 120, 160)

_ERR_COLS = (
    "rank",
    "kind",
    "op",
    "seq",
    "seq_kind",
    "pg",
    "related_ranks",
    "exit_code",
    "signal",
    "message",
    "exc_type",
    "n_traceback_lines",
    "collective_call",
    "call_site",
    "frames",
)
_EV_COLS = (
    "rank",
    "pg",
    "seq",
    "seq_kind",
    "op",
    "in_shapes",
    "out_shapes",
    "numel_in",
    "numel_out",
    "dtype",
    "state",
    "world_size",
)
_RANK_COLS = ("rank", "host", "pid", "local_rank", "exit_code", "signal")
_PROG_COLS = ("rank", "pg", "seq_kind", "last_enqueued", "last_started", "last_completed")


def _norm(v):
    try:
        if v is None or v != v:  # NaN / NA
            return None
    except (TypeError, ValueError):  # arrays, NA comparisons
        pass
    if hasattr(v, "tolist"):
        v = v.tolist()
    if isinstance(v, list):
        v = tuple(v)
    return repr(v) if not isinstance(v, str) else v


def _frame_rows(df, cols) -> list[tuple]:
    cols = [c for c in cols if c in df.columns]
    rows = [tuple(_norm(v) for v in r) for r in df[cols].itertuples(index=False, name=None)]
    return sorted(rows, key=repr)


def incident_rows(inc) -> dict[str, list[tuple]]:
    s = inc.sources
    assert (s["lines_total"] == s["lines_parsed"] + s["lines_unparsed"]).all(), s
    return {
        "errors": _frame_rows(inc.errors, _ERR_COLS),
        "events": _frame_rows(inc.events, _EV_COLS),
        "ranks": _frame_rows(inc.ranks, _RANK_COLS),
        "progress": _frame_rows(inc.progress, _PROG_COLS),
    }


def view_rows(run, src: str, prefix: str | None, wrap: int | None) -> dict[str, list[tuple]]:
    files = render(run, Recipe(sources=(src,), prefix=prefix, wrap=wrap))
    with tempfile.TemporaryDirectory() as d:
        write_view(files, d)
        return incident_rows(dx.load(d, progress=False, jobs=1))


def diff_rows(want: dict, got: dict) -> dict:
    out = {}
    for k in want:
        a, b = set(want[k]), set(got[k])
        if a != b or len(want[k]) != len(got[k]):
            out[k] = {
                "missing": sorted(a - b, key=repr)[:3],
                "extra": sorted(b - a, key=repr)[:3],
                "n": (len(want[k]), len(got[k])),
            }
    return out


def _one_run_per_scenario() -> list[Path]:
    seen, out = set(), []
    for r in recorded_runs():
        key = (r.parent.parent.name, r.parent.name, r.name.split("-")[0])  # backend, scenario, broken/fixed
        if key not in seen:
            seen.add(key)
            out.append(r)
    return out


_RUNS = recorded_runs() if os.environ.get("DENPEX_SLOW") else _one_run_per_scenario()


@pytest.mark.parametrize("src", ["combined", "perrank"])
@pytest.mark.parametrize("prefix", PREFIX_KINDS, ids=lambda p: p or "none")
@pytest.mark.parametrize("run", _RUNS, ids=lambda r: f"{r.parent.name}/{r.name}")
def test_wrapped_views_give_the_rows_of_the_unwrapped_view(run, prefix, src):
    want = view_rows(run, src, prefix, None)
    widths = WIDTHS if os.environ.get("DENPEX_SLOW") else (60, 80, 120)
    for w in widths:
        got = view_rows(run, src, prefix, w)
        assert not diff_rows(want, got), (w, diff_rows(want, got))


# --- the width ------------------------------------------------------------------------------------


def _wrap(lines: list[str], w: int) -> list[str]:
    return [ln[i : i + w] for ln in lines for i in range(0, max(len(ln), 1), w)]


TRACEBACK = [
    "[rank1]: Traceback (most recent call last):",
    '[rank1]:   File "/work/train.py", line 77, in main',
    "[rank1]:     body(rank, world_size, ctx)",
    '[rank1]:   File "/usr/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py", line 4280, '
    "in all_gather",
    "[rank1]:     work = default_pg.allgather([tensor_list], [tensor])",
    "[rank1]: RuntimeError: Expected to have finished reduction in the prior iteration before starting a new one. "
    "This error indicates that your module has parameters that were not used in producing loss.",
]


def _blob(lines: list[str]) -> bytes:
    return ("\n".join(lines) + "\n").encode()


@pytest.mark.parametrize("w", [60, 64, 80, 97, 120])
def test_the_width_is_found(w):
    lines = [f"2024-05-01T12:00:00.{i:09d}Z {t}" for i, t in enumerate(TRACEBACK * 3)]
    assert hardwrap.detect_width(_blob(_wrap(lines, w))) == w


def test_no_width_in_an_unwrapped_log():
    lines = [f"2024-05-01T12:00:00.{i:09d}Z {t}" for i, t in enumerate(TRACEBACK * 3)]
    assert hardwrap.detect_width(_blob(lines)) is None
    # many lines of one length, but longer ones too: no wrap
    fixed = [f"step {i:05d} rank 1 loss=2.3600 grad_sum=0.4800 lr=0.000300 tokens/s=12345" for i in range(50)]
    assert hardwrap.detect_width(_blob(fixed + TRACEBACK)) is None
    assert hardwrap.detect_width(b"") is None and hardwrap.detect_width(b"x" * 100) is None


@pytest.mark.parametrize("prefix", ["[rank{r}]:", "[default{r}]:", "2024-05-01T12:00:00.{r:09d}Z [rank{r}]:"])
@pytest.mark.parametrize("n", [2, 5, 12])
def test_the_longest_prefixed_lines_of_one_length_with_one_bare_line_after_are_no_wrap(prefix, n):
    """A prefixed file whose longest lines share one length (DETAIL fingerprints of one collective,
    one per step) and one unprefixed line after one of them (a bare OOM line): no wrap at that
    length (a wrap cuts every longer line, so most lines at the width would be followed by a tail)."""
    fp = (
        "[I1130 00:49:41.186118291 ProcessGroupWrapper.cpp:710] [Rank {r}] Running collective: "
        "CollectiveFingerPrint(SequenceNumber=1{k}, OpType=ALLREDUCE, TensorShape=[[16]], TensorDtypes=Float)"
    )
    lines = []
    for k in range(n):
        for r in range(2):
            lines.append(prefix.format(r=r) + fp.format(r=r, k=k))
            lines.append(prefix.format(r=r) + f"step {k} loss 2.3")
    assert len({len(t) for t in lines if "Running" in t}) <= 2  # one length per rank prefix width
    bare = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."
    assert hardwrap.detect_width(_blob(lines[:1] + [bare] + lines[1:])) is None
    # the same file really wrapped at a width below its longest line is still found
    assert hardwrap.detect_width(_blob(_wrap(lines, 80))) == 80


def test_short_lines_only_are_no_wrap():
    assert hardwrap.detect_width(_blob(["[rank0]: step 1 loss=2.3"] * 100)) is None


# --- logical lines --------------------------------------------------------------------------------


def _lines(texts: list[str], width: int | None):
    ctx = FileContext(file="t.log", options={"wrap_width": width})
    return to_lines(list(enumerate(texts, start=1)), ctx)


@pytest.mark.parametrize(
    "prefix",
    [
        "",
        "2024-05-01T12:00:00.479500055Z ",
        "May  1 12:00:03 node1 python[3871]: ",
        "rank1.log:",
        "worker-1  | ",
        "[default1]:",
    ],
)
@pytest.mark.parametrize("w", [60, 80, 120])
def test_to_lines_joins_the_pieces_of_each_line(prefix, w):
    logical = [prefix + t for t in TRACEBACK]
    physical = _wrap(logical, w)
    lines = _lines(physical, w)
    assert [ln.text for ln in lines] == [
        t[len("[rank1]: ") :] if t.startswith("[rank1]: ") else t[len("[rank1]:") :] for t in TRACEBACK
    ]
    assert all(ln.rank == 1 for ln in lines)
    assert sum(ln.n_lines for ln in lines) == len(physical)
    starts = [1 + sum(len(_wrap([t], w)) for t in logical[:k]) for k in range(len(logical))]
    assert [ln.lineno for ln in lines] == starts


def test_a_line_of_exactly_the_width_followed_by_a_prefixed_line_stays_apart():
    a = "[rank1]: " + "x" * 71  # 80 characters
    lines = _lines([a, "[rank1]: next line", "[rank1]: " + "y" * 71, "[rank0]: other rank"], 80)
    assert [ln.n_lines for ln in lines] == [1, 1, 1, 1]


def test_without_a_width_nothing_new_is_joined():
    a = "2024-05-01T12:00:00.479500055Z [rank1]: " + "x" * 40  # 80 characters
    lines = _lines([a, "tail without prefix"], None)
    assert [ln.n_lines for ln in lines] == [1, 1]
    assert [ln.n_lines for ln in _lines([a, "tail without prefix"], 80)] == [2]


def test_unprefixed_cpp_lines_after_a_rank_line_are_no_tail():
    a = "[rank1]: " + "x" * 71
    lines = _lines(
        [
            a,
            "terminate called after throwing an instance of 'gloo::EnforceNotMet'",
            "  what():  [enforce fail at pair.cc:456] op.preamble.length <= op.nbytes. 40 vs 24.",
        ],
        80,
    )
    assert [ln.n_lines for ln in lines] == [1, 1, 1]


def test_width_minus_one_with_a_trailing_space():
    a = "May  1 12:00:06 node1 python[3871]: [rank1]: making sure all `forward` function "  # 79 + space? 80
    a79 = a[:78] + " "
    lines = _lines([a79, "outputs participate in calculating loss."], 80)
    assert len(lines) == 1 and lines[0].text.endswith("calculating loss.")


def test_merged_ranks_inside_a_wrapped_line_keep_their_physical_lines():
    logical = "[rank0]: first rank says hello world and some more words[rank1]: RuntimeError: second rank failed here"
    physical = _wrap([logical, "[rank0]: done"], 60)
    lines = _lines(physical, 60)
    assert [ln.rank for ln in lines] == [0, 1, 0]
    covered = set()
    for ln in lines:
        covered |= set(ln.linenos)
    assert covered == set(range(1, len(physical) + 1))


# --- the loader -----------------------------------------------------------------------------------


def _scan(data: bytes, chunk: int = 1 << 20, options: dict | None = None):
    readers = all_text_readers()
    out, sink = Output(), UnparsedSink(1 << 20)
    sc = scan_text(
        io.BytesIO(data),
        readers,
        FileContext(file="f", options=dict(options or {})),
        out,
        sink,
        matcher=NeedleMatcher.for_readers(readers),
        chunk_size=chunk,
    )
    return sc, out, sink


def test_a_needle_cut_by_the_wrap_is_found_and_the_block_starts_at_the_head():
    # "Traceback (most recent call l" / "ast):" and "RuntimeError" cut in two: still one traceback
    lines = [f"2024-05-01T12:00:00.{i:09d}Z {t}" for i, t in enumerate(["step 1 loss=2.0"] * 5 + TRACEBACK)]
    data = _blob(_wrap(lines, 72))
    sc, out, sink = _scan(data)
    exc = [e for e in out.errors if e["kind"] == "exception"]
    assert len(exc) == 1 and exc[0]["message"].startswith("RuntimeError: Expected to have finished reduction"), exc
    assert exc[0]["rank"] == 1 and exc[0]["op"] == "all_gather"
    assert sc.lines_total == len(
        out.parsed | set(ln for s, n in zip(sink.line, sink.n_lines) for ln in range(s, s + n))
    )


@pytest.mark.parametrize("chunk", [64, 200, 1000, 1 << 20])
def test_chunk_size_does_not_change_a_wrapped_file(chunk):
    lines = [
        f"May  1 12:00:03 node1 python[{i}]: {t}" for i, t in enumerate((["step 1 loss=2.0 " * 3] * 7 + TRACEBACK) * 4)
    ]
    data = _blob(_wrap(lines, 80))
    big = _scan(data)
    small = _scan(data, chunk)
    assert small[0].lines_total == big[0].lines_total
    assert small[1].parsed == big[1].parsed
    assert [(e["kind"], e["message"]) for e in small[1].errors] == [(e["kind"], e["message"]) for e in big[1].errors]
    assert {e["kind"] for e in big[1].errors} == {"exception", "ddp_unused_parameters"}
    heads = [i for i, t in enumerate(data.decode().split("\n"), start=1) if "[rank1]" in t]
    assert set(heads) <= big[1].parsed and len(big[1].parsed) > len(heads)  # heads and their tails


def test_wrap_width_option_forces_or_disables():
    lines = ["[rank1]: " + t for t in ["x" * 90, "RuntimeError: boom " + "y" * 80]]
    data = _blob(_wrap(lines, 70))
    _, out, _ = _scan(data, options={"wrap_width": 0})
    assert not [e for e in out.errors if e["message"] == "RuntimeError: boom " + "y" * 80]
    _, out, _ = _scan(data, options={"wrap_width": 70})
    assert [e for e in out.errors if e["message"] == "RuntimeError: boom " + "y" * 80]


# --- the views the keyhole bench found misread -----------------------------------------------------

_GLOO = Path(__file__).resolve().parents[2] / "data" / "recorded" / "gloo"


def _errors(run: str, recipe: str):
    with tempfile.TemporaryDirectory() as d:
        write_view(render(_GLOO / run, Recipe.parse(recipe)), d)
        inc = dx.load(d, progress=False, jobs=1)
        s = inc.sources
        assert (s["lines_total"] == s["lines_parsed"] + s["lines_unparsed"]).all()
        return inc.errors


def test_syslog_wrapped_ddp_reducer_error_is_read_whole():
    e = _errors("ddp-unused-parameters/broken-plain-w2", "src=perrank;prefix=syslog;wrap=80")
    ddp = e[e["kind"] == "ddp_unused_parameters"]
    assert list(ddp["rank"]) == [1]
    exc = e[(e["kind"] == "exception") & (e["rank"] == 1)]
    assert exc["message"].iloc[0].startswith("RuntimeError: Expected to have finished reduction in the prior iteration")
    assert exc["frames"].iloc[0].count("\n") >= 5


@pytest.mark.parametrize(
    "run",
    ["allgather-shape-mismatch/broken-detail-w2", "op-mismatch/broken-detail-w2", "dtype-mismatch/broken-detail-w2"],
)
def test_kubectl_wrapped_detail_mismatch_is_read_whole(run):
    e = _errors(run, "src=combined;prefix=kubectl;wrap=80")
    dm = e[e["kind"] == "detail_mismatch"]
    assert sorted(dm["rank"]) == [0, 1] and all(r == (0, 1) for r in dm["related_ranks"])
    exc = e[e["kind"] == "exception"]
    assert all(m.startswith("RuntimeError: Detected mismatch between collectives on ranks.") for m in exc["message"])
    assert exc["op"].notna().all() and exc["frames"].notna().all()


def test_app_logger_around_torchrun_prefix_reads_the_traceback():
    e = _errors("rank-crash/broken-plain-w2", "src=perrank;ranks=1;prefix=applog")
    exc = e[e["kind"] == "exception"]
    assert list(exc["message"]) == ["ValueError: corrupt sample in batch 3 on rank 1: expected 16 features, got 15"]
    assert list(exc["rank"]) == [1]


@pytest.mark.parametrize(
    "run,recipe",
    [
        ("ddp-unused-parameters/broken-plain-w2", "src=perrank;prefix=syslog;wrap=80"),
        ("allgather-shape-mismatch/broken-detail-w2", "src=combined;prefix=kubectl;wrap=80"),
        ("op-mismatch/broken-detail-w2", "src=combined;prefix=kubectl;wrap=80"),
        ("dtype-mismatch/broken-detail-w2", "src=combined;prefix=kubectl;wrap=80"),
        ("rank-crash/broken-plain-w2", "src=perrank;ranks=1;prefix=applog"),
    ],
)
def test_the_views_are_judged_right(run, recipe):
    from ..keyhole import check_view

    _, d, j = check_view(_GLOO / run, recipe)
    assert j.ok, (d.summary(), j)


def test_the_small_sample_shortcut_gives_the_width_numpy_gives(monkeypatch):
    """A small ASCII sample is first looked at in plain Python (a tiny file pays no numpy set-up);
    the width must be the one the numpy count alone gives, on samples made to sit on every edge:
    lengths around 60 and 1024, common and uncommon widths seen once or twice, CRLF ends, a last
    line without a newline, more than eight longer lines, real wraps."""
    import random

    rng = random.Random(17)
    samples = [b"", b"x" * 70, b"x" * 70 + b"\n", (b"x" * 80 + b"\n") * 2, (b"x" * 80 + b"\r\n") * 2]
    for _ in range(600):
        lines = []
        for _ in range(rng.choice((2, 3, 5, 12, 40))):
            n = rng.choice((0, 5, 59, 60, 61, 79, 80, 81, 100, 120, 137, 160, 200, 1023, 1024, 1025, 1500))
            line = "".join(rng.choice("ab c:[]0") for _ in range(n))
            if rng.random() < 0.2 and line:
                line = line[:-1] + "\r"
            lines.append(line)
        text = "\n".join(lines) + ("\n" if rng.random() < 0.8 else "")
        samples.append(text.encode())
    wrapped = "\n".join(textwrap_cut("[rank3]: " + "word " * 90, w) for w in (80, 100, 137))
    samples.append((wrapped + "\n").encode())
    fast = [hardwrap.detect_width(s) for s in samples]
    monkeypatch.setattr(hardwrap, "_SMALL_SAMPLE", -1)  # the numpy count alone
    slow = [hardwrap.detect_width(s) for s in samples]
    assert fast == slow
    assert any(w is not None for w in slow)  # the samples reach the widths, not only None


def textwrap_cut(line: str, w: int) -> str:
    """``line`` cut every ``w`` characters, as a terminal wraps it."""
    return "\n".join(line[i : i + w] for i in range(0, len(line), w))


_SAME_LENGTH_WARNINGS = (
    "Warning: WARNING: destroy_process_group() was not called before program exit, which can leak resources. "
    "For more info, please see https://pytorch.org/docs/stable/distributed.html#shutdown (function operator())",
    "Warning: TORCH_NCCL_AVOID_RECORD_STREAMS is the default now, this environment variable is thus deprecated. "
    "(function operator())",
    "UserWarning: Grad strides do not match bucket view strides. This may indicate grad was not created according "
    "to the gradient layout contract, or that the param's strides changed since DDP was constructed.",
)
_SHORT_LINES = (
    "gpu-a100-03: [PG ID 0 PG GUID 0(default_pg) Rank 4] Timeout at NCCL work: 742, last enqueued NCCL work: 742.",
    "node-7: RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled system error",
    "Traceback (most recent call last):",
)


@pytest.mark.parametrize("warning", _SAME_LENGTH_WARNINGS)
@pytest.mark.parametrize("short", _SHORT_LINES)
@pytest.mark.parametrize("ranks", [2, 3, 8])
def test_one_warning_printed_by_several_ranks_at_one_length_is_no_wrap(warning, short, ranks):
    """Several ranks print one warning at one length (same format, same-width timestamps): those are the
    longest lines of the file at one uncommon width, but nothing was cut. A short line after one of them
    (another host's failure, a traceback's head) is its own line, never that warning's wrapped tail; at a
    width no terminal is known for a wrap needs two cut lines. (A false all-clear came of it: a failure
    line glued onto the benign warning before it was excused with it.)"""
    lines = [f"[rank{r}]:[W730 15:32:1{r % 10}.841273251 ProcessGroupNCCL.cpp:1479] {warning}" for r in range(ranks)]
    assert len({len(x) for x in lines}) == 1 and len(lines[0]) not in hardwrap.COMMON_WIDTHS
    lines.insert(1, short)
    sample = ("\n".join(lines) + "\n").encode()
    assert hardwrap.detect_width(sample) is None
    # the same file really wrapped at that width (two long lines cut) is still found
    w = len(lines[0]) - 7
    wrapped = []
    for x in lines:
        while len(x) > w:
            wrapped.append(x[:w])
            x = x[w:]
        wrapped.append(x)
    assert hardwrap.detect_width(("\n".join(wrapped) + "\n").encode()) == w


def test_a_failure_line_after_a_same_length_warning_is_read_not_excused(tmp_path):
    """The whole path: two ranks' same-length destroy_process_group() warnings with a pdsh-prefixed
    watchdog timeout between them is a failure, never ``no-failure``."""
    warning = _SAME_LENGTH_WARNINGS[0]
    lines = [f"[rank{r}]:[W730 15:32:1{r}.841273251 ProcessGroupNCCL.cpp:1479] {warning}" for r in range(2)]
    lines.insert(1, _SHORT_LINES[0])
    p = tmp_path / "log.txt"
    p.write_text("\n".join(lines) + "\n")
    d = dx.diagnose(dx.load(str(p), progress=False))
    assert d.verdict == ClassId.TIMEOUT_UNDETERMINED, d.summary()


#: records of a library's or logger's own, a name then a level, that a multi-rank log interleaves with
#: prefixed lines (ROCm's MIOpen and rocBLAS, a Python logger)
_RECORD_HEADERS = (
    "MIOpen(HIP): Warning [IsEnoughWorkspace] [EvaluateInvokers] Solver <GemmFwdRest>, workspace required: 4853760",
    "rocBLAS: Warning: no tuned solution for this size, falling back",
    "torch._dynamo.convert_frame: WARNING torch._dynamo hit config.cache_size_limit (8)",
    "py.warnings: Error while closing the file handle",
)


@pytest.mark.parametrize("header", _RECORD_HEADERS)
@pytest.mark.parametrize("width", sorted(w for w in hardwrap.COMMON_WIDTHS if w >= 100))  # the line is 100 long
def test_a_failure_line_at_a_wrap_width_keeps_its_words_before_a_record_header(tmp_path, width, header):
    """A rank's failure line that happens to be exactly a common wrap width, followed by another
    library's record (``name: Level ...``), is no hard wrap: the record is its own line, and the
    failure line keeps its last word (glued verbatim, ``... interface foundMIOpen(HIP)`` read as no
    failure: a false all-clear the signal grammar found). A real wrapped tail still joins."""
    head = "[rank4]:worker-2:2038228:1698516 [4] bootstrap.cc:77 NCCL WARN Bootstrap : no socket interface found"
    failure = head[:8] + "x" * (width - len(head)) + head[8:]
    assert len(failure) == width
    assert [ln.n_lines for ln in _lines([failure, header], None)] == [1, 1]
    assert [ln.n_lines for ln in _lines([failure, "und the rest of the cut line"], None)] == [2]
    p = tmp_path / "log.txt"
    p.write_text("\n".join([header, failure, header]) + "\n")
    d = dx.diagnose(dx.load(str(p), progress=False), strict=True)
    assert d.verdict == ClassId.NCCL_ERROR, (d.verdict, d.notes)
