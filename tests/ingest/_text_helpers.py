"""Run a text reader on literal lines, the way the loader does: to_lines, then parse."""

from __future__ import annotations

from denpex_nb.incident import ERROR_KINDS, OPS, SEQ_KINDS, STATES, check_schema, coerce
from denpex_nb.ingest.base import FileContext, Output
from denpex_nb.ingest.prefixes import to_lines


def run(reader, text: str | list[str], *, ctx: FileContext | None = None, first_lineno: int = 1) -> Output:
    """Parse ``text`` (one string with newlines, or a list of lines) as ONE block."""
    lines = text.split("\n") if isinstance(text, str) else list(text)
    ctx = ctx or FileContext(file="t.log", year=2025)
    physical = [(first_lineno + i, t) for i, t in enumerate(lines)]
    out = Output()
    reader.parse(to_lines(physical, ctx), ctx, out)
    check_rows(out)
    return out


def check_rows(out: Output) -> None:
    """Every row uses the vocabularies and coerces to the schema."""
    for row in out.errors:
        assert row["kind"] in ERROR_KINDS, row
    for row in out.events + out.errors + out.progress:
        if row.get("seq_kind") is not None:
            assert row["seq_kind"] in SEQ_KINDS, row
        if row.get("op") is not None:
            assert row["op"] in OPS, row
    for row in out.events:
        if row.get("state") is not None:
            assert row["state"] in STATES, row
    for name in ("events", "errors", "ranks", "progress"):
        rows = getattr(out, name)
        if rows:
            assert check_schema(name, coerce(name, rows)) == []


def one(rows: list[dict], **match) -> dict:
    """The single row whose fields equal ``match``."""
    hits = [r for r in rows if all(r.get(k) == v for k, v in match.items())]
    assert len(hits) == 1, (match, rows)
    return hits[0]


FUZZ_FRAGMENTS = [
    "[rank1]:",
    "[default0]:",
    "\t",
    "[E1129 22:27:23.88 ProcessGroupNCCL.cpp:9] ",
    "Traceback (most recent call last):",
    "terminate called after throwing an instance of 'x'",
    "  what():  ",
    "h:1:2 [0] NCCL INFO ",
    "h:1:2 [0] NCCL WARN ",
    "WorkNCCL(SeqNum=",
    "OpType=",
    "CollectiveFingerPrint(",
    "Rank 1 is running collective: ",
    "(",
    ")",
    "[",
    "]",
    "  time      : ",
    "  rank      : ",
    "  exitcode  : ",
    "Root Cause (first observed failure):",
    "=" * 20,
    "RuntimeError: ",
    "comm 0x1 rank ",
    " nranks ",
    "opCount ",
    "count ",
    "datatype 99",
    "#0-0 (ab) MISMATCH",
    "Collective sequence number: ",
    "error msg: Culprit rank ",
    "missing ranks: {",
    "collective: ",
    "failed (exitcode: ",
    ") local_rank: ",
    "(pid: ",
    "\ufffd",
    "-1",
    "99999999999999999999",
    "x" * 40,
]


def fuzz(reader, examples: int = 25) -> None:
    """Random soups of the reader's own vocabulary never raise and only claim lines of the block."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    @settings(max_examples=examples, deadline=None)
    @given(
        st.lists(
            st.lists(st.sampled_from(FUZZ_FRAGMENTS) | st.text(max_size=6), max_size=7).map("".join),
            min_size=1,
            max_size=10,
        )
    )
    def check(texts):
        ctx = FileContext(file="f.log", year=2025)
        out = Output()
        reader.parse(to_lines([(i + 1, t) for i, t in enumerate(texts)], ctx), ctx, out)  # unguarded: bugs show
        assert out.parsed <= set(range(1, len(texts) + 1))
        for row in out.errors:
            assert row["kind"] in ERROR_KINDS

    check()
