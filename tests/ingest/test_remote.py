"""Evidence in object storage: recorded runs uploaded to a real S3-compatible server (moto's server
mode, IAM enforced; :mod:`tests.ingest.s3server`) and loaded through s3fs like a local folder, and
every bad path (unreachable store, missing bucket or object, a denied object, a truncated object)
as a one-line error or a reported file with the rest loaded."""

from __future__ import annotations

import gzip
import io
import os
import subprocess
import sys
import time
import warnings
import zipfile
from pathlib import Path

import pandas as pd
import pytest

import denpex_nb as dx
from denpex_nb.errors import InputError

from .s3server import BUCKET, DENIED_KEY, free_port  # the s3_server fixture comes from tests/ingest/conftest.py

pytest.importorskip("s3fs")
pytest.importorskip("moto")

ROOT = Path(__file__).resolve().parents[2]
RUN = ROOT / "data" / "recorded" / "gloo" / "skipped-collective" / "broken-detail-w4"
CRASH = ROOT / "data" / "recorded" / "gloo" / "rank-crash" / "broken-plain-w4"
FRAMES = ("events", "errors", "ranks", "progress", "unparsed")


def _zstd(data: bytes) -> bytes:
    zstandard = pytest.importorskip("zstandard")
    return zstandard.ZstdCompressor(level=3).compress(data)


@pytest.fixture(scope="module")
def uploaded(s3_server):
    """The recorded runs in the bucket: plain, gzip-compressed under the same names (detected by
    content), zstd-compressed with a .zst ending, and one run for the denied-object test."""
    s3_server.upload_folder(RUN, "run")
    s3_server.upload_folder(RUN, "gzrun", lambda rel, data: (rel, gzip.compress(data, mtime=0)))
    s3_server.upload_folder(RUN, "zstrun", lambda rel, data: (rel + ".zst", _zstd(data)))
    s3_server.upload_folder(CRASH, "mixed")
    return s3_server


def _load(*paths, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return dx.load(*paths, progress=False, **kw)


def _same_incident(local, remote, local_root: str, remote_root: str, rename=lambda f: f) -> None:
    """The two Incidents hold the same rows, once file names are written the same way."""

    def norm(frame: pd.DataFrame, fix=lambda v: v) -> pd.DataFrame:
        frame = frame.copy()
        for col in frame.columns:
            if frame[col].dtype == object or isinstance(frame[col].dtype, (pd.StringDtype, pd.CategoricalDtype)):
                frame[col] = frame[col].astype(object).map(lambda v: fix(v) if isinstance(v, str) else v)
        return frame.reset_index(drop=True)

    def fix(v: str) -> str:
        return rename(v.replace(remote_root, local_root))

    for name in FRAMES:
        a, b = norm(getattr(local, name)), norm(getattr(remote, name), fix)
        assert list(a.columns) == list(b.columns), name
        pd.testing.assert_frame_equal(a, b, obj=name, check_dtype=False)
    cols = ["format", "lines_total", "lines_parsed", "lines_unparsed"]
    src, local_src = norm(remote.sources, fix), norm(local.sources)
    assert sorted(local_src["file"]) == sorted(src["file"])
    pd.testing.assert_frame_equal(
        local_src.sort_values("file")[cols].reset_index(drop=True), src.sort_values("file")[cols].reset_index(drop=True)
    )


def _verdict(incident) -> tuple:
    d = dx.diagnose(incident)
    return d.verdict, d.culprit_ranks, d.confidence


def test_a_run_in_s3_loads_like_the_local_folder(uploaded):
    local = _load(str(RUN))
    remote = _load(f"s3://{BUCKET}/run/", storage_options=uploaded.options())
    assert len(remote.sources) == len(local.sources) > 5
    assert all(f.startswith(f"s3://{BUCKET}/run/") for f in remote.sources["file"])
    _same_incident(local, remote, str(RUN), f"s3://{BUCKET}/run")
    assert _verdict(remote) == _verdict(local) and _verdict(local)[:2] == ("rank-desync", [3])


def test_a_process_pool_reads_s3_too(uploaded):
    serial = _load(f"s3://{BUCKET}/run/", storage_options=uploaded.options(), jobs=1)
    pooled = _load(f"s3://{BUCKET}/run/", storage_options=uploaded.options(), jobs=2)  # forked workers
    _same_incident(serial, pooled, "", "")
    assert pooled.sources["error"].isna().all()


@pytest.mark.parametrize(
    "prefix, rename",
    [
        ("gzrun", lambda f: f),  # same names, gzip inside
        ("zstrun", lambda f: f[:-4] if f.endswith(".zst") else f),  # .zst endings
    ],
)
def test_compressed_objects_load_like_the_plain_ones(uploaded, prefix, rename):
    local = _load(str(RUN))
    remote = _load(f"s3://{BUCKET}/{prefix}/", storage_options=uploaded.options())
    assert remote.sources["error"].isna().all(), remote.sources["error"].tolist()
    _same_incident(local, remote, str(RUN), f"s3://{BUCKET}/{prefix}", rename)
    assert _verdict(remote) == _verdict(local)


def test_globs_and_single_objects(uploaded):
    inc = _load(f"s3://{BUCKET}/run/attempt_0/*/stderr.log", storage_options=uploaded.options())
    assert sorted(inc.sources["file"]) == [f"s3://{BUCKET}/run/attempt_0/{r}/stderr.log" for r in range(4)]
    one = _load(f"s3://{BUCKET}/run/fr/comm_lib_trace_rank_3", storage_options=uploaded.options())
    assert one.sources["format"].tolist() == ["fr_pickle"] and len(one.events) > 0


def test_a_zip_object_is_read_member_by_member(uploaded):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for p in sorted(RUN.rglob("*")):
            if p.is_file():
                zf.write(p, p.relative_to(RUN).as_posix())
    uploaded.put("archives/run.zip", buf.getvalue())
    inc = _load(f"s3://{BUCKET}/archives/run.zip", storage_options=uploaded.options())
    assert inc.sources["error"].isna().all() and len(inc.sources) == len(_load(str(RUN)).sources)
    assert _verdict(inc)[:2] == ("rank-desync", [3])


def _cli(*args: str, env: dict, timeout: float = 60) -> subprocess.CompletedProcess:
    env = dict(env, PYTHONPATH=str(ROOT) + os.pathsep + env.get("PYTHONPATH", ""))
    return subprocess.run(
        [sys.executable, "-m", "denpex_nb.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        cwd=str(ROOT),
    )


def test_the_cli_reads_s3_with_credentials_from_the_environment(uploaded):
    import json

    res = _cli("diagnose", "--json", f"s3://{BUCKET}/run/", env=uploaded.env())
    assert res.returncode == 0, res.stderr
    got = json.loads(res.stdout)
    d = dx.diagnose(_load(str(RUN)))
    assert got["verdict"] == d.verdict and got["culprit_ranks"] == d.culprit_ranks == [3]


def test_a_report_renders_from_s3(uploaded, tmp_path):
    """``denpex-nb report s3://...``: the URL reaches the kernel's load(), credentials from the environment."""
    out = tmp_path / "report.html"
    res = _cli("report", f"s3://{BUCKET}/run/", "-o", str(out), env=uploaded.env(), timeout=240)
    assert res.returncode == 0, res.stderr[-2000:]
    html = out.read_text()
    d = dx.diagnose(_load(str(RUN)))
    assert d.verdict in html and f"s3://{BUCKET}/run/" in html


def test_an_unreachable_store_is_one_line_exit_2_within_seconds(uploaded):
    env = uploaded.env()
    env["AWS_ENDPOINT_URL"] = f"http://127.0.0.1:{free_port()}"
    t0 = time.monotonic()
    res = _cli("diagnose", f"s3://{BUCKET}/run/", env=env)
    took = time.monotonic() - t0
    assert res.returncode == 2, res.stdout + res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in res.stderr, res.stderr
    assert "cannot reach the store at http://127.0.0.1:" in lines[0] and "AWS_ENDPOINT_URL" in lines[0], lines[0]
    assert took < 30, took
    # the library says the same, and promptly
    opts = dict(uploaded.options(), endpoint_url=env["AWS_ENDPOINT_URL"])
    t0 = time.monotonic()
    with pytest.raises(InputError, match="cannot reach the store") as e:
        _load(f"s3://{BUCKET}/run/", storage_options=opts)
    assert "\n" not in str(e.value) and time.monotonic() - t0 < 20


def test_a_missing_bucket_is_one_line(uploaded):
    with pytest.raises(InputError) as e:
        _load("s3://no-such-bucket-here/run/", storage_options=uploaded.options())
    msg = str(e.value)
    assert "no such bucket 'no-such-bucket-here'" in msg and "fix:" in msg and "\n" not in msg
    res = _cli("diagnose", "s3://no-such-bucket-here/run/", env=uploaded.env())
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1
    assert "no such bucket" in res.stderr


def test_credentials_the_store_does_not_know_are_one_line(uploaded):
    opts = dict(uploaded.options(), key="AKIANOTAKEY000000000", secret="nope")
    with pytest.raises(InputError) as e:
        _load(f"s3://{BUCKET}/run/", storage_options=opts)
    msg = str(e.value)
    assert "the store rejected the credentials" in msg and "AWS_ACCESS_KEY_ID" in msg and "\n" not in msg, msg


def test_a_missing_object_is_one_line_and_the_others_still_load(uploaded):
    with pytest.raises(InputError) as e:
        _load(f"s3://{BUCKET}/run/rank9.log", storage_options=uploaded.options())
    assert "no such object or prefix" in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(InputError, match="no objects under this prefix"):
        _load(f"s3://{BUCKET}/no-such-run/", storage_options=uploaded.options())
    inc = _load(f"s3://{BUCKET}/run/combined.log", f"s3://{BUCKET}/run/rank9.log", storage_options=uploaded.options())
    src = inc.sources.set_index("file")
    assert pd.isna(src.loc[f"s3://{BUCKET}/run/combined.log", "error"])
    assert "no such object" in src.loc[f"s3://{BUCKET}/run/rank9.log", "error"]


def test_the_server_really_denies_the_object(uploaded):
    from botocore.exceptions import ClientError

    reader = uploaded.client("reader")
    with pytest.raises(ClientError) as e:
        reader.get_object(Bucket=BUCKET, Key=DENIED_KEY)
    assert e.value.response["Error"]["Code"] == "AccessDenied"
    assert reader.get_object(Bucket=BUCKET, Key="mixed/combined.log")["Body"].read()  # the rest is readable


def test_one_denied_object_among_many_is_listed_and_the_rest_loaded(uploaded):
    local = _load(str(CRASH))
    inc = _load(f"s3://{BUCKET}/mixed/", storage_options=uploaded.options())
    denied = f"s3://{BUCKET}/{DENIED_KEY}"
    src = inc.sources.set_index("file")
    assert len(src) == len(local.sources)
    assert "access denied" in src.loc[denied, "error"] and "fix:" in src.loc[denied, "error"]
    assert src.drop(denied)["error"].isna().all()
    assert (
        src.drop(denied)["lines_total"].sum()
        == local.sources.set_index("file").drop(str(CRASH / "attempt_0" / "1" / "stderr.log"))["lines_total"].sum()
    )
    errs = inc.errors[inc.errors["kind"] == "load_error"]
    assert errs["file"].tolist() == [denied]
    assert _verdict(inc)[:2] == ("rank-crash", [1])  # the evidence left still says it
    # named alone, the denied object is a one-line error (exit 2 at the CLI)
    with pytest.raises(InputError, match="access denied"):
        _load(denied, storage_options=uploaded.options())
    res = _cli("diagnose", denied, env=uploaded.env())
    lines = res.stderr.strip().splitlines()
    assert res.returncode == 2 and len(lines) == 1 and "access denied" in lines[0] and "fix:" in lines[0], res.stderr


@pytest.mark.parametrize("ext", ["gz", "zst"])
def test_a_truncated_object_is_reported_and_what_was_read_is_kept(uploaded, ext):
    # every recorded run's combined log (427 KB, ~15x smaller compressed): several zstd blocks, so
    # a cut at two thirds leaves whole blocks before it
    text = b"".join(p.read_bytes() for p in sorted(RUN.parents[1].glob("*/*/combined.log")))
    blob = gzip.compress(text, mtime=0) if ext == "gz" else _zstd(text)
    key = f"truncated/combined.log.{ext}"
    uploaded.put(key, blob[: len(blob) * 2 // 3])
    inc = _load(f"s3://{BUCKET}/{key}", storage_options=uploaded.options())
    row = inc.sources.iloc[0]
    assert "truncated" in row["error"] and row["lines_total"] > 0
    assert row["lines_total"] < text.count(b"\n")
    assert inc.errors["kind"].eq("load_error").sum() == 1


def test_importing_the_loader_imports_no_remote_library():
    code = (
        "import sys, denpex_nb, denpex_nb.ingest; "
        "bad = [m for m in ('fsspec', 's3fs', 'boto3', 'botocore', 'aiobotocore', 'gcsfs', 'distributed') "
        "if m in sys.modules]; print(bad); sys.exit(1 if bad else 0)"
    )
    res = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )
    assert res.returncode == 0, res.stdout + res.stderr


def test_a_missing_library_names_the_install():
    code = (
        "import sys; sys.modules['s3fs'] = None; import denpex_nb as dx\n"
        "try:\n    dx.load('s3://bucket/run/')\nexcept Exception as e:\n    print(type(e).__name__, e)"
    )
    res = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )
    out = res.stdout.strip()
    assert (
        out.startswith("InputError s3://bucket/run/: reading s3:// URLs needs")
        and "pip install 'denpex_nb[remote]'" in out
        and "\n" not in out
    ), out + res.stderr


@pytest.fixture(scope="module")
def web_server():
    """The recorded runs behind a plain web server (directory pages of links), stopped afterwards."""
    pytest.importorskip("aiohttp")
    import functools
    import http.server
    import socketserver
    import threading

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(RUN.parent)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
    thread.join(10)


def test_a_run_behind_a_web_server_is_walked_through_its_links(web_server):
    url = f"{web_server}/{RUN.name}"
    remote = _load(url + "/")
    _same_incident(_load(str(RUN)), remote, str(RUN), url)
    one = _load(url + "/combined.log")
    assert one.sources["file"].tolist() == [url + "/combined.log"] and one.sources["lines_total"][0] > 0
    with pytest.raises(InputError, match="not found"):
        _load(url + "/rank9.log")
