"""Every numeric position of every line format the readers know, filled with huge, negative and
garbage numbers: ``load`` never raises (strict: a reader's exception would too) and every line is
accounted for; a number that does not fit its column is a missing value with a note.

The formats are the grammar of ``benchmarks/bench_fuzz.py`` (watchdog, status, desync, DETAIL
fingerprints, NCCL INFO/WARN/Init/traces, gloo, tracebacks, agent and ChildFailedError lines,
torchfrtrace text, mp.spawn, DeepSpeed / Lightning / torchrun banners, tracer JSONL) under random
launcher prefixes (``[rankN]:``, ``[defaultN]:``, Open MPI, Ray, kubectl, syslog ...): ranks,
SeqNum, NumelIn/Out, opCount, exit codes, pids, timestamps, world sizes, counts, roots.
"""

from __future__ import annotations

import importlib.util
import os
import re
import warnings

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import denpex_nb as dx
from denpex_nb.errors import DenpexError

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_spec = importlib.util.spec_from_file_location("bench_fuzz", os.path.join(ROOT, "benchmarks", "bench_fuzz.py"))
bench_fuzz = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench_fuzz)

FIELD = re.compile(r"\{(r|n|h|op|pid|host)\}")

#: numbers past every column's range, negative ones, and things that are not numbers at all
huge = st.one_of(
    st.sampled_from(bench_fuzz.BIG),
    st.integers(min_value=-(10**40), max_value=10**40),
    st.integers(min_value=2**31 - 2, max_value=2**31 + 2),
    st.integers(min_value=2**63 - 2, max_value=2**64 + 2),
).map(str) | st.sampled_from(("9" * 4301, "1" * 5000))  # past Python's int() digit limit
garbage = st.sampled_from(
    (
        "",
        "NaN",
        "inf",
        "1e309",
        "0x" + "f" * 30,
        "1.5",
        "٣",
        "１２",
        "--1",
        "+7",
        "0" * 50,
        "9" * 40,
        "-0",
        "00000000000000000000001",
    )
)
number = st.one_of(huge, huge, garbage)


@st.composite
def line(draw, huge_only: bool = False):
    tpl = draw(st.sampled_from(bench_fuzz.TEMPLATES))
    prefix = draw(st.sampled_from(bench_fuzz.PREFIXES))
    num = huge if huge_only else number

    def fill(text: str) -> str:
        text = text.replace("{{", "\x00").replace("}}", "\x01")
        out, pos = [], 0
        for m in FIELD.finditer(text):
            out.append(text[pos : m.start()])
            kind = m.group(1)
            if kind == "op":
                out.append(draw(st.sampled_from(bench_fuzz.OPS)))
            elif kind == "host":
                out.append(draw(st.sampled_from(("node-1", "h", "10.0.0.1"))))
            elif kind == "h":
                out.append(draw(st.sampled_from(("0", "1a", "f" * 17, "f" * 40, "zz", ""))))
            else:
                out.append(draw(num))
            pos = m.end()
        out.append(text[pos:])
        return "".join(out).replace("\x00", "{").replace("\x01", "}")

    return fill(prefix) + fill(tpl)


def _load(tmp_path, text: str, name: str, strict: bool):
    p = tmp_path / name
    p.write_bytes(text.encode("utf-8"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return dx.load(str(p), progress=False, jobs=1, strict=strict), p
        except DenpexError:  # nothing loadable at all (a JSONL line that is not the tracer's ...)
            return None, p


def _conserved(inc, text: str) -> None:
    s = inc.sources
    assert (s["lines_total"] == s["lines_parsed"] + s["lines_unparsed"]).all()
    per_file = inc.unparsed.groupby(inc.unparsed["file"].astype("object"))["n_lines"].sum().to_dict()
    for f, n in zip(s["file"], s["lines_unparsed"]):
        assert int(per_file.get(f, 0)) == int(n)
    if s["format"].iloc[0] == "text":
        assert int(s["lines_total"].iloc[0]) == text.count("\n") + (0 if text.endswith("\n") else 1)
    for frame, cols in (
        ("events", ("rank", "seq", "numel_in", "numel_out", "world_size", "root", "pid")),
        ("errors", ("rank", "seq", "exit_code", "pid")),
        ("ranks", ("rank", "world_size", "pid")),
        ("progress", ("rank", "last_enqueued", "last_completed")),
    ):
        df = getattr(inc, frame)
        for c in cols:
            if c in df:
                assert all(abs(int(v)) < 2**63 for v in df[c].dropna()), (frame, c)


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(st.lists(line(), min_size=1, max_size=12), st.sampled_from(("rank1.log", "combined.log", "nccl.h.7.log")))
def test_out_of_range_numbers_in_every_position_never_raise(tmp_path, lines, name):
    text = "\n".join(lines) + "\n"
    inc, _ = _load(tmp_path, text, name, strict=True)
    if inc is not None:
        _conserved(inc, text)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(st.lists(line(huge_only=True), min_size=1, max_size=8))
def test_tracer_jsonl_with_out_of_range_numbers(tmp_path, lines):
    jsonl = [x for x in lines if x.startswith('{"v"')] or [
        '{"v":1,"event":"issue","rank":99999999999999999999,"pg":"0","seq":-1,"op":"all_reduce","t_wall":1e309}'
    ]
    text = "\n".join(jsonl) + "\n"
    inc, _ = _load(tmp_path, text, "denpex_trace_rank0.jsonl", strict=True)
    if inc is not None:
        _conserved(inc, text)


@pytest.mark.parametrize("digits", [4301, 5000])
def test_numbers_past_pythons_digit_limit_cost_at_most_their_lines(tmp_path, digits):
    """``int()`` refuses more than 4300 digits: no reader (nor a file name's rank hint) may call it
    on unbounded digits; such a number is a missing value, and the strict load proves no reader
    failed on it."""
    n = "9" * digits
    text = (
        "\n".join(bench_fuzz.grammar_line(__import__("random").Random(i)).replace("9" * 40, n) for i in range(200))
        + f"\n[rank{n}]: RuntimeError: boom\nSeqNum={n}\n"
        + "".join(f"rank{n}.log:{i}:[rank1]: RuntimeError: boom\n" for i in range(3))
    )  # grep -Hn of a named file
    inc, _ = _load(tmp_path, text, "rank0.log", strict=True)
    _conserved(inc, text)


def test_times_outside_the_nanosecond_range_and_infinite_pids_are_missing():
    import datetime

    import numpy as np

    from denpex_nb.ingest.assemble import _typed, build_incident
    from denpex_nb.ingest.parse import FileResult

    bad = []
    t = _typed(
        ["5808-01-01 00:00:49", None, "2024-01-01T00:00:00Z", datetime.datetime(9999, 1, 1), "x"],
        "datetime64[ns, UTC]",
        bad.append,
    )
    assert str(t.dtype) == "datetime64[ns, UTC]" and t.isna().tolist() == [True, True, False, True, True]
    assert bad == [2]
    r = FileResult(
        file="f",
        format="text",
        frames={
            "ranks": [{"rank": [0, 1], "pid": [float("inf"), np.nan]}],
            "events": [],
            "errors": [],
            "progress": [],
            "unparsed": [],
        },
        source={"file": "f", "format": "text", "lines_total": 0, "lines_parsed": 0, "lines_unparsed": 0},
    )
    inc = build_incident([r])
    assert inc.ranks["pid"].isna().all()
