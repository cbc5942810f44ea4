"""Pins the year a year-less glog date takes (``prefixes._year_of``), found by the semantic
mutation campaign (benchmarks/bench_mutation.py, issue #15).

A glog header (``E0401 00:30:00``) has no year. It takes the year that puts it closest *before*
the file's time (its mtime): a date up to one month after the file's month is clock or time-zone
skew and stays in the file's year; a date two or more months after it was written last year.
"""

from __future__ import annotations

from datetime import datetime, timezone

from denpex_nb.ingest.base import FileContext
from denpex_nb.ingest.prefixes import parse_header


def _year(header_md: str, mtime: datetime) -> int:
    ctx = FileContext(file="t.log", year=mtime.year, options={"mtime": mtime.timestamp()})
    return parse_header(f"[E{header_md} 00:30:00.0 x.cpp:1] m", ctx).t_wall.year


def test_a_date_one_month_after_the_files_month_is_skew_and_keeps_the_files_year():
    """Written 31 March 23:59 UTC; a line stamped 1 April (a zone ahead of UTC) is this year's April."""
    assert _year("0401", datetime(2026, 3, 31, 23, 59, tzinfo=timezone.utc)) == 2026


def test_a_date_in_the_files_month_keeps_the_files_year():
    assert _year("0315", datetime(2026, 3, 31, tzinfo=timezone.utc)) == 2026


def test_a_date_two_months_after_the_files_month_was_written_last_year():
    """Written in March 2026: a May line cannot come from May 2026 (after the file), so May 2025."""
    assert _year("0515", datetime(2026, 3, 31, tzinfo=timezone.utc)) == 2025
    assert _year("1231", datetime(2026, 1, 2, tzinfo=timezone.utc)) == 2025
