"""Reader invariants as properties (issue #15): every status/snapshot word maps to its state, and a
date without a year takes the year that puts it closest before the file's time.

Generated inputs include the hostile shapes the fuzzers found: rank numbers up to 2**31 - 1 and
counters past 2**53 (up to 2**63 - 1), which must come through exactly, not rounded through float.
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta, timezone

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from denpex_nb.ingest.base import FileContext  # noqa: E402
from denpex_nb.ingest.c10d import C10dReader  # noqa: E402
from denpex_nb.ingest.frtrace_text import FrTraceTextReader  # noqa: E402
from denpex_nb.ingest.prefixes import parse_header  # noqa: E402

from ._text_helpers import run  # noqa: E402

#: ``DENPEX_PROPERTY_EXAMPLES=N`` multiplies the examples for a deeper run (fixed examples either way)
SETTINGS = settings(
    max_examples=30 * max(1, int(os.environ.get("DENPEX_PROPERTY_EXAMPLES", "1") or 1)),
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
C10D = C10dReader()
FRTEXT = FrTraceTextReader()
#: the desync report's snapshot words and the state each one means
SNAPSHOT_WORDS = {"started": "started", "finished": "completed"}
OPS = {
    "ALLREDUCE": "all_reduce",
    "ALLGATHER": "all_gather",
    "BROADCAST": "broadcast",
    "_REDUCE_SCATTER_BASE": "reduce_scatter_tensor",
}
ranks = st.lists(st.one_of(st.integers(0, 1023), st.just(2**31 - 1)), min_size=1, max_size=6, unique=True)
counters = st.one_of(st.integers(0, 10**6), st.integers(2**53 - 2, 2**53 + 2), st.just(2**63 - 1))


def _snapshot(seq: int, rows: list[tuple[str, list[int], str]]) -> list[str]:
    """A desync report whose snapshot lists ``(word, ranks, OP)`` rows under ``#seq``."""
    block = [
        "[rank0]:[E1130 00:30:15.551002317 ProcessGroupNCCL.cpp:1380] [PG ID 0 PG GUID 0(default_pg) Rank 0] Rank 0",
        f"\t - [0] Timeout at collective: ALLREDUCE, #{seq}",
        "\t - Snapshot of ranks' latest states:",
    ]
    for word in sorted({w for w, _, _ in rows}):
        block.append(f"\t   #{seq} {word} ranks:")
        block += [f"\t     [{', '.join(map(str, rs))}] {w} {op}" for w, rs, op in rows if w == word]
    return block


def test_every_desync_snapshot_word_maps_to_its_state():
    """A rank the snapshot lists as 'finished' completed the collective; 'started' ranks did not."""
    out = run(C10D, _snapshot(2417, [("started", [0, 1], "ALLGATHER"), ("finished", [2, 3], "ALLGATHER")]), ctx=None)
    states = {e["rank"]: e["state"] for e in out.events if e["seq_kind"] == "desync" and e["state"] != "timed_out"}
    assert states == {0: "started", 1: "started", 2: "completed", 3: "completed"}


@SETTINGS
@given(
    seq=counters,
    rows=st.lists(
        st.tuples(st.sampled_from(sorted(SNAPSHOT_WORDS)), ranks, st.sampled_from(sorted(OPS))), min_size=1, max_size=4
    ),
)
def test_snapshot_rows_keep_their_word_rank_and_counter(seq, rows):
    """Every rank of a snapshot row becomes one desync event at the snapshot's seq, in the state its
    word names and with its op, whatever the rank number or counter size."""
    out = run(C10D, _snapshot(seq, rows), ctx=None)
    got = {
        (e["rank"], e["state"], e["op"], e["seq"])
        for e in out.events
        if e["seq_kind"] == "desync" and e["state"] != "timed_out"
    }
    want = {(r, SNAPSHOT_WORDS[w], OPS[op], seq) for w, rs, op in rows for r in rs}
    assert got == want


@SETTINGS
@given(s=counters, e=counters, c=counters, rank=st.one_of(st.integers(0, 1023), st.just(2**31 - 1)))
def test_a_watchdog_status_line_keeps_its_three_counters(s, e, c, rank):
    """'Timeout at NCCL work: S, last enqueued NCCL work: E, last completed NCCL work: C' gives one
    progress row (E enqueued, C completed) and one watchdog_status error at S, exactly."""
    line = (
        f"[rank{rank}]:[E1130 00:30:15.551002317 ProcessGroupNCCL.cpp:1380] [PG ID 0 PG GUID 0(default_pg) Rank "
        f"{rank}] Timeout at NCCL work: {s}, last enqueued NCCL work: {e}, last completed NCCL work: {c}."
    )
    out = run(C10D, [line], ctx=None)
    (p,) = out.progress
    assert (p["rank"], p["last_enqueued"], p["last_completed"], p["seq_kind"]) == (rank, e, c, "work")
    (err,) = [x for x in out.errors if x["kind"] == "watchdog_status"]
    assert (err["rank"], err["seq"]) == (rank, s)


@SETTINGS
@given(word=st.one_of(st.sampled_from(["scheduled", "started", "completed"]), st.text("abcdefgz_", max_size=10)))
def test_a_flight_recorder_report_state_word_is_kept_only_when_it_is_a_state(word):
    """torchfrtrace's 'collective state: W' is the culprit event's state when W is one of scheduled,
    started, completed, and unknown (None) otherwise."""
    block = [
        "Collective sequence number: 3 has errors",
        "collective: gloo:all_reduce",
        "input sizes: [[8]]",
        "world size: 2",
        f"collective state: {word}",
        "error msg: Culprit rank 1; Error type: SIZE_OR_SYNTAX_MISMATCH, Expected input sizes: '[[8]]' does not "
        "match found input sizes: '[[6]]'",
    ]
    (ev,) = run(FRTEXT, block).events
    assert ev["state"] == (word if word in ("scheduled", "started", "completed") else None)


def _header_year(month: int, day: int, mtime: float | None, year: int | None = 2020, hms: str = "12:00:00") -> int:
    opts = {"mtime": mtime} if mtime is not None else {}
    ctx = FileContext(file="t.log", year=year, options=opts)
    ln = parse_header(f"[E{month}{day:02d} {hms}.0 x.cpp:1] m", ctx)
    return ln.t_wall.year


def test_a_line_one_month_past_the_files_month_keeps_its_year():
    """A file last written at 23:00 UTC on 31 January holds a line of 00:30 on 1 February local time (a
    zone ahead of UTC): that line is of the same year, not of the year before. A line of 10 February
    or of March was written the year before (the file cannot hold lines from its future)."""
    mtime = datetime(2026, 1, 31, 23, 0, tzinfo=timezone.utc).timestamp()
    assert _header_year(2, 1, mtime, hms="00:30:00") == 2026
    assert _header_year(1, 31, mtime, hms="23:59:00") == 2026
    assert _header_year(12, 31, mtime) == 2025
    assert _header_year(2, 10, mtime) == 2025
    assert _header_year(3, 1, mtime) == 2025
    # New Year's Eve: a file written at 23:30 UTC on 31 December holds a line of 01:00 on 1 January
    # local time (UTC+2): the next year
    eve = datetime(2025, 12, 31, 23, 30, tzinfo=timezone.utc).timestamp()
    assert _header_year(1, 1, eve, hms="01:00:00") == 2026
    assert _header_year(1, 2, eve, hms="01:00:00") == 2025


@SETTINGS
@given(
    ref=st.datetimes(min_value=datetime(1990, 1, 1), max_value=datetime(2100, 12, 1), timezones=st.just(timezone.utc)),
    month=st.integers(1, 12),
    day=st.integers(1, 28),
    hour=st.integers(0, 23),
)
def test_a_date_without_a_year_takes_the_year_closest_before_the_files_time(ref, month, day, hour):
    """A year-less line in a file written at ``ref`` takes the latest year that puts it no later than
    ``ref`` plus one day (the day of slack is a zone ahead of UTC): closest before the file's time."""
    y = _header_year(month, day, ref.timestamp(), hms=f"{hour:02d}:00:00")
    limit = ref.replace(tzinfo=None) + timedelta(days=1)
    assert datetime(y, month, day, hour) <= limit < datetime(y + 1, month, day, hour)


@SETTINGS
@given(month=st.integers(1, 12), year=st.integers(1990, 2100))
def test_without_the_files_time_the_stated_year_is_used(month, year):
    """No file time: the year the caller states (``--year``) dates every line."""
    assert _header_year(month, 1, None, year) == year
