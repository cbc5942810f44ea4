"""Path expansion, rank hints from names, run roots, compressed streams."""
from __future__ import annotations

import bz2
import gzip
import io
import lzma
import os
import zipfile

import pytest

from denpex_nb.ingest.sources import FileSpec, expand, open_stream, rank_hints, run_root


@pytest.mark.parametrize("name, want", [
    ("rank3.log", 3), ("logs/rank_12.txt", 12), ("fr/comm_lib_trace_rank_3", 3), ("nccl_trace_rank_0", 0),
    ("trace/denpex_trace_rank3.jsonl", 3), ("trace_5", 5), ("worker-3.log", 3), ("out/7.log", 7),
    ("train_rank_2.log.gz", 2), ("job.log", None), ("step3.log", None), ("frank7.log", None),
])
def test_rank_hint_from_file_name(name, want):
    assert rank_hints(name).get("rank_hint") == want


def test_torchrun_log_dir_gives_local_rank_only():
    h = rank_hints("logs/4817_ab12cd/attempt_0/3/stderr.log")
    assert h == {"local_rank_hint": 3}


def test_nccl_debug_file_gives_pid_and_host():
    h = rank_hints("nccl.tern-07.61204.log")
    assert h == {"pid_hint": 61204, "host_hint": "tern-07"}


def test_run_root_groups_one_runs_files(tmp_path):
    out = str(tmp_path / "run")
    roots = {run_root(os.path.join(out, p)) for p in
             ("combined.log", "attempt_0/1/stdout.log", "fr/comm_lib_trace_rank_1", "trace/denpex_trace_rank1.jsonl")}
    assert roots == {out}


def test_expand_folders_globs_and_problems(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "x.log").write_text("x\n")
    (tmp_path / "a" / "manifest.json").write_text("{}")
    (tmp_path / "a" / "plot.png").write_bytes(b"\x89PNG")
    (tmp_path / "a" / "__pycache__").mkdir()
    (tmp_path / "a" / "__pycache__" / "m.log").write_text("no")
    (tmp_path / "b.txt").write_text("b\n")
    (tmp_path / "empty").mkdir()
    specs, problems = expand([str(tmp_path / "a"), str(tmp_path / "*.txt"), str(tmp_path / "nope.log"),
                              str(tmp_path / "empty"), str(tmp_path / "z*.gz")])
    # manifest.json is read (a reproducer's manifest reader sniffs it); pictures and caches are not
    assert [os.path.basename(s.display) for s in specs] == ["manifest.json", "x.log", "b.txt"]
    assert [s.explicit for s in specs] == [False, False, True]
    msgs = [p.one_line() for p in problems]
    assert any("nope.log: no such file or folder" in m for m in msgs)
    assert any("empty: folder holds no log files" in m for m in msgs)
    assert any("z*.gz: no file matches" in m for m in msgs)


def test_the_same_file_twice_is_read_once(tmp_path):
    f = tmp_path / "x.log"
    f.write_text("x\n")
    specs, _ = expand([str(f), str(tmp_path)])
    assert len(specs) == 1


def test_stdin_is_read_into_the_spec():
    specs, problems = expand(["-"], stdin=io.BytesIO(b"hello\n"))
    assert not problems and specs[0].display == "<stdin>" and specs[0].data == b"hello\n"


@pytest.mark.parametrize("ext, opener", [(".gz", gzip.compress), (".bz2", bz2.compress), (".xz", lzma.compress)])
def test_open_stream_decompresses(tmp_path, ext, opener):
    f = tmp_path / ("rank1.log" + ext)
    f.write_bytes(opener(b"line 1\nline 2\n"))
    (spec,), _ = expand([str(f)])
    assert spec.compression and spec.rank_hint == 1
    with open_stream(spec) as s:
        assert s.read() == b"line 1\nline 2\n"


def test_open_stream_zstd(tmp_path):
    zstd = pytest.importorskip("zstandard")
    f = tmp_path / "x.log.zst"
    f.write_bytes(zstd.ZstdCompressor().compress(b"a\n" * 1000))
    (spec,), _ = expand([str(f)])
    with open_stream(spec) as s:
        assert s.read() == b"a\n" * 1000


def test_zip_members_become_specs_with_hints(tmp_path):
    z = tmp_path / "logs.zip"
    with zipfile.ZipFile(z, "w") as zf:
        zf.writestr("run/attempt_0/1/stdout.log", "hello\n")
        zf.writestr("run/rank0.log.gz", gzip.compress(b"zipped gz\n"))
        zf.writestr("run/manifest.json", "{}")
    specs, problems = expand([str(z)])
    assert not problems
    assert [s.member for s in specs] == ["run/attempt_0/1/stdout.log", "run/rank0.log.gz", "run/manifest.json"]
    assert specs[0].local_rank_hint == 1 and specs[1].rank_hint == 0
    with open_stream(specs[1]) as s:
        assert s.read() == b"zipped gz\n"


def test_bad_zip_is_a_problem(tmp_path):
    z = tmp_path / "broken.zip"
    z.write_bytes(b"PK\x03\x04 not really")
    specs, problems = expand([str(z)])
    assert not specs and "cannot read zip archive" in problems[0].problem


def test_specs_pickle():
    import pickle

    spec = FileSpec(display="x", path="/x", rank_hint=1)
    assert pickle.loads(pickle.dumps(spec)) == spec
