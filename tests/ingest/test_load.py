"""load(): inputs of every kind, bad input, de-duplication, accounting, parallel = serial."""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import os
import shutil
import zipfile

import pytest

import denpex_nb as dx
from denpex_nb.errors import InputError, UsageError
from denpex_nb.incident import FRAMES, check_schema

from ._loader_helpers import mark_reader

DATA = os.path.join(os.path.dirname(__file__), "data")
LOG = (
    b"step 1 loss=2.31\n"
    b"MARK rank=0 seq=1\n"
    b"MARK rank=1 seq=1 ERR RuntimeError: boom\n"
    b"  continuation of the error\n"
    b"step 2 loss=2.30\n"
)


@pytest.fixture
def marks():
    with mark_reader() as r:
        yield r


def assert_accounting(inc):
    s = inc.sources
    assert (s["lines_total"] == s["lines_parsed"] + s["lines_unparsed"]).all()
    # the unparsed frame holds exactly lines_unparsed lines per file
    per_file = inc.unparsed.groupby("file", observed=True)["n_lines"].sum()
    for f, n in zip(s["file"], s["lines_unparsed"]):
        assert int(per_file.get(f, 0)) == int(n), f
    for name in FRAMES:
        assert check_schema(name, getattr(inc, name)) == [], name


def test_plain_file_to_frames(tmp_path, marks):
    f = tmp_path / "train.log"
    f.write_bytes(LOG)
    inc = dx.load(str(f))
    assert_accounting(inc)
    assert list(inc.events["seq"]) == [1, 1]
    assert list(inc.errors["message"]) == ["RuntimeError: boom"]
    assert inc.lines.as_dict() == {"total": 5, "parsed": 3, "unparsed": 2}
    assert list(inc.unparsed["text"]) == ["step 1 loss=2.31", "step 2 loss=2.30"]
    assert list(inc.unparsed["line"]) == [1, 5]
    assert inc.ranks_seen == [0, 1]
    assert list(inc.ranks["rank"]) == [0, 1]


def test_folder_glob_and_list_inputs(tmp_path, marks):
    (tmp_path / "logs" / "deep").mkdir(parents=True)
    (tmp_path / "logs" / "deep" / "a.log").write_bytes(LOG)
    (tmp_path / "logs" / "b.txt").write_bytes(b"MARK rank=2 seq=4\n")
    inc = dx.load(str(tmp_path / "logs"))
    assert sorted(inc.events["rank"].tolist()) == [0, 1, 2]
    inc2 = dx.load(str(tmp_path / "logs" / "**" / "*.log"))
    assert len(inc2.sources) == 1
    inc3 = dx.load([str(tmp_path / "logs" / "b.txt")], str(tmp_path / "logs" / "deep" / "a.log"))
    assert len(inc3.sources) == 2


def test_stdin(marks):
    inc = dx.load("-", stdin=io.BytesIO(LOG))
    assert list(inc.sources["file"]) == ["<stdin>"]
    assert len(inc.events) == 2


@pytest.mark.parametrize(
    "ext, pack", [(".gz", gzip.compress), (".bz2", bz2.compress), (".xz", lzma.compress), (".zst", None)]
)
def test_each_compression(tmp_path, marks, ext, pack):
    if pack is None:
        zstd = pytest.importorskip("zstandard")
        pack = zstd.ZstdCompressor().compress
    f = tmp_path / ("rank1.log" + ext)
    f.write_bytes(pack(LOG))
    inc = dx.load(str(f))
    assert_accounting(inc)
    assert len(inc.events) == 2 and int(inc.sources["rank_hint"][0]) == 1


def test_truncated_gzip_keeps_what_was_read(tmp_path, marks):
    f = tmp_path / "x.log.gz"
    f.write_bytes(gzip.compress(LOG * 200)[:-30])
    with pytest.warns(RuntimeWarning, match="x.log.gz: read stopped early"):
        inc = dx.load(str(f))
    assert len(inc.events) > 0
    assert "truncated" in inc.sources["error"][0]
    assert "load_error" in set(inc.errors["kind"])
    assert_accounting(inc)


def test_zip_archive(tmp_path, marks):
    z = tmp_path / "logs.zip"
    with zipfile.ZipFile(z, "w") as zf:
        zf.writestr("run/rank0.log", LOG)
        zf.writestr(
            "run/fr/comm_lib_trace_rank_1", open(os.path.join(DATA, "fr", "comm_lib_trace_rank_1"), "rb").read()
        )
    inc = dx.load(str(z))
    assert set(inc.sources["format"]) == {"text", "fr_pickle"}
    assert set(inc.events["seq_kind"]) == {"work", "fr"}


def test_log_dir_tree_and_dedup(tmp_path, marks):
    run = tmp_path / "run"
    (run / "attempt_0" / "0").mkdir(parents=True)
    (run / "attempt_0" / "1").mkdir(parents=True)
    (run / "combined.log").write_bytes(b"[default0]:MARK rank=0 seq=1\n[default1]:MARK rank=1 seq=1 ERR boom\n")
    (run / "attempt_0" / "0" / "stdout.log").write_bytes(b"MARK rank=0 seq=1\nMARK rank=0 seq=2\n")
    (run / "attempt_0" / "1" / "stderr.log").write_bytes(b"MARK rank=1 seq=1 ERR boom\n")
    inc = dx.load(str(run))
    assert_accounting(inc)
    assert sorted(zip(inc.events["rank"], inc.events["seq"])) == [(0, 1), (0, 2), (1, 1)]
    assert len(inc.errors) == 1
    assert inc.errors["file"][0].endswith("combined.log")  # the first file that said it
    raw = dx.load(str(run), dedup=False)
    assert len(raw.events) == 5 and len(raw.errors) == 2


def test_dedup_stays_inside_one_run(tmp_path, marks):
    for name in ("run_a", "run_b"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "combined.log").write_bytes(b"MARK rank=0 seq=1\n")
    inc = dx.load(str(tmp_path))
    assert len(inc.events) == 2


def test_forced_format(tmp_path, marks):
    f = tmp_path / "denpex_trace_rank0.jsonl"
    f.write_text('{"v":1,"event":"issue","rank":0,"pg":"0","seq":1,"op":"all_reduce"}\n')
    assert dx.load(str(f)).sources["format"][0] == "trace"
    forced = dx.load(str(f), format="text")
    assert forced.sources["format"][0] == "text" and forced.events.empty
    g = tmp_path / "odd.bin"
    g.write_bytes(b'\n\n{"v":1,"event":"issue","rank":3,"pg":"0","seq":2,"op":"all_reduce"}\n')
    assert list(dx.load(str(g), format="trace").events["rank"]) == [3]
    with pytest.raises(UsageError, match="unknown format"):
        dx.load(str(f), format="nope")


def test_missing_path_alone_is_an_input_error(tmp_path):
    missing = str(tmp_path / "nope.log")
    with pytest.raises(InputError) as e:
        dx.load(missing)
    assert missing in str(e.value) and "no such file" in str(e.value) and "\n" not in str(e.value)


def test_empty_folder_and_binary_file_are_input_errors(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="folder holds no log files"):
        dx.load(str(tmp_path / "empty"))
    b = tmp_path / "blob.dat"
    b.write_bytes(bytes(range(256)) * 64)
    with pytest.raises(InputError, match="blob.dat: binary file"):
        dx.load(str(b))


def test_bad_inputs_next_to_good_ones_become_load_error_rows(tmp_path, marks):
    good = tmp_path / "rank0.log"
    good.write_bytes(LOG)
    blob = tmp_path / "blob.dat"
    blob.write_bytes(b"\x00\x01\x02" * 5000)
    missing = str(tmp_path / "missing.log")
    with pytest.warns(RuntimeWarning, match="missing.log: no such file"):
        inc = dx.load(str(good), str(blob), missing)
    assert len(inc.events) == 2
    errs = inc.errors[inc.errors["kind"] == "load_error"]
    assert len(errs) == 2
    assert any("binary file" in m for m in errs["message"])
    src = inc.sources.set_index("file")
    assert "no such file" in src.loc[missing, "error"]
    assert src.loc[str(blob), "format"] == "binary"


def test_binary_files_met_in_a_folder_walk_are_skipped_quietly(tmp_path, marks):
    (tmp_path / "rank0.log").write_bytes(LOG)
    (tmp_path / "core.dump").write_bytes(b"\x00\x01\x02" * 5000)
    inc = dx.load(str(tmp_path))
    assert len(inc.sources) == 1 and inc.errors["kind"].tolist() == ["exception"]
    assert any("binary" in n for n in inc.notes)


def test_parallel_equals_serial(tmp_path, marks):
    for r in range(4):
        (tmp_path / f"rank{r}.log").write_bytes(LOG.replace(b"rank=0", b"rank=%d" % r) * 50)
    serial = dx.load(str(tmp_path), jobs=1)
    par = dx.load(str(tmp_path), jobs=2)
    for name in ("events", "errors", "unparsed", "sources"):
        a, b = getattr(serial, name), getattr(par, name)
        assert a.astype(str).equals(b.astype(str)), name


def test_unparsed_budget_collapses_runs(tmp_path, marks):
    f = tmp_path / "big.log"
    f.write_bytes(b"step 7 loss=1.0\n" * 100_000 + b"MARK rank=0 seq=1\n" + b"tail\n" * 5)
    inc = dx.load(str(f), unparsed_text_budget=1)
    assert_accounting(inc)
    assert len(inc.unparsed) < 10
    assert inc.unparsed["text"].isna().any() and inc.unparsed["n_lines"].max() > 1000


def test_progress_bar_only_when_asked_or_interactive(tmp_path, marks, capsys):
    f = tmp_path / "x.log"
    f.write_bytes(LOG)
    dx.load(str(f))
    assert "denpex_nb.load" not in capsys.readouterr().err
    dx.load(str(f), progress=True)
    assert "denpex_nb.load" in capsys.readouterr().err
    dx.load(str(f), progress=False)
    assert capsys.readouterr().err == ""


def test_fr_and_trace_ranks_summary(tmp_path):
    shutil.copytree(os.path.join(DATA, "fr"), tmp_path / "fr", ignore=shutil.ignore_patterns("json"))
    inc = dx.load(str(tmp_path))
    assert inc.ranks_seen == [0, 1]
    assert list(inc.ranks["last_seq_completed"]) == [5, 5]
    assert (inc.sources["lines_total"] == 0).all()


@pytest.mark.skipif(not os.path.exists("/proc/self/mem"), reason="needs Linux /proc")
def test_a_file_that_fails_to_read_is_named_in_one_line():
    with pytest.raises(InputError) as e:
        dx.load("/proc/self/mem")
    msg = str(e.value)
    assert msg.startswith("/proc/self/mem: cannot read") and "\n" not in msg


def test_reproducer_manifest_gives_exit_codes_but_not_the_answer(tmp_path):
    m = {
        "scenario": "x",
        "world_size": 2,
        "started_at": "2026-11-30T00:26:08+00:00",
        "exit_codes": [1, -6],
        "ranks": [
            {"rank": 0, "local_rank": 0, "pid": 11, "exit_code": 1, "signal": None, "ended_after_s": 2.5},
            {"rank": 1, "local_rank": 1, "pid": 12, "exit_code": -6, "signal": "SIGABRT", "ended_after_s": 1.5},
        ],
        "expected": {"class": "shape-mismatch", "culprit_ranks": [1]},
    }
    (tmp_path / "manifest.json").write_text(__import__("json").dumps(m))
    inc = dx.load(str(tmp_path))
    assert inc.sources["format"][0] == "repro_manifest"
    r = inc.ranks.set_index("rank")
    assert list(r["exit_code"]) == [1, -6] and r.loc[1, "signal"] == "SIGABRT" and r.loc[0, "pid"] == 11
    assert r.loc[1, "first_error_t"] < r.loc[0, "first_error_t"]
    assert list(inc.errors["kind"]) == ["exit", "signal"]
    assert not inc.errors["message"].str.contains("shape").any()  # 'expected' is not evidence


WATCHDOG = (
    b"[rank0]:[E1129 22:27:23.883942729 ProcessGroupNCCL.cpp:688] [Rank 0] Watchdog caught collective operation "
    b"timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE, NumelIn=8, NumelOut=8, Timeout(ms)=600000) ran for 600071 "
    b"milliseconds before timing out.\n"
)


def test_year_of_yearless_timestamps_from_mtime_or_option(tmp_path):
    f = tmp_path / "rank0.log"
    f.write_bytes(b"step 1\n" + WATCHDOG)
    t = __import__("datetime").datetime(2024, 12, 1, tzinfo=__import__("datetime").timezone.utc).timestamp()
    os.utime(f, (t, t))
    inc = dx.load(str(f))
    assert len(inc.errors) and inc.errors["t_wall"].dropna().dt.year.unique().tolist() == [2024]
    assert inc.events["seq"].tolist() == [5] and inc.events["seq_kind"].tolist() == ["work"]
    forced = dx.load(str(f), year=2021)
    assert forced.errors["t_wall"].dropna().dt.year.unique().tolist() == [2021]
    assert forced.errors["t_wall"].dropna().iloc[0].month == 11


def test_dask_runs_the_same_per_file_function(tmp_path, marks):
    pytest.importorskip("dask")
    for r in range(2):
        (tmp_path / f"rank{r}.log").write_bytes(LOG)
    serial = dx.load(str(tmp_path), jobs=1)
    on_dask = dx.load(str(tmp_path), jobs="dask")
    assert serial.events.astype(str).equals(on_dask.events.astype(str))


def test_bad_jobs_value(tmp_path, marks):
    (tmp_path / "x.log").write_bytes(LOG)
    with pytest.raises(UsageError):
        dx.load(str(tmp_path), jobs="threads")


CHILD_FAILED = """torch.distributed.elastic.multiprocessing.errors.ChildFailedError: 
============================================================
train.py FAILED
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2026-11-29_22:27:47
  host      : tern-07
  rank      : 4 (local_rank: 0)
  exitcode  : -6 (pid: 61204)
  error_file: <N/A>
  traceback : Signal 6 (SIGABRT) received by PID 61204
============================================================
"""


def test_nccl_debug_file_rows_get_the_rank_whose_pid_another_file_names(tmp_path):
    (tmp_path / "nccl.tern-07.61204.log").write_text(
        "tern-07:61204:61266 [0] NCCL INFO AllGather: opCount 3a sendbuff 0x7f0e52000000 recvbuff 0x7f0e52400000 "
        "count 6144 datatype 7 op 0 root 0 comm 0x5581c0a0 [nranks=8] stream 0x5581b7f0\n"
    )
    (tmp_path / "agent.log").write_text(CHILD_FAILED)
    inc = dx.load(str(tmp_path))
    assert set(inc.events["rank"]) == {4} and set(inc.events["op"]) == {"all_gather"}
    assert inc.ranks.set_index("rank").loc[4, "pid"] == 61204


# --- bounded loads (issue #10) -----------------------------------------------------------------------


def _zst(data: bytes) -> bytes:
    zstandard = pytest.importorskip("zstandard")
    return zstandard.ZstdCompressor(level=3).compress(data)


def test_a_corrupt_zst_next_to_a_good_file_is_a_load_error_row(tmp_path, marks):
    good = tmp_path / "rank0.log"
    good.write_bytes(LOG)
    bad = tmp_path / "x.zst"
    bad.write_bytes(os.urandom(1000))
    with pytest.warns(RuntimeWarning, match="x.zst"):
        inc = dx.load(str(good), str(bad))
    assert len(inc.events) == 2
    row = inc.errors[inc.errors["kind"] == "load_error"].iloc[0]
    assert "x.zst" in row["message"] and "corrupt zst data" in row["message"]
    assert "corrupt zst" in inc.sources.set_index("file").loc[str(bad), "error"]
    assert_accounting(inc)


@pytest.mark.parametrize("ext", ["gz", "bz2", "xz", "zst"])
def test_a_truncated_compressed_log_is_reported_with_its_lines_kept(tmp_path, marks, ext):
    pack = {"gz": gzip.compress, "bz2": bz2.compress, "xz": lzma.compress, "zst": _zst}[ext]
    blob = pack(LOG * (50000 if ext == "bz2" else 5000))  # bz2: several 900 kB blocks
    f = tmp_path / f"rank1.log.{ext}"
    f.write_bytes(blob[: len(blob) * 3 // 4])
    with pytest.warns(RuntimeWarning, match=f"rank1.log.{ext}: read stopped early: truncated {ext} stream"):
        inc = dx.load(str(f))
    assert "truncated" in inc.sources["error"][0] and "load_error" in set(inc.errors["kind"])
    assert len(inc.events) > 0
    assert_accounting(inc)


def test_the_decompression_cap_keeps_what_came_before_it(tmp_path, marks):
    f = tmp_path / "rank0.log.gz"
    f.write_bytes(gzip.compress(LOG * 10000))
    with pytest.warns(RuntimeWarning, match="rank0.log.gz: read stopped early: decompressed output reached the cap"):
        inc = dx.load(str(f), max_decompressed="100k")
    err = inc.sources["error"][0]
    assert "100 KiB" in err and "max_decompressed" in err and "DENPEX_MAX_DECOMPRESSED" in err
    assert 0 < len(inc.events) < 2 * 10000
    kept = (LOG * 10000)[: 100 << 10]
    assert int(inc.sources["lines_total"][0]) == kept.count(b"\n") + 1  # the cut last line counts too
    assert_accounting(inc)


def test_caps_from_the_environment_and_bad_caps(tmp_path, marks, monkeypatch):
    f = tmp_path / "rank0.log.gz"
    f.write_bytes(gzip.compress(LOG * 10000))
    monkeypatch.setenv("DENPEX_MAX_DECOMPRESSED", "50k")
    with pytest.warns(RuntimeWarning, match="reached the cap of 50 KiB"):
        dx.load(str(f))
    with pytest.raises(UsageError, match="max_ratio"):
        dx.load(str(f), max_ratio=0)


def test_a_gzip_bomb_stops_at_the_ratio_cap(tmp_path, marks, monkeypatch):
    import denpex_nb.ingest.sources as sources

    monkeypatch.setattr(sources, "RATIO_FLOOR", 1 << 20)
    f = tmp_path / "bomb.log.gz"
    f.write_bytes(gzip.compress((b"x" * 99 + b"\n") * 400_000))
    with pytest.warns(RuntimeWarning, match="ratio cap"):
        inc = dx.load(str(f), max_ratio=50)
    assert int(inc.sources["lines_total"][0]) <= max(1 << 20, 50 * f.stat().st_size) // 100 + 1
    assert_accounting(inc)


def test_a_long_line_is_counted_not_held(tmp_path, marks):
    f = tmp_path / "rank0.log"
    f.write_bytes(LOG + b"[rank1]: gloo " * 400_000 + b"\n" + LOG)
    inc = dx.load(str(f), line_cap="64k")
    assert int(inc.sources["lines_total"][0]) == 11 and len(inc.events) == 4
    row = inc.unparsed[inc.unparsed["n_lines"] == 0]
    assert row["line"].tolist() == [6]
    assert row["text"].tolist() == [f"line 6: {14 * 400_000 - (64 << 10)} bytes past the line cap (64 KiB) not read"]
    assert any("line cap" in n and "DENPEX_LINE_CAP" in n for n in inc.notes)
    assert_accounting(inc)


def test_files_read_whole_have_a_cap(tmp_path):
    import pickle

    fr = tmp_path / "fr" / "nccl_trace_rank_0"
    fr.parent.mkdir()
    fr.write_bytes(pickle.dumps({"version": "2.4", "pg_config": {}, "entries": [{"x": "y" * 5000}]}))
    with pytest.raises(InputError, match="larger than the cap for files read whole"):
        dx.load(str(fr), format="fr_pickle", max_structured=1000)
    trace = tmp_path / "trace" / "denpex_trace_rank0.jsonl"
    trace.parent.mkdir()
    rows = [
        {"v": 1, "event": "issue", "rank": 0, "pg": "0", "seq": i, "op": "all_reduce", "t_wall": 1.0 + i}
        for i in range(200)
    ]
    trace.write_text("".join(__import__("json").dumps(r) + "\n" for r in rows))
    with pytest.warns(RuntimeWarning, match="stopped at the cap for files read whole"):
        inc = dx.load(str(trace), max_structured=5000)
    assert int(inc.sources["lines_total"][0]) == 200
    assert 0 < int(inc.sources["lines_parsed"][0]) < 200
    assert_accounting(inc)


def test_numbers_that_do_not_fit_are_missing_with_a_note(tmp_path, marks):
    f = tmp_path / "x.log"
    f.write_bytes(b"MARK rank=3000000000 seq=1\nMARK rank=1 seq=99999999999999999999\nMARK rank=2 seq=2\n")
    inc = dx.load(str(f), strict=True)
    assert inc.events["rank"].isna().sum() == 1 and inc.events["seq"].isna().sum() == 1
    assert sorted(inc.ranks["rank"].dropna().tolist()) == [1, 2]
    assert any(n.startswith("events.rank: 1 value(s) out of range") for n in inc.notes)
    assert any(n.startswith("events.seq: 1 value(s)") for n in inc.notes)
    assert_accounting(inc)


def test_unreadable_report_mode_from_the_environment(tmp_path, monkeypatch):
    blob = tmp_path / "blob.dat"
    blob.write_bytes(b"\x00\x01\x02" * 5000)
    with pytest.raises(InputError):
        dx.load(str(blob))
    monkeypatch.setenv("DENPEX_UNREADABLE", "report")
    with pytest.warns(RuntimeWarning):
        inc = dx.load(str(blob))
    assert inc.sources["format"].tolist() == ["binary"]
    folder = tmp_path / "bins"
    folder.mkdir()
    (folder / "core.1").write_bytes(b"\x00\x01\x02" * 5000)
    inc = dx.load(str(folder))  # a folder of binary files only: what it held is listed
    assert inc.sources["format"].tolist() == ["binary"]
    monkeypatch.setenv("DENPEX_UNREADABLE", "raise")
    with pytest.raises(InputError):
        dx.load(str(folder))
