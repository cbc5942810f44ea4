"""Prefixes people really have in front of the formats the readers know (item: collector wrappers).

Formats, and where they come from:

* ``kubectl logs --timestamps`` / ``docker logs -t``: an RFC 3339 time with nanoseconds and ``Z``,
  one space, then the container's line (``2024-05-01T12:00:00.123456789Z ...``).
* ``docker compose logs``: the service/container name padded with spaces, ``| `` (compose v2
  ``worker-1  | ``; v1 ``proj_worker_1  | ``), optionally followed by ``-t``'s RFC 3339 time.
* syslog / journald (``journalctl`` default ``short``): ``May  1 12:00:00 host python[1234]: ``;
  ``journalctl -o short-iso``: ``2024-05-01T12:00:00+0000 host python3[1234]: ``.
* ``grep -H`` (``run.3.log:``), ``grep -Hn`` (``run.3.log:123:``) and their context lines
  (``rank3.log-``, ``rank3.log-17-``).
* application loggers: ``logging``'s ``%(asctime)s - %(name)s - %(levelname)s - %(message)s``,
  loguru's ``{time} | {level: <8} | {name}:{function}:{line} - {message}``, DeepSpeed's
  ``[date] [LEVEL] [file:line:func]``, and home-made ``[RANK 1] <date> [ERROR] trainer: ``.
* ANSI colour codes and CRLF line ends.

Every recorded run's ``combined.log`` must give the same rows (events and errors: kinds, ranks,
ops, seqs, messages, lines) with each wrapper applied to every line as without it: before, a
kubectl/docker/syslog prefix split tracebacks and turned "traceback without its exception line"
into a spurious rank crash on 8 of 32 broken runs.
"""

from __future__ import annotations

import functools
import glob
import os
from datetime import datetime, timezone

import pytest

import denpex_nb as dx
from denpex_nb.ingest.base import FileContext
from denpex_nb.ingest.prefixes import parse_header

from .test_recorded import RECORDED

COMBINED = sorted(glob.glob(os.path.join(RECORDED, "**", "combined.log"), recursive=True))

WRAP = {
    "kubectl": lambda i, t: f"2024-05-01T12:00:{i % 60:02d}.{i:09d}Z {t}",
    "compose": lambda i, t: f"worker-1  | {t}",
    "compose_ts": lambda i, t: f"proj_worker_1  | 2024-05-01T12:00:00.5Z {t}",
    "syslog": lambda i, t: f"May  1 12:00:{i % 60:02d} node-3 python[1234]: {t}",
    "journal_iso": lambda i, t: f"2024-05-01T12:00:00+0000 node-3 python3[1234]: {t}",
    "grep_h": lambda i, t: f"combined.log:{t}",
    "grep_hn": lambda i, t: f"combined.log:{i + 1}:{t}",
    "grep_h_kubectl": lambda i, t: f"pod.log:2024-05-01T12:00:00.000000001Z {t}",
    "ansi": lambda i, t: f"\x1b[32m{t}\x1b[0m" if t else t,
    "crlf": lambda i, t: t + "\r",
}
_EV = ["rank", "pg", "seq_kind", "seq", "op", "state", "source", "line", "in_shapes", "dtype"]
_ER = ["rank", "kind", "op", "seq", "seq_kind", "related_ranks", "message", "line"]


@functools.cache
def _plain_rows(path: str):
    return _rows(path)


def _rows(path: str):
    inc = dx.load(path, progress=False)
    ev, er = inc.events[_EV].astype(object), inc.errors[_ER].astype(object)
    ev, er = ev.where(ev.notna(), None), er.where(er.notna(), None)
    return sorted(map(repr, ev.itertuples(index=False))), sorted(map(repr, er.itertuples(index=False)))


@pytest.mark.skipif(not COMBINED, reason="no data/recorded runs")
@pytest.mark.parametrize("wrapper", sorted(WRAP))
def test_recorded_runs_read_the_same_through_a_wrapper(wrapper, tmp_path):
    wrap = WRAP[wrapper]
    different = []
    for log in COMBINED:
        with open(log, encoding="utf-8") as f:
            lines = f.read().split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        path = tmp_path / "combined.log"
        path.write_text("\n".join(wrap(i, t) for i, t in enumerate(lines)) + "\n", encoding="utf-8", newline="")
        if _rows(str(path)) != _plain_rows(log):
            different.append(os.path.relpath(log, RECORDED))
    assert not different, different


CTX = FileContext(file="x.log", year=2024)
INNER = {
    "torchrun": ("[default1]:[rank1]:RuntimeError: boom", 1, "RuntimeError: boom"),
    "glog": ("[E501 12:00:00.123 ProcessGroupNCCL.cpp:9] [Rank 1] Watchdog caught", None, "[Rank 1] Watchdog caught"),
    "nccl": (
        "node7:4242:4310 [3] NCCL INFO AllReduce: opCount 1a",
        None,
        "node7:4242:4310 [3] NCCL INFO AllReduce: opCount 1a",
    ),
}
OUTER = {  # wrapper -> (text, rank it names, host, pid)
    "kubectl": ("2024-05-01T12:00:00.123456789Z ", None, None, None),
    "compose": ("worker-1  | ", None, None, None),
    "compose_rank": ("trainer-rank-3  | ", 3, None, None),
    "syslog": ("May  1 12:00:00 node-3 python[1234]: ", None, "node-3", 1234),
    "journal_iso": ("2024-05-01T12:00:00+0000 node-3 python3[1234]: ", None, "node-3", 1234),
    "grep_h": ("run.3.log:", None, None, None),
    "grep_hn": ("run.3.log:123:", None, None, None),
    "grep_rank": ("logs/rank3.log:", 3, None, None),
    "grep_context": ("rank3.log-", 3, None, None),
    "grep_context_n": ("rank3.log-17-", 3, None, None),
    "ansi": ("\x1b[31m", None, None, None),
}


@pytest.mark.parametrize("outer", sorted(OUTER))
@pytest.mark.parametrize("inner", sorted(INNER))
def test_wrapper_in_front_of_each_format(outer, inner):
    o_text, o_rank, o_host, o_pid = OUTER[outer]
    i_text, i_rank, message = INNER[inner]
    line = parse_header(o_text + i_text, CTX)
    assert line.text == message
    assert line.rank == (i_rank if i_rank is not None else o_rank)  # [rankN]: wins over the wrapper
    if inner == "nccl":
        assert (line.host, line.pid) == ("node7", 4242)  # the inner NCCL prefix wins
    elif o_host:
        assert (line.host, line.pid if inner != "glog" else 1234) == (o_host, o_pid)


def test_wrapper_times():
    assert parse_header("2024-05-01T12:00:00.123456789Z hello", CTX).t_wall == datetime(
        2024, 5, 1, 12, 0, 0, 123456, tzinfo=timezone.utc
    )
    assert parse_header("2024-05-01T14:00:00+02:00 node python[1]: hello", CTX).t_wall == datetime(
        2024, 5, 1, 12, 0, tzinfo=timezone.utc
    )
    assert parse_header("May  1 12:00:00 node python[1]: hello", CTX).t_wall == datetime(
        2024, 5, 1, 12, tzinfo=timezone.utc
    )


def test_a_compose_replica_number_is_not_a_rank():
    assert parse_header("worker-3  | RuntimeError: x", CTX).rank is None
    assert parse_header("trainer_rank_3  | RuntimeError: x", CTX).rank == 3


@pytest.mark.parametrize(
    "text, rank, sev, origin, message",
    [
        (
            "[RANK 1] 2025-01-01 12:00:00 [ERROR] trainer: step failed: RuntimeError: x",
            1,
            "E",
            "trainer",
            "step failed: RuntimeError: x",
        ),
        ("2024-01-01 12:00:00,123 - root - ERROR - RuntimeError: x", None, "E", "root", "RuntimeError: x"),
        (
            "[2024-01-01 12:00:00,123] [INFO] [engine.py:100:step] RuntimeError: x",
            None,
            "I",
            "engine.py:100:step",
            "RuntimeError: x",
        ),
        (
            "2024-01-01 12:00:00.123 | ERROR    | train:main:12 - RuntimeError: x",
            None,
            "E",
            "train:main:12",
            "RuntimeError: x",
        ),
        ("2024-01-01 12:00:00,123 WARNING trainer: RuntimeError: x", None, "W", "trainer", "RuntimeError: x"),
        ("[default0]:2024-01-01 12:00:00,123 - root - ERROR - RuntimeError: x", 0, "E", "root", "RuntimeError: x"),
        (
            "2024-05-01T12:00:00Z [Rank 2] 2025-01-01 12:00:00 [ERROR] t: Traceback (most recent call last):",
            2,
            "E",
            "t",
            "Traceback (most recent call last):",
        ),
    ],
)
def test_application_logger_headers(text, rank, sev, origin, message):
    line = parse_header(text, CTX)
    assert (line.rank, line.severity, line.origin, line.text) == (rank, sev, origin, message)


def test_c10d_rank_tag_inside_a_message_is_not_an_app_wrapper():
    line = parse_header("[I501 12:00:00.1 ProcessGroupWrapper.cpp:710] [Rank 1] Running collective: x", CTX)
    assert line.text.startswith("[Rank 1] Running collective")


@pytest.mark.parametrize(
    "text",
    [
        "[rank2147483648]: RuntimeError: x",
        "[default99999999999999999999]: RuntimeError: x",
        "[RANK 99999999999] 2025-01-01 12:00:00 [ERROR] t: RuntimeError: x",
        "May  1 12:00:00 node python[99999999999999999999]: RuntimeError: x",
    ],
)
def test_out_of_range_numbers_are_missing_not_errors(text, tmp_path):
    line = parse_header(text, CTX)
    assert line.rank is None and line.local_rank is None and line.pid is None
    p = tmp_path / "x.log"
    p.write_text(text + "\n")
    inc = dx.load(str(p), progress=False)
    assert inc.errors["rank"].isna().all()


def test_a_traceback_through_kubectl_stays_one_record(tmp_path):
    lines = [
        "[default1]:Traceback (most recent call last):",
        '[default1]:  File "train.py", line 9, in <module>',
        "[default1]:    dist.all_reduce(t)",
        "[default1]:RuntimeError: peer gone",
    ]
    p = tmp_path / "pod.log"
    p.write_text("".join(f"2024-05-01T12:00:0{i}.000000001Z {t}\r\n" for i, t in enumerate(lines)))
    inc = dx.load(str(p), progress=False)
    exc = inc.errors[inc.errors["kind"] == "exception"]
    assert list(exc["message"]) == ["RuntimeError: peer gone"] and list(exc["rank"]) == [1]
