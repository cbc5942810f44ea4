"""The CLI against bad input: ``denpex-nb diagnose`` (and ``report`` on a subset) in a subprocess.

Every case must end with exit 0 (a diagnosis, ``no-evidence`` when nothing could be read) or 2 (one
line naming what is wrong), print at most one line on stderr and no traceback, and finish within
30 s under a 1.5 GB address-space limit. The CLI runs as users run it (``DENPEX_STRICT`` unset);
bombs are kept small by a decompression cap in the environment (``DENPEX_MAX_DECOMPRESSED=20M``).
"""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import os
import pickle
import resource
import shutil
import subprocess
import sys
import zipfile

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RECORDED = os.path.join(ROOT, "data", "recorded", "gloo", "rank-crash", "broken-plain-w2", "combined.log")
TIMEOUT = 30
RLIMIT_AS = 1536 << 20
GOOD = open(RECORDED, "rb").read()


def _zstd(data: bytes) -> bytes:
    zstandard = pytest.importorskip("zstandard")
    return zstandard.ZstdCompressor(level=3).compress(data)


PACK = {"gz": gzip.compress, "bz2": bz2.compress, "xz": lzma.compress, "zst": _zstd}
BOMB_TEXT = (b"x" * 99 + b"\n") * (600_000)  # 60 MB of text; the test env caps output at 20 MB


def _zip(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return buf.getvalue()


class _Evil:
    def __reduce__(self):
        return (os.system, ("echo pwned > /tmp/denpex-pwned",))


def _make(case: str, d) -> tuple[list[str], bytes | None]:
    """(arguments after the sub-command, stdin bytes or None) for ``case``, files made under ``d``."""

    def put(name: str, data: bytes) -> str:
        p = d / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
        return str(p)

    if case == "missing_path":
        return [str(d / "nope.log")], None
    if case == "missing_glob":
        return [str(d / "*.nothing")], None
    if case == "empty_file":
        return [put("empty.log", b"")], None
    if case == "empty_folder":
        (d / "empty").mkdir()
        return [str(d / "empty")], None
    if case == "nested_empty_folders":
        (d / "/".join(["n"] * 60)).mkdir(parents=True)
        return [str(d / "n")], None
    if case == "deeply_nested_log":
        put("/".join(["n"] * 60) + "/rank0.log", GOOD)
        return [str(d / "n")], None
    if case == "binary_file":
        return [put("blob.dat", os.urandom(20000))], None
    if case == "nul_file":
        return [put("nul.log", b"\x00" * 100_000)], None
    if case == "invalid_utf8":
        return [put("bad.log", b"\xff\xfe\xc3(" * 10000 + b"\n[rank0]: RuntimeError: \xed\xa0\x80 boom\n")], None
    if case == "corrupt_zst_beside_good":
        return [put("good.log", GOOD), put("x.zst", os.urandom(1000))], None
    if case == "truncated_zst_tiny":
        return [put("t.zst", _zstd(GOOD * 50)[:500])], None
    if case == "zeros_gzip_bomb":
        return [put("zeros.log.gz", gzip.compress(b"\x00" * (50 << 20)))], None
    if case.startswith(("corrupt_", "truncated_")):
        kind = case.split("_", 1)[1]
        if kind == "zip":
            blob = _zip({"rank0.log": GOOD})
            data = os.urandom(2000) if case.startswith("corrupt") else blob[: len(blob) // 2]
            return [put(f"logs.{kind}", data)], None
        blob = PACK[kind](GOOD * 50)
        data = os.urandom(1000) if case.startswith("corrupt") else blob[: len(blob) // 2]
        return [put(f"rank0.log.{kind}", data)], None
    if case.endswith("_bomb"):
        kind = case.split("_")[0]
        if kind == "zip":
            return [put("bomb.zip", _zip({"rank0.log": BOMB_TEXT}))], None
        return [put(f"bomb.log.{kind}", PACK[kind](BOMB_TEXT))], None
    if case == "zip_in_zip":
        return [put("outer.zip", _zip({"inner.zip": _zip({"rank0.log": GOOD})}))], None
    if case == "zip_many_members":
        return [put("many.zip", _zip({f"m/{i}.log": b"line\n" for i in range(2000)}))], None
    if case == "fifo_named":
        p = d / "pipe.log"
        os.mkfifo(p)
        return [str(p)], None
    if case == "fifo_in_folder":
        os.mkfifo(d / "pipe.log")
        put("rank0.log", GOOD)
        return [str(d)], None
    if case == "huge_single_line":
        return [put("long.log", b"[rank1]: gloo " * 1_500_000 + b"\n" + GOOD)], None
    if case == "huge_line_no_newline":
        return [put("long2.log", b"[rank0]: RuntimeError: " + b"y" * (20 << 20))], None
    if case == "cr_only_line_endings":
        return [put("cr.log", GOOD.replace(b"\n", b"\r") * 200)], None
    if case == "symlink_loop":
        os.symlink(d / "b", d / "a")
        os.symlink(d / "a", d / "b")
        return [str(d / "a")], None
    if case == "symlink_loop_in_folder":
        (d / "f").mkdir()
        os.symlink(d / "f", d / "f" / "loop")
        os.symlink(d / "f" / "x", d / "f" / "y")
        os.symlink(d / "f" / "y", d / "f" / "x")
        put("f/rank0.log", GOOD)
        return [str(d / "f")], None
    if case == "dangling_symlink":
        os.symlink(d / "gone", d / "rank0.log")
        return [str(d / "rank0.log")], None
    if case == "folder_named_like_a_file":
        (d / "rank0.log").mkdir()
        return [str(d / "rank0.log")], None
    if case == "stdin_empty":
        return ["-"], b""
    if case == "stdin_binary":
        return ["-"], os.urandom(5000) + b"\x00" * 100
    if case == "unknown_flag":
        return [put("good.log", GOOD), "--frobnicate"], None
    if case == "bad_format":
        return [put("good.log", GOOD), "--format", "nonsense"], None
    if case == "year_99999":
        return [put("good.log", GOOD), "--year", "99999"], None
    if case == "year_negative":
        return [put("good.log", GOOD), "--year", "-5"], None
    if case == "year_not_a_number":
        return [put("good.log", GOOD), "--year", "abc"], None
    if case == "year_huge":
        return [put("good.log", GOOD), "--year", str(10**20)], None
    if case == "no_arguments":
        return [], None
    if case == "malicious_pickle":
        return [put("fr/comm_lib_trace_rank_0", pickle.dumps({"version": "2.4", "entries": [_Evil()]}))], None
    if case == "deep_json":
        return [put("fr/comm_lib_trace_rank_1.json", b"[" * 200_000 + b"]" * 200_000)], None
    if case == "device_named":
        return ["/dev/zero"], None
    if case == "out_of_range_numbers":
        return [
            put(
                "big.log",
                b"[rank2147483648]: RuntimeError: boom\n[rank0]:[E1 ProcessGroupNCCL.cpp:9] Watchdog "
                b"caught collective operation timeout: WorkNCCL(SeqNum=99999999999999999999, "
                b"OpType=ALLREDUCE, NumelIn=-1, NumelOut=1e309, Timeout(ms)=1) ran for 1 milliseconds\n"
                b"h:99999999999999999999:1 [0] NCCL INFO comm 0x1 rank 2147483647 nranks 4294967296 "
                b"cudaDev 0 busId 1 - Init COMPLETE\n",
            )
        ], None
    if case == "everything_bad_together":
        return [
            put("good.log", GOOD),
            put("a.gz", os.urandom(300)),
            put("b.bz2", PACK["bz2"](GOOD)[:100]),
            put("c.xz", b"\xfd7zXZ\x00garbage"),
            put("d.zip", b"PK\x03\x04broken"),
            put("e.bin", os.urandom(999)),
            str(d / "missing.log"),
        ], None
    if case == "json_flag_binary":
        return [put("blob.dat", os.urandom(3000)), "--json"], None
    raise KeyError(case)


CASES = [
    "missing_path",
    "missing_glob",
    "empty_file",
    "empty_folder",
    "nested_empty_folders",
    "deeply_nested_log",
    "binary_file",
    "nul_file",
    "invalid_utf8",
    "corrupt_gz",
    "truncated_gz",
    "corrupt_bz2",
    "truncated_bz2",
    "corrupt_xz",
    "truncated_xz",
    "corrupt_zst",
    "truncated_zst",
    "truncated_zst_tiny",
    "corrupt_zip",
    "truncated_zip",
    "corrupt_zst_beside_good",
    "gz_bomb",
    "zst_bomb",
    "bz2_bomb",
    "xz_bomb",
    "zip_bomb",
    "zeros_gzip_bomb",
    "zip_in_zip",
    "zip_many_members",
    "fifo_named",
    "fifo_in_folder",
    "huge_single_line",
    "huge_line_no_newline",
    "cr_only_line_endings",
    "symlink_loop",
    "symlink_loop_in_folder",
    "dangling_symlink",
    "folder_named_like_a_file",
    "stdin_empty",
    "stdin_binary",
    "unknown_flag",
    "bad_format",
    "year_99999",
    "year_negative",
    "year_not_a_number",
    "year_huge",
    "no_arguments",
    "malicious_pickle",
    "deep_json",
    "device_named",
    "out_of_range_numbers",
    "everything_bad_together",
    "json_flag_binary",
]
#: report takes ~5-10 s per run: a subset, one per kind of trouble
REPORT_CASES = [
    "missing_path",
    "empty_folder",
    "binary_file",
    "stdin_empty",
    "corrupt_zst_beside_good",
    "gz_bomb",
    "huge_single_line",
    "malicious_pickle",
]
#: exit 2 is required here (a path names nothing, bad arguments); elsewhere 0 or 2 is fine
MUST_EXIT_2 = {
    "missing_path",
    "missing_glob",
    "empty_folder",
    "nested_empty_folders",
    "unknown_flag",
    "bad_format",
    "year_not_a_number",
    "year_99999",
    "year_negative",
    "year_huge",
    "no_arguments",
    "symlink_loop",
    "dangling_symlink",
}


def _limit():
    resource.setrlimit(resource.RLIMIT_AS, (RLIMIT_AS, RLIMIT_AS))


def _run(command: str, case: str, tmp_path) -> subprocess.CompletedProcess:
    args, stdin = _make(case, tmp_path)
    if command == "report":
        args = args + ["-o", str(tmp_path / "out" / "report.html")]
    # this checkout's code, whatever the environment has installed
    path = os.pathsep.join([ROOT] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else []))
    env = dict(os.environ, DENPEX_MAX_DECOMPRESSED="20M", PYTHONWARNINGS="ignore", PYTHONPATH=path)
    env.pop("DENPEX_STRICT", None)
    try:
        return subprocess.run(
            [sys.executable, "-m", "denpex_nb.cli", command, *args],
            input=stdin or b"",
            capture_output=True,
            timeout=TIMEOUT if command == "diagnose" else 120,
            env=env,
            cwd=str(tmp_path),
            preexec_fn=_limit,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"{command} {case}: no answer within the timeout (a hang)")


def _check(command: str, case: str, run: subprocess.CompletedProcess) -> None:
    err = run.stderr.decode("utf-8", "replace")
    lines = [ln for ln in err.splitlines() if ln.strip()]
    where = f"{command} {case}: exit {run.returncode}, stderr {err[-1500:]!r}"
    assert run.returncode in (0, 2), where
    assert "Traceback" not in err, where
    assert len(lines) <= 1, where
    if case in MUST_EXIT_2:
        assert run.returncode == 2 and lines and lines[0].startswith("denpex-nb: error:"), where
    if run.returncode == 0 and command == "diagnose" and case not in ("unknown_flag",):
        assert run.stdout.strip(), where


@pytest.mark.parametrize("case", CASES)
def test_diagnose_bad_input(case, tmp_path):
    if case.startswith("fifo") and not hasattr(os, "mkfifo"):
        pytest.skip("no FIFOs here")
    run = _run("diagnose", case, tmp_path)
    _check("diagnose", case, run)
    assert not os.path.exists("/tmp/denpex-pwned")


@pytest.mark.parametrize("case", REPORT_CASES)
def test_report_bad_input(case, tmp_path):
    pytest.importorskip("papermill")
    run = _run("report", case, tmp_path)
    _check("report", case, run)
    if run.returncode == 0:
        assert (tmp_path / "out" / "report.html").exists()
        assert b"verdict:" in run.stdout
    assert not os.path.exists("/tmp/denpex-pwned")


def test_the_campaign_is_big_enough():
    assert len(CASES) >= 40 and set(REPORT_CASES) <= set(CASES)
    assert shutil.which("true")  # subprocesses work here


def test_inputs_that_cannot_be_read_are_named_and_the_verdict_is_partial(tmp_path):
    """A link to a device and a file whose read fails (``/proc/self/mem``: EIO) beside a good log: the
    diagnosis (text and JSON) names both as not read, says the verdict is partial, and the rank in
    the unreadable file's name does not count as seen."""
    import json

    (tmp_path / "good.log").write_bytes(GOOD)
    os.symlink("/dev/zero", tmp_path / "rank_5.log")
    os.symlink("/proc/self/mem", tmp_path / "rank_6.log")
    text = _run_args("diagnose", [str(tmp_path)], tmp_path)
    assert text.returncode == 0, text.stderr
    out = text.stdout.decode()
    assert "partial verdict: 2 input(s) could not be read" in out
    assert "rank_5.log" in out and "rank_6.log" in out
    js = _run_args("diagnose", [str(tmp_path), "--json"], tmp_path)
    d = json.loads(js.stdout)
    assert d["partial"] is True and sorted(os.path.basename(x["file"]) for x in d["not_read"]) == [
        "rank_5.log",
        "rank_6.log",
    ]
    assert all(x["problem"] for x in d["not_read"]) and 5 not in d["ranks_seen"] and 6 not in d["ranks_seen"]
    alone = json.loads(_run_args("diagnose", [str(tmp_path / "good.log"), "--json"], tmp_path).stdout)
    assert alone["partial"] is False and alone["not_read"] == [] and alone["verdict"] == d["verdict"]


def test_report_output_that_is_a_folder_is_one_line_exit_2(tmp_path):
    (tmp_path / "good.log").write_bytes(GOOD)
    (tmp_path / "out").mkdir()
    run = _run_args("report", [str(tmp_path / "good.log"), "-o", str(tmp_path / "out")], tmp_path)
    err = run.stderr.decode()
    assert run.returncode == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert "is a folder" in err


def test_a_report_write_that_fails_is_one_line():
    """A full device (``/dev/full``: ENOSPC) while writing the report: a DenpexError naming the file."""
    from pathlib import Path

    from denpex_nb.errors import DenpexError
    from denpex_nb.report.pipeline import write_output

    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full here")
    with pytest.raises(DenpexError) as e:
        write_output(Path("/dev/full"), lambda p: p.write_text("x" * 100_000))
    assert "/dev/full" in str(e.value) and "\n" not in str(e.value)


def _run_args(command: str, args: list[str], tmp_path) -> subprocess.CompletedProcess:
    path = os.pathsep.join([ROOT] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else []))
    env = dict(os.environ, PYTHONWARNINGS="ignore", PYTHONPATH=path)
    env.pop("DENPEX_STRICT", None)
    return subprocess.run(
        [sys.executable, "-m", "denpex_nb.cli", command, *args],
        capture_output=True,
        timeout=120,
        env=env,
        cwd=str(tmp_path),
        preexec_fn=_limit,
    )
