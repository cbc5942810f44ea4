"""Pins the Flight Recorder ``pg_status`` counters (``fr_fields.as_int``, ``progress_rows``) that the
semantic mutation campaign (benchmarks/bench_mutation.py, issue #15) found unpinned."""

from __future__ import annotations

from denpex_nb.ingest.fr_fields import as_int, progress_rows


def test_a_counter_is_an_int_or_a_string_of_digits_within_int64():
    assert as_int(7) == 7 and as_int("7") == 7
    assert as_int(-(2**63)) == -(2**63) and as_int(2**63 - 1) == 2**63 - 1
    assert as_int(2**63) is None and as_int(str(-(2**63) - 1)) is None


def test_a_float_or_an_empty_counter_is_unknown():
    """A float is no counter (a JSON dump writes its counters as ints or strings)."""
    assert as_int(3.0) is None and as_int(3.5) is None and as_int("") is None and as_int(None) is None


def test_a_progress_row_per_group_with_its_counter_and_source():
    rows = progress_rows(
        {"0": {"last_enqueued_collective": "12", "last_started_collective": 11, "last_completed_collective": 10.0}},
        rank=3,
        file="rank3.pkl",
        source="fr_json",
    )
    assert rows == [
        {
            "rank": 3,
            "pg": "0",
            "seq_kind": "fr",
            "last_enqueued": 12,
            "last_started": 11,
            "last_completed": None,
            "source": "fr_json",
            "file": "rank3.pkl",
        }
    ]
