"""Prefix stripping and rank attribution (docs/formats.md §2), one test per variant."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from denpex_nb.ingest.base import FileContext
from denpex_nb.ingest.prefixes import parse_header, to_lines

CTX = FileContext(file="t.log", year=2025)


def lines(*texts, ctx=CTX, start=1):
    return to_lines([(start + i, t) for i, t in enumerate(texts)], ctx)


def test_torchrun_and_rank_prefix_with_cpp_header():
    (ln,) = lines("[default1]:[rank5]:[E412 09:24:02.550218903 ProcessGroupNCCL.cpp:688] [Rank 1] Watchdog caught x")
    assert (ln.rank, ln.local_rank) == (5, 1)  # [rankN]: beats torchrun's local rank
    assert ln.text == "[Rank 1] Watchdog caught x"
    assert ln.severity == "E" and ln.origin == "ProcessGroupNCCL.cpp:688"
    assert ln.t_wall == datetime(2025, 4, 12, 9, 24, 2, 550218, tzinfo=timezone.utc)
    assert ln.prefixes == ("torchrun", "rank", "glog_cpp")


def test_cpp_month_day_not_zero_padded():
    (ln,) = lines("[rank2]:[I105 23:59:58.000731046 TCPStore.cpp:340] [c10d - debug] TCP client connected")
    assert ln.t_wall == datetime(2025, 1, 5, 23, 59, 58, 731, tzinfo=timezone.utc)
    (ln,) = lines("[I1105 01:02:03.5 TCPStore.cpp:340] x")
    assert (ln.t_wall.month, ln.t_wall.day) == (11, 5)


def test_old_cpp_headers_without_time():
    assert parse_header("[rank3]:[E ProcessGroupNCCL.cpp:475] msg", CTX).text == "msg"
    ln = parse_header("[W ProcessGroupGloo.cpp:12] hello", CTX)
    assert (ln.text, ln.severity, ln.t_wall) == ("hello", "W", None)


def test_python_logging_header_gives_pid_and_time():
    ln = parse_header(
        "E0412 09:25:40.318000 61190 torch/distributed/elastic/multiprocessing/api.py:874] failed (exitcode: -6)", CTX
    )
    assert ln.text == "failed (exitcode: -6)" and ln.pid == 61190 and ln.severity == "E"
    assert ln.t_wall == datetime(2025, 4, 12, 9, 25, 40, 318000, tzinfo=timezone.utc)
    assert ln.rank is None  # an agent line belongs to no rank


def test_real_glog_header_thread_id_is_not_a_pid():
    ln = parse_header("E0412 09:24:02.550218 61266 ProcessGroupNCCL.cpp:688] boom", CTX)
    assert ln.text == "boom" and ln.pid is None and ln.origin == "ProcessGroupNCCL.cpp:688"


def test_older_python_logging_forms():
    ln = parse_header("ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: 1) local_rank: 0", CTX)
    assert ln.text.startswith("failed (exitcode: 1)") and ln.severity == "E"
    ln = parse_header(
        "[2023-05-01 12:00:00,123] torch.distributed.elastic.multiprocessing.api: [ERROR] failed (exitcode: 1)", CTX
    )
    assert ln.text == "failed (exitcode: 1)" and ln.t_wall == datetime(
        2023, 5, 1, 12, 0, 0, 123000, tzinfo=timezone.utc
    )


def test_timezone_option_converts_to_utc():
    ctx = FileContext(file="t.log", year=2025, options={"tz": "Europe/Berlin"})
    ln = parse_header("[I412 09:00:00.000000000 x.cpp:1] m", ctx)
    assert ln.t_wall == datetime(2025, 4, 12, 7, 0, tzinfo=timezone.utc)


def test_december_line_in_january_file_gets_previous_year():
    mtime = datetime(2026, 1, 2, tzinfo=timezone.utc).timestamp()
    ctx = FileContext(file="t.log", year=2026, options={"mtime": mtime})
    assert parse_header("[E1231 23:59:00.0 x.cpp:1] m", ctx).t_wall.year == 2025
    assert parse_header("[E101 00:01:00.0 x.cpp:1] m", ctx).t_wall.year == 2026


def test_srun_label_is_rank_but_rank_prefix_wins():
    (ln,) = lines(" 11: [rank11]: RuntimeError: boom")
    assert ln.rank == 11 and ln.text == "RuntimeError: boom" and ln.prefixes[0] == "srun"
    (ln,) = lines("3: plain output from task three")
    assert ln.rank == 3 and ln.text == "plain output from task three"


def test_srun_label_over_torchrun_is_a_node_index_not_a_rank():
    (ln,) = lines("1: [default0]:hello")
    assert ln.local_rank == 0 and ln.rank is None


def test_open_mpi_and_hydra_labels():
    (ln,) = lines("[1,6]<stdout>:tern-08:61207:61290 [2] NCCL INFO AllReduce: opCount 1c")
    assert ln.rank == 6 and ln.host == "tern-08" and ln.pid == 61207 and ln.severity == "INFO"
    assert ln.text.startswith("tern-08:61207:61290 [2] NCCL INFO")  # nccl reader needs the prefix
    (ln,) = lines("[4] step 3 done")
    assert ln.rank == 4 and ln.text == "step 3 done"


def test_pdsh_host_before_rank_prefix():
    (ln,) = lines("tern-08: [rank9]: torch.distributed.DistBackendError: x")
    assert ln.host == "tern-08" and ln.rank == 9 and ln.text == "torch.distributed.DistBackendError: x"


def test_exception_names_are_not_pdsh_hosts():
    ls = lines("RuntimeError: a", "RuntimeError: b")
    assert all(ln.host is None and ln.text.startswith("RuntimeError") for ln in ls)


def test_ray_prefix_nested_and_repeat_suffix():
    (ln,) = lines(
        "(TrainWorker pid=61206, ip=192.0.2.18) [rank6]:[E412 09:24:02.1 x.cpp:1] hi [repeated 3x across cluster]"
    )
    assert ln.pid == 61206 and ln.host == "192.0.2.18" and ln.rank == 6 and ln.text == "hi"
    assert "ray_repeated=3" in ln.prefixes


def test_torchrun_template_prefix_gives_global_and_local():
    (ln,) = lines("[default|3|1]:hello")
    assert (ln.rank, ln.local_rank, ln.text) == (3, 1, "hello")


def test_torchrun_local_rank_is_last_resort():
    (ln,) = lines("[default1]:step 3")
    assert (ln.rank, ln.local_rank) == (1, 1)
    (ln,) = lines("[default1]:step 3", ctx=FileContext(file="rank7.log", rank_hint=7))
    assert (ln.rank, ln.local_rank) == (7, 1)


def test_rank_hint_and_local_rank_hint_from_context():
    (ln,) = lines("plain", ctx=FileContext(file="x", local_rank_hint=2))
    assert (ln.rank, ln.local_rank) == (2, 2)
    (ln,) = lines("[rank5]: x", ctx=FileContext(file="x", rank_hint=1))
    assert ln.rank == 5


def test_deepspeed_and_lightning():
    (ln,) = lines("[2025-04-12 09:13:55,218] [INFO] [logging.py:128:log_dist] [Rank 0] loaded checkpoint shard 3/8")
    assert ln.rank == 0 and ln.text == "loaded checkpoint shard 3/8" and ln.severity == "I"
    (ln,) = lines("[2025-04-12 09:13:55,218] [INFO] [comm.py:1:init] [Rank -1] before init")
    assert ln.rank is None
    (ln,) = lines("[rank: 2] Restoring states from ckpt/last.ckpt")
    assert ln.rank == 2 and ln.text == "Restoring states from ckpt/last.ckpt"


def test_ansi_colour_codes_removed():
    (ln,) = lines("\x1b[31m[rank0]: boom\x1b[0m")
    assert ln.rank == 0 and ln.text == "boom" and "\x1b" not in ln.raw


@pytest.mark.parametrize("prefix", ["   212\t", "212:", "logs/rank3.log:212:", "  212 | ", "212│"])
def test_line_number_prefixes(prefix):
    (ln,) = lines(prefix + "[default0]:[rank0]: RuntimeError: x")
    assert ln.rank == 0 and ln.text == "RuntimeError: x"


def test_cat_n_rising_numbers_with_colon_space_are_not_srun_labels():
    ls = lines("  7: [default0]:a", "  8: [default1]:b")
    assert [ln.local_rank for ln in ls] == [0, 1] and [ln.text for ln in ls] == ["a", "b"]


def test_grep_hn_file_name_gives_rank_hint():
    (ln,) = lines("logs/rank3.log:212:Watchdog caught something")
    assert ln.rank == 3 and ln.text == "Watchdog caught something"


def test_python_warning_location_is_not_a_grep_prefix():
    (ln,) = lines(
        "/opt/x/distributed_c10d.py:4012: FutureWarning: `torch.distributed.all_gather_into_tensor` is deprecated."
    )
    assert ln.text.startswith("/opt/x/distributed_c10d.py:4012: FutureWarning")


def test_two_ranks_on_one_line_split_with_same_lineno():
    ls = lines("[rank0]: RuntimeError: foo[rank1]: RuntimeError: bar", start=40)
    assert [(ln.lineno, ln.rank, ln.text) for ln in ls] == [(40, 0, "RuntimeError: foo"), (40, 1, "RuntimeError: bar")]
    ls = lines("step 40 rank 1 loss=2.318[rank0]:[E1129 22:27:23.883942729 ProcessGroupGloo.cpp:2901] [Rank 0]: m")
    assert [ln.text for ln in ls] == ["step 40 rank 1 loss=2.318", "[Rank 0]: m"]
    ls = lines("some outputTraceback (most recent call last):")
    assert [ln.text for ln in ls] == ["some output", "Traceback (most recent call last):"]


def test_prefix_chain_is_not_a_merge():
    ls = lines("[default0]:[rank0]:[E1129 22:27:23.883942729 ProcessGroupGloo.cpp:2901] [Rank 0]: m")
    assert len(ls) == 1


def test_hard_wrapped_prefixed_line_is_joined():
    full = (
        "[rank1]:[E1129 22:37:26.285475132 ProcessGroupWrapper.cpp:710] RuntimeError: Detected mismatch between "
        "collectives on ranks. Rank 1 is running collective: CollectiveFingerPrint(SequenceNumber=7, OpType=ALLREDUCE)"
    )
    parts = [full[:120], full[120:]]
    ls = lines(*parts, start=10)
    assert len(ls) == 1
    (ln,) = ls
    assert ln.n_lines == 2 and ln.lineno == 10 and list(ln.linenos) == [10, 11]
    assert ln.text.endswith("CollectiveFingerPrint(SequenceNumber=7, OpType=ALLREDUCE)") and ln.rank == 1


def test_open_parenthesis_joins_unprefixed_tail():
    ls = lines("[rank0]: RuntimeError: foo(bar,", "baz)")
    assert len(ls) == 1 and ls[0].text == "RuntimeError: foo(bar, baz)"


def test_cpp_continuation_lines_are_not_joined_and_inherit_rank():
    ls = lines(
        "[rank3]:[E412 09:24:02.5 ProcessGroupNCCL.cpp:1] [Rank 3] watchdog thread terminated with exception: (",
        "terminate called after throwing an instance of 'c10::DistBackendError'",
        "  what():  [Rank 3] Watchdog caught collective operation timeout",
        "frame #0: foo",
    )
    assert len(ls) == 4 and [ln.rank for ln in ls] == [3, 3, 3, 3]


def test_unprefixed_line_after_short_line_is_not_joined():
    ls = lines("[rank0]: short", "step 40 rank 1 loss=2.3")
    assert len(ls) == 2 and ls[1].rank is None


def test_invalid_input_never_raises():
    weird = [
        "\x00\x01",
        "[",
        "[rank]:",
        "[default]:",
        "99999999999999999999: x",
        "[E9999 99:99:99.9 x.cpp:1] y",
        "\ufffd\ufffd",
        "(a pid=) x",
        "" * 3,
        "[rank1]:" * 50,
    ]
    ls = lines(*weird)
    assert len(ls) >= len(weird) - 1


_FRAGMENTS = [
    "[rank1]:",
    "[default0]:",
    " 3: ",
    "\t",
    "[E1129 22:27:23.88 x.cpp:9] ",
    "E1129 22:27:23.883 12 a/b.py:3] ",
    "Traceback (most recent call last):",
    "terminate called",
    "h:1:2 [0] NCCL INFO ",
    "(",
    ")",
    "[",
    "]",
    "x" * 79,
    "\x1b[31m",
    "\ufffd",
    "  what():  ",
    "frame #0",
    "12\t",
    "host-1: ",
    "[1,2]<stdout>:",
    "step 4",
]


def test_random_fragment_soup_never_raises_and_keeps_every_line():
    from hypothesis import given, settings
    from hypothesis import strategies as st

    @settings(max_examples=30, deadline=None)
    @given(
        st.lists(
            st.lists(st.sampled_from(_FRAGMENTS) | st.text(max_size=8), max_size=6).map("".join), min_size=1, max_size=8
        )
    )
    def check(texts):
        ls = lines(*texts)
        covered = set()
        for ln in ls:
            covered.update(ln.linenos)
        assert covered == set(range(1, len(texts) + 1))  # every physical line is in some Line
        assert all(ln.lineno >= 1 and ln.n_lines >= 1 for ln in ls)

    check()


def test_messy_copy_of_a_real_log_parses_like_the_clean_one():
    """A recorded DETAIL run, hard-wrapped at 120, coloured and numbered by cat -n, reads the same."""
    from pathlib import Path

    from denpex_nb.ingest.c10d import C10dReader
    from denpex_nb.ingest.python import PythonReader

    from ._text_helpers import run

    path = (
        Path(__file__).resolve().parents[2]
        / "data"
        / "recorded"
        / "gloo"
        / "allgather-shape-mismatch"
        / "broken-detail-w4"
        / "combined.log"
    )
    if not path.exists():
        pytest.skip("recorded run not present")
    clean = path.read_text(encoding="utf-8", errors="replace").splitlines()
    messy = []
    for line in clean:
        chunks = [line[i : i + 120] for i in range(0, len(line), 120)] or [""]
        chunks[0] = chunks[0].replace("]:", "]:\x1b[0m", 1).replace("[default", "\x1b[32m[default", 1)
        messy.extend(chunks)
    messy = [f"{n:6}\t{t}" for n, t in enumerate(messy, 1)]

    def summary(lines):
        out_c, out_p = run(C10dReader(), lines), run(PythonReader(), lines)
        events = sorted((e["rank"], e["seq"], e["op"], e.get("in_shapes"), e["state"]) for e in out_c.events)
        errors = sorted((e["rank"], e["kind"], e["message"]) for e in out_c.errors + out_p.errors)
        return events, errors

    assert summary(messy) == summary(clean)
    assert len(messy) > len(clean)  # the DETAIL lines really were wrapped


def test_thousands_of_digits_name_nothing_and_never_raise():
    big = "9" * 5000  # int() refuses past 4300 digits
    for text in [
        f"[rank{big}]: boom",
        f"{big}:[rank1]: boom",
        f"{big}\t[rank1]: boom",
        f"  {big}: boom",
        f"x.log:{big}:[rank1]: boom",
        f"(RayWorker pid={big}) boom [repeated {big}x across cluster]",
        f"[2024-01-01 12:00:00,123] [INFO] [engine.py:1] [Rank {big}] boom",
        f"[RANK 1] 2025-01-01 12:00:00 [ERROR] trainer: [rank{big}]: boom",
    ]:
        ln = parse_header(text)
        assert ln.rank in (None, 1), text[:60]
    lines = to_lines([(1, f"{big}:[rank1]: a"), (2, f"{big}:[rank1]: b")], FileContext(file="t.log"))
    assert lines and all(ln.rank in (None, 1) for ln in lines)
