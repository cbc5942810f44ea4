"""Pins the year a year-less glog date takes (``prefixes._year_of``), found by the semantic
mutation campaign (benchmarks/bench_mutation.py, issue #15).

A glog header (``E0401 00:30:00``) has no year. It takes the latest year that puts it no later
than the file's time (its mtime) plus a day of time-zone slack: a line stamped a few hours after
the file's UTC time was written in a zone ahead of UTC and keeps the file's year; a line later than
that was written the year before.
"""

from __future__ import annotations

from datetime import datetime, timezone

from denpex_nb.ingest.base import FileContext
from denpex_nb.ingest.prefixes import parse_header


def _year(header_md: str, hms: str, mtime: datetime) -> int:
    ctx = FileContext(file="t.log", year=mtime.year, options={"mtime": mtime.timestamp()})
    return parse_header(f"[E{header_md} {hms}.0 x.cpp:1] m", ctx).t_wall.year


def test_a_line_hours_after_the_files_time_is_zone_skew_and_keeps_the_files_year():
    """Written 31 March 23:59 UTC; a line stamped 1 April 00:30 (a zone ahead of UTC) is this year's."""
    assert _year("0401", "00:30:00", datetime(2026, 3, 31, 23, 59, tzinfo=timezone.utc)) == 2026


def test_a_line_exactly_a_day_after_the_files_time_keeps_the_files_year():
    """The slack is a whole day, its last second included."""
    assert _year("0401", "12:00:00", datetime(2026, 3, 31, 12, 0, tzinfo=timezone.utc)) == 2026
    assert _year("0401", "12:00:01", datetime(2026, 3, 31, 12, 0, tzinfo=timezone.utc)) == 2025


def test_a_line_in_the_files_month_before_its_time_keeps_the_files_year():
    assert _year("0315", "08:00:00", datetime(2026, 3, 31, tzinfo=timezone.utc)) == 2026


def test_a_line_weeks_after_the_files_time_was_written_last_year():
    """Written in March 2026: a May line cannot come from May 2026 (after the file), so May 2025."""
    assert _year("0515", "08:00:00", datetime(2026, 3, 31, tzinfo=timezone.utc)) == 2025
    assert _year("1231", "23:59:00", datetime(2026, 1, 2, tzinfo=timezone.utc)) == 2025


# --- a grep -H file name alone on its line (mutation_signals_151a56c9fc22.md: prefixes.py:214) ----------------


def test_a_file_name_alone_on_its_line_is_kept_as_written_and_names_no_rank():
    """``rank3.log:`` on a line of its own is what a user writes above the lines of that file in an
    issue (or grep -H's empty line: nothing to read either way). It stays the text it is, with no rank:
    only a line with a message after the name is grep -H output whose name gives the message's rank."""
    from denpex_nb.ingest.prefixes import to_lines

    ctx = FileContext(file="t.log")
    lines = to_lines([(1, "rank3.log:"), (2, "worker_rank2.log-"), (3, "rank3.log:RuntimeError: boom")], ctx)
    assert [(ln.text, ln.rank) for ln in lines] == [
        ("rank3.log:", None),
        ("worker_rank2.log-", None),
        ("RuntimeError: boom", 3),
    ]
