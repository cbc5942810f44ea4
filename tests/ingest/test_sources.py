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


@pytest.mark.parametrize(
    "name, want",
    [
        ("rank3.log", 3),
        ("logs/rank_12.txt", 12),
        ("fr/comm_lib_trace_rank_3", 3),
        ("nccl_trace_rank_0", 0),
        ("trace/denpex_trace_rank3.jsonl", 3),
        ("trace_5", 5),
        ("worker-3.log", 3),
        ("out/7.log", 7),
        ("train_rank_2.log.gz", 2),
        ("job.log", None),
        ("step3.log", None),
        ("frank7.log", None),
    ],
)
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
    roots = {
        run_root(os.path.join(out, p))
        for p in (
            "combined.log",
            "attempt_0/1/stdout.log",
            "fr/comm_lib_trace_rank_1",
            "trace/denpex_trace_rank1.jsonl",
        )
    }
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
    specs, problems = expand(
        [
            str(tmp_path / "a"),
            str(tmp_path / "*.txt"),
            str(tmp_path / "nope.log"),
            str(tmp_path / "empty"),
            str(tmp_path / "z*.gz"),
        ]
    )
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


# --- special files and permissions (issue #10) -------------------------------------------------


def test_a_fifo_is_never_opened_in_a_folder_or_named(tmp_path):
    import os
    import subprocess
    import sys

    if not hasattr(os, "mkfifo"):
        pytest.skip("no FIFOs on this platform")
    run = tmp_path / "run"
    run.mkdir()
    (run / "rank0.log").write_text(
        "[rank0]:[E1201 10:00:00.000000000 ProcessGroupNCCL.cpp:616] [Rank 0] Watchdog "
        "caught collective operation timeout: WorkNCCL(SeqNum=3, OpType=ALLREDUCE, "
        "NumelIn=8, NumelOut=8, Timeout(ms)=600000) ran for 600010 milliseconds before "
        "timing out.\n"
    )
    os.mkfifo(run / "pipe.log")
    code = (
        "import denpex_nb as dx, warnings, sys; warnings.simplefilter('ignore'); "
        f"i = dx.load({str(run)!r}); s = i.sources.set_index('file'); "
        f"print(s.loc[{str(run / 'pipe.log')!r}, 'error']); print(len(i.errors))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "FIFO" in out.stdout and "skipped" in out.stdout
    named = subprocess.run(
        [sys.executable, "-m", "denpex_nb.cli", "diagnose", str(run / "pipe.log")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert named.returncode == 0 and "no-evidence" in named.stdout and "FIFO" in named.stdout, named
    lib = subprocess.run(
        [sys.executable, "-c", f"import denpex_nb as dx; dx.load({str(run / 'pipe.log')!r})"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert lib.returncode == 1 and "InputError" in lib.stderr and "FIFO" in lib.stderr


def _without_read_override(argv: list[str]):
    """Run argv with root's read override dropped (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH), so the
    permission paths are exercised as root too; as a normal user, as it is."""
    import os
    import shutil
    import subprocess

    if hasattr(os, "geteuid") and os.geteuid() == 0:
        capsh = shutil.which("capsh")
        if capsh is None:
            pytest.skip("root without capsh cannot drop its read override")
        import shlex

        argv = [capsh, "--drop=cap_dac_override,cap_dac_read_search", "--", "-c", shlex.join(argv)]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120)


def test_unreadable_file_and_folder_are_reported_even_as_root():
    """load() raises one line; diagnose says no-evidence naming what it could not read (exit 0)."""
    import shutil
    import sys
    import tempfile
    from pathlib import Path

    # a short folder, not pytest's tmp_path: the lines compared here quote the path whole
    base = Path(tempfile.mkdtemp(prefix="dx-"))
    f = base / "x.log"
    f.write_text("[rank0]: RuntimeError: boom\n")
    f.chmod(0)
    locked = base / "locked"
    locked.mkdir()
    (locked / "rank0.log").write_text("[rank0]: RuntimeError: boom\n")
    locked.chmod(0)
    try:
        for path, what in ((f, "permission denied"), (locked, "cannot list this folder: permission denied")):
            code = f"import denpex_nb as dx; dx.load({str(path)!r})"
            lib = _without_read_override([sys.executable, "-c", code])
            assert lib.returncode == 1 and f"InputError: {path}: {what}" in lib.stderr, lib.stderr
            out = _without_read_override([sys.executable, "-m", "denpex_nb.cli", "diagnose", str(path), "--json"])
            assert out.returncode == 0 and out.stderr == "", (out.stdout, out.stderr)
            import json

            d = json.loads(out.stdout)
            assert d["verdict"] == "no-evidence" and what in d["findings"][0]["summary"], d["findings"][0]
    finally:
        locked.chmod(0o755)
        f.chmod(0o644)
        shutil.rmtree(base)


# --- bounded decompression (issue #10) --------------------------------------------------------------

from denpex_nb.ingest.sources import CapReached, ReadStopped, StreamError, human, parse_size, read_fully, resolve_limits  # noqa: E402

TEXT = b"".join(b"[rank%d]: step %d loss=2.31\n" % (i % 4, i) for i in range(20000))


def _zstd(data: bytes) -> bytes:
    zstandard = pytest.importorskip("zstandard")
    return zstandard.ZstdCompressor(level=3).compress(data)


COMPRESSORS = {"gz": lambda d: gzip.compress(d, mtime=0), "bz2": bz2.compress, "xz": lzma.compress, "zst": _zstd}


def _read_all(spec: FileSpec, limits=None) -> tuple[bytes, BaseException | None]:
    got = []
    try:
        with open_stream(spec, limits) as s:
            while True:
                c = read_fully(s, 1 << 16)
                if not c:
                    return b"".join(got), None
                got.append(c)
    except ReadStopped as e:  # what stopped the read, with the bytes that came before it
        got.append(e.partial)
        return b"".join(got), e.cause


def _spec(tmp_path, kind: str, blob: bytes) -> FileSpec:
    p = tmp_path / f"x.log.{kind}"
    p.write_bytes(blob)
    return FileSpec(display=str(p), path=str(p), compression=kind, size=len(blob))


@pytest.mark.parametrize("kind", sorted(COMPRESSORS))
def test_truncated_streams_are_always_reported_and_keep_what_came(tmp_path, kind):
    blob = COMPRESSORS[kind](TEXT)
    for cut in (len(blob) // 2, len(blob) - 1, 30):
        data, err = _read_all(_spec(tmp_path, kind, blob[:cut]))
        assert isinstance(err, StreamError) and "truncated" in str(err), (kind, cut, err)
        assert TEXT.startswith(data)  # nothing invented, what came is kept
    if kind in ("gz", "xz", "zst"):  # block-wise formats hand over the bytes before the cut
        data, _ = _read_all(_spec(tmp_path, kind, blob[: len(blob) - 1]))
        assert len(data) > len(TEXT) // 2


@pytest.mark.parametrize("kind", sorted(COMPRESSORS))
def test_corrupt_streams_are_one_stream_error(tmp_path, kind):
    data, err = _read_all(_spec(tmp_path, kind, os.urandom(1000)))
    assert isinstance(err, StreamError) and str(err).startswith(("corrupt", "truncated")), err


@pytest.mark.parametrize("kind", sorted(COMPRESSORS))
def test_whole_streams_read_back_exactly(tmp_path, kind):
    data, err = _read_all(_spec(tmp_path, kind, COMPRESSORS[kind](TEXT)))
    assert err is None and data == TEXT


def test_zstd_frames_concatenated_skippable_and_checksummed(tmp_path):
    zstandard = pytest.importorskip("zstandard")
    a = zstandard.ZstdCompressor(level=1, write_checksum=True).compress(TEXT[:1000])
    b = zstandard.ZstdCompressor(level=1, write_content_size=False).compress(TEXT[1000:])
    skippable = (0x184D2A50).to_bytes(4, "little") + (3).to_bytes(4, "little") + b"abc"
    data, err = _read_all(_spec(tmp_path, "zst", a + skippable + b))
    assert err is None and data == TEXT
    data, err = _read_all(_spec(tmp_path, "zst", a + b[:-2]))
    assert isinstance(err, StreamError) and "truncated" in str(err)
    data, err = _read_all(_spec(tmp_path, "zst", b""))
    assert err is None and data == b""


@pytest.mark.parametrize("kind", sorted(COMPRESSORS))
def test_the_absolute_cap_stops_the_output_and_says_how_to_raise_it(tmp_path, kind):
    limits = resolve_limits({"max_decompressed": 100_000})
    data, err = _read_all(_spec(tmp_path, kind, COMPRESSORS[kind](TEXT)), limits)
    assert isinstance(err, CapReached) and data == TEXT[:100_000]
    msg = str(err)
    assert "\n" not in msg and "97.7 KiB" in msg and "max_decompressed" in msg and "DENPEX_MAX_DECOMPRESSED" in msg


def test_the_ratio_cap_counts_from_the_compressed_size(tmp_path, monkeypatch):
    import denpex_nb.ingest.sources as sources

    monkeypatch.setattr(sources, "RATIO_FLOOR", 0)
    zeros = b"0" * (4 << 20)  # a small bomb: ~1000x with gzip
    blob = gzip.compress(zeros)
    data, err = _read_all(_spec(tmp_path, "gz", blob), resolve_limits({"max_ratio": 10}))
    assert isinstance(err, CapReached) and len(data) == 10 * len(blob)
    assert "ratio cap" in str(err) and "DENPEX_MAX_RATIO" in str(err)
    # below the floor a high ratio is harmless
    monkeypatch.setattr(sources, "RATIO_FLOOR", 64 << 20)
    data, err = _read_all(_spec(tmp_path, "gz", blob), resolve_limits({"max_ratio": 10}))
    assert err is None and data == zeros


def test_zip_members_are_capped_and_corrupt_members_reported(tmp_path):
    p = tmp_path / "logs.zip"
    with zipfile.ZipFile(p, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("rank0.log", TEXT)
    spec = expand([str(p)])[0][0]
    data, err = _read_all(spec, resolve_limits({"max_decompressed": 5000}))
    assert isinstance(err, CapReached) and data == TEXT[:5000]
    raw = bytearray(p.read_bytes())
    at = raw.find(b"rank0.log") + 200  # inside the member's deflated data
    raw[at : at + 64] = os.urandom(64)
    p.write_bytes(bytes(raw))
    data, err = _read_all(expand([str(p)])[0][0])
    assert isinstance(err, StreamError)


def test_limits_from_options_environment_and_defaults(monkeypatch):
    monkeypatch.delenv("DENPEX_MAX_DECOMPRESSED", raising=False)
    d = resolve_limits()
    assert d["max_decompressed"] == 8 << 30 and d["max_ratio"] == 2000 and d["line_cap"] == 1 << 20
    assert d["max_structured"] == 512 << 20
    monkeypatch.setenv("DENPEX_MAX_DECOMPRESSED", "64M")
    monkeypatch.setenv("DENPEX_LINE_CAP", "4k")
    d = resolve_limits()
    assert d["max_decompressed"] == 64 << 20 and d["line_cap"] == 4096
    assert resolve_limits({"max_decompressed": 10})["max_decompressed"] == 10  # options win
    for bad in ("0", "-5", "lots"):
        with pytest.raises(ValueError):
            resolve_limits({"max_ratio": bad})
    assert parse_size("1.5k") == 1536 and human(8 << 30) == "8 GiB" and human(1500) == "1.5 KiB"


def test_big_stdin_is_spooled_to_a_temporary_file(monkeypatch):
    import denpex_nb.ingest.sources as sources

    monkeypatch.setattr(sources, "STDIN_MEMORY", 1000)
    specs, _ = expand(["-"], stdin=io.BytesIO(TEXT))
    spec = specs[0]
    try:
        assert spec.data is None and spec.temp and os.path.getsize(spec.path) == len(TEXT) == spec.size
        with open_stream(spec) as s:
            assert read_fully(s, len(TEXT) + 1) == TEXT
    finally:
        os.unlink(spec.path)
    specs, _ = expand(["-"], stdin=io.BytesIO(b"small\n"))
    assert specs[0].data == b"small\n" and not specs[0].temp


# --- compression detected by content (issue #11) ----------------------------------------------------

from denpex_nb.ingest.sources import detect_compression, sniff_compression  # noqa: E402


@pytest.mark.parametrize("kind", sorted(COMPRESSORS))
def test_compression_is_recognised_by_content_whatever_the_name(tmp_path, kind):
    blob = COMPRESSORS[kind](TEXT)
    assert sniff_compression(blob[:16]) == kind
    for name in ("rank2.log", "rank2.log.gz" if kind != "gz" else "rank2.log.xz", "comm_lib_trace_rank_2"):
        p = tmp_path / name
        p.write_bytes(blob)
        (spec,), _ = expand([str(p)])
        assert spec.rank_hint == 2
        data, err = _read_all(spec)
        assert err is None and data == TEXT, (kind, name, err)


def test_a_plain_log_with_a_compressed_name_reads_as_text(tmp_path):
    p = tmp_path / "rank0.log.gz"  # gunzip'ed by hand, name kept
    p.write_bytes(TEXT[:5000])
    (spec,), _ = expand([str(p)])
    data, err = _read_all(spec)
    assert err is None and data == TEXT[:5000]
    # binary garbage under a compressed name is still that format's corruption, reported as such
    assert detect_compression(b"\x00\xff" * 32, "gz") == "gz"
    assert detect_compression(b"", "zst") is None and detect_compression(b"[rank0]: x\n", "gz") is None


def test_a_truncated_stream_without_a_telling_name_is_still_reported(tmp_path):
    blob = COMPRESSORS["gz"](TEXT)
    p = tmp_path / "rank1.log"
    p.write_bytes(blob[: len(blob) // 2])
    (spec,), _ = expand([str(p)])
    data, err = _read_all(spec)
    assert isinstance(err, StreamError) and "truncated gz stream" in str(err) and TEXT.startswith(data) and data


def test_a_zip_archive_is_recognised_by_content(tmp_path):
    p = tmp_path / "evidence.bin"
    with zipfile.ZipFile(p, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("run/rank0.log", TEXT[:3000])
        zf.writestr("run/rank1.log.zst", _zstd(TEXT[:4000]))
    specs, problems = expand([str(p)])
    assert not problems and [s.member for s in specs] == ["run/rank0.log", "run/rank1.log.zst"]
    assert [s.rank_hint for s in specs] == [0, 1] and specs[1].name == "rank1.log"
    assert _read_all(specs[0]) == (TEXT[:3000], None) and _read_all(specs[1]) == (TEXT[:4000], None)
    # a member that is itself gzip without saying so is decompressed too (and bounded)
    with zipfile.ZipFile(p, "w") as zf:
        zf.writestr("rank2.log", gzip.compress(TEXT, mtime=0))
    (spec,), _ = expand([str(p)])
    data, err = _read_all(spec, resolve_limits({"max_decompressed": 1000}))
    assert isinstance(err, CapReached) and data == TEXT[:1000]


def test_a_glob_skips_special_files(tmp_path):
    os.mkfifo(tmp_path / "pipe.log")
    (tmp_path / "a.log").write_text("a\n")
    specs, problems = expand([str(tmp_path / "*.log")])
    assert [os.path.basename(s.path) for s in specs] == ["a.log"]
    assert any("FIFO" in p.problem for p in problems)


def test_url_specs_keep_the_url_and_options_and_pickle():
    import pickle

    spec = FileSpec(
        display="s3://b/run/fr/comm_lib_trace_rank_3",
        path="s3://b/run/fr/comm_lib_trace_rank_3",
        storage_options={"anon": True},
    )
    assert spec.remote and not FileSpec(display="x", path="/x").remote
    assert pickle.loads(pickle.dumps(spec)) == spec
    assert run_root(spec.path) == "s3://b/run" and run_root("s3://b/run/attempt_0/1/stdout.log") == "s3://b/run"
    assert rank_hints(spec.path)["rank_hint"] == 3


def test_read_fully_reads_past_its_first_request_and_stops_at_n(tmp_path):
    """It asks for READ_FIRST bytes, then twice as much each time (a raw read(n) allocates n bytes
    first, so asking for the whole cap cost more than reading a small dump): a file several times
    READ_FIRST comes back whole, and never more than ``n``."""
    from denpex_nb.ingest import sources

    data = os.urandom(3 * sources.READ_FIRST + 12345)
    path = tmp_path / "big.bin"
    path.write_bytes(data)
    with open(path, "rb", buffering=0) as f:
        assert read_fully(f, 1 << 30) == data
    with open(path, "rb", buffering=0) as f:
        assert read_fully(f, sources.READ_FIRST + 7) == data[: sources.READ_FIRST + 7]
        assert read_fully(f, 1 << 30) == data[sources.READ_FIRST + 7 :]


def test_a_walked_files_first_bytes_are_read_once_and_decide_zip_and_pickle(tmp_path, monkeypatch):
    """Each file of a folder is opened once while the folder is expanded: its first bytes say
    whether it is a zip archive (expanded into its members whatever its name) and, kept on the spec,
    whether it starts like a pickle (the Flight Recorder reader's choice of decoder) without a second
    open. Wrongly: a renamed archive read as one text file, or a dump folder opened twice a file."""
    import pickle

    from denpex_nb.ingest import flight_recorder

    with zipfile.ZipFile(tmp_path / "logs.bin", "w") as zf:
        zf.writestr("rank_1.log", "x\n")
    (tmp_path / "rank_0.log").write_text("plain\n")
    (tmp_path / "rank_2").write_bytes(pickle.dumps({"entries": []}, protocol=4))
    (tmp_path / "empty.log").write_bytes(b"")
    specs, problems = expand([str(tmp_path)])
    by = {os.path.basename(s.member or s.path): s for s in specs}
    assert not problems and set(by) == {"rank_0.log", "rank_1.log", "rank_2", "empty.log"}
    assert by["rank_1.log"].member == "rank_1.log"  # the archive found by content
    assert by["rank_0.log"].magic == b"plai" and by["empty.log"].magic == b""
    opened = []
    real_open = open
    monkeypatch.setattr("builtins.open", lambda *a, **k: opened.append(a[0]) or real_open(*a, **k))
    sizes = list(flight_recorder._pickle_sizes(specs))
    assert sizes == [by["rank_2"].size] and not opened
