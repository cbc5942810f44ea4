"""No secret survives ``--redact``: secrets planted in every position a log can hold them.

One multi-rank incident (a real recorded all_gather shape mismatch) is dressed with secrets: NCCL
prefixes and bodies, glog lines, tracebacks (paths with user names, messages), a torchrun failure
table (host, error_file), exception messages, ANSI-coloured tokens, file and folder names of the
inputs, the folder holding them all, a Flight Recorder dump (process-group description, frames'
file names, profiling name) and the tracer's JSONL ``host``. Then nothing of them may be left in:
the redacted Incident (every frame, every column), the HTML report, the executed ``.ipynb`` (a
failing cell's traceback included), and ``denpex-nb diagnose --redact`` (JSON and text).
The report is rendered once (papermill: ~10 s); both files come from that one render.
"""

from __future__ import annotations

import json
import pickle
import re
import shutil
from pathlib import Path

import pytest

import denpex_nb as dx
from denpex_nb import cli, report

from ._nb_runs import run_dir

HF = "hf_" + "Qw3rTy8uIoP1aSdF9gHjKlZx"
GHP = "ghp_" + "Zz9Yy8Xx7Ww6Vv5Uu4Tt3Ss2Rr1Qq0Pp9Oo8"
HEX32 = "9f86d081884c7d659a2feaa0c55ad015"
PASSWORD = "pa55w0rdXyz"

#: every secret planted below; none may appear (any case) in any output
SECRETS = (
    # hosts: by position only (bare words) and by shape
    "tern",
    "hermes",
    "zeus",
    "athena",
    "gpu-node-201",
    "ip-10-0-1-105",
    "gpu-node-105",
    "dgx-a100-07",
    "node-a7",
    "cluster.example.com",
    "ip-10-0-1-106",
    "i-0abc123def4567890",
    "gke-prod-pool-1a2b3c4d-abcd",
    "git.acme.example.org",
    "worker-3-abc12",
    # addresses
    "10.20.30.40",
    "2001:db8::8a2e:370:7334",
    "10.0.3.17",
    "fe80::1ff:fe23:4567:890a",
    # people
    "alice",
    "bobsmith",
    "carol",
    "dave",
    "erin.ops@example.com",
    "erin.ops",
    # secrets
    HF,
    GHP,
    HEX32,
    PASSWORD,
    "deploy",
    # the folder holding every input
    "acme-secret-project",
)

NCCL_LOG = f"""\
tern:4101:4101 [0] NCCL INFO Bootstrap : Using eth0:10.20.30.40<0>
tern:4101:4101 [0] NCCL INFO NET/Socket : Using [0]eth0:fe80::1ff:fe23:4567:890a%eth0<0>
tern:4101:4120 [0] NCCL WARN Connection closed by remote peer gpu-node-201<57890>
tern:4101:4120 [0] NCCL INFO misc/socket.cc:50 -> 6 from ::ffff:10.0.3.17 via 2001:db8::8a2e:370:7334
[W1129 12:00:00.123456 4101 socket.cpp:464] [c10d] The client socket has failed to connect to [hermes]:29500 (errno: 110 - Connection timed out).
I1129 12:00:00.200000 4101 torch/distributed/run.py:793] MASTER_ADDR=zeus MASTER_PORT=29500 user erin.ops@example.com
[rank1]: Traceback (most recent call last):
[rank1]:   File "/home/alice/proj/train.py", line 88, in <module>
[rank1]:     main()
[rank1]:   File "C:\\Users\\carol\\proj\\util.py", line 12, in main
[rank1]:     dist.all_gather(out, boxes)
[rank1]:   File "/home/bobsmith/venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py", line 3252, in all_gather
[rank1]:     work.wait()
[rank1]: torch.distributed.DistBackendError: gpu-node-105:29500 ip-10-0-1-105 unreachable (cwd ~dave/runs, token {HF})
\x1b[31m{GHP}\x1b[0m pushed with https://deploy:{PASSWORD}@git.acme.example.org/x.git key {HEX32}
"""

TABLE = """\
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
train.py FAILED
------------------------------------------------------------
Failures:
  <NO_OTHER_FAILURES>
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2024-11-29_12:00:01
  host      : dgx-a100-07
  rank      : 1 (local_rank: 1)
  exitcode  : 1 (pid: 4102)
  error_file: /home/alice/torchelastic_x/worker-3-abc12/error.json
  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html
============================================================
"""


def _fr_dump() -> bytes:
    """A Flight Recorder dump of rank 1 on its own one-rank group, secrets in every text field."""
    desc = "ckpt on gke-prod-pool-1a2b3c4d-abcd"
    frames = [
        {"name": "save", "filename": "/home/bobsmith/proj/ckpt.py", "line": 7},
        {"name": "main", "filename": "/home/alice/proj/train.py", "line": 88},
    ]
    entries = [
        {
            "record_id": i,
            "pg_id": 9,
            "process_group": ("9", desc),
            "collective_seq_id": i + 1,
            "p2p_seq_id": 0,
            "profiling_name": "nccl:all_reduce",
            "input_sizes": [[4]],
            "output_sizes": [[4]],
            "input_dtypes": ["Float"],
            "output_dtypes": ["Float"],
            "state": "completed",
            "retired": True,
            "is_p2p": False,
            "time_created_ns": 1764454060123456789 + i,
            "timeout_ms": 600000,
            "frames": frames,
            "thread_name": "tern-worker",
        }
        for i in range(2)
    ]
    return pickle.dumps(
        {
            "version": "2.10",
            "pg_config": {"9": {"name": "9", "desc": desc, "ranks": "[1]"}},
            "pg_status": {
                "9": {"last_enqueued_collective": 2, "last_started_collective": 2, "last_completed_collective": 2}
            },
            "entries": entries,
        },
        protocol=2,
    )


@pytest.fixture(scope="module")
def logs(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("leaks") / "acme-secret-project" / "logs"
    shutil.copytree(run_dir(), root)
    for rank, host in ((0, "athena"), (1, "i-0abc123def4567890")):  # the tracer's JSONL host
        p = root / "trace" / f"denpex_trace_rank{rank}.jsonl"
        p.write_text(re.sub(r'"host":\s*"[^"]*"', f'"host":"{host}"', p.read_text()))
    (root / "node-a7.cluster.example.com_rank1.log").write_text(NCCL_LOG)  # a file named by a host
    (root / "ip-10-0-1-106").mkdir()  # a folder named by a host
    (root / "ip-10-0-1-106" / "torchrun.err").write_text(TABLE)
    (root / "fr_alice").mkdir()
    (root / "fr_alice" / "comm_lib_trace_rank_1").write_bytes(_fr_dump())
    return root


def _leaks(text: str) -> list[str]:
    """The secrets ``text`` still holds (as words: "tern" in "jp-InternalAnchorLink" is no leak)."""
    text = re.sub(r"data:[\w.+/-]+;base64,[A-Za-z0-9+/=]+", "", text)  # pictures are no text
    return [s for s in SECRETS if re.search(rf"(?i)(?<![A-Za-z0-9]){re.escape(s)}(?![A-Za-z0-9])", text)]


def _frames_text(inc) -> str:
    parts = []
    for name in ("events", "errors", "ranks", "progress", "unparsed", "sources"):
        df = getattr(inc, name)
        parts.append(repr(list(df.columns)))
        parts.extend(repr(v) for v in df.astype(object).to_numpy().ravel().tolist())
    return "\n".join(parts + list(inc.notes))


@pytest.fixture(scope="module")
def plain(logs):
    """The unredacted load and diagnosis: what the redacted outputs must still say."""
    inc = dx.load(str(logs), progress=False)
    return inc, dx.diagnose(inc)


def test_the_planted_secrets_are_really_in_the_evidence(logs, plain):
    inc, diag = plain
    text = _frames_text(inc) + diag.to_json()
    for s in (
        "tern",
        "gpu-node-201",
        "ip-10-0-1-105",
        "alice",
        "athena",
        "dgx-a100-07",
        "acme-secret-project",
        "node-a7",
        "ip-10-0-1-106",
        "gke-prod-pool-1a2b3c4d-abcd",
    ):
        assert s in text, s  # else the test below proves nothing
    extra = {c for c in inc.errors.columns if c not in ("rank", "message", "kind")}
    assert {"host", "error_file"} <= extra  # reader extra columns are in play


def test_the_redacted_incident_keeps_no_secret_in_any_frame_or_column(logs, plain):
    inc, diag = report.prepare([str(logs)], redact=True)
    assert _leaks(_frames_text(inc)) == []
    assert _leaks(diag.to_json() + repr(diag.rank_state.astype(object).to_numpy().tolist())) == []
    assert str(diag) and _leaks(str(diag)) == []
    # and nothing the diagnosis needs is lost
    plain_inc, plain_diag = plain
    assert diag.verdict == plain_diag.verdict and diag.culprit_ranks == plain_diag.culprit_ranks
    assert diag.first.op == plain_diag.first.op and diag.ranks_seen == plain_diag.ranks_seen
    assert {r: v.shapes for r, v in diag.first.ranks.items()} == {
        r: v.shapes for r, v in plain_diag.first.ranks.items()
    }
    assert list(inc.events["op"]) == list(plain_inc.events["op"])
    assert inc.ranks["host"].astype(str).str.fullmatch(r"\[host-\d+\]|nan|<NA>|None").all()


@pytest.fixture(scope="module")
def rendered(logs, tmp_path_factory):
    """One redacted render (HTML + .ipynb) whose last cell fails, quoting every raw input path and line."""
    import nbformat

    from denpex_nb.nbfiles import read

    nb = read("incident_report")
    nb.cells.append(
        nbformat.v4.new_code_cell(  # every raw path and every raw line, in a traceback
            "raise RuntimeError('cannot reread ' + str(logs) + '\\n'.join("
            "open(p, errors='replace').read() for p in logs if 'comm_lib' not in p))"
        )
    )
    out = tmp_path_factory.mktemp("leak-report")
    inputs = sorted(str(p) for p in logs.rglob("*") if p.is_file())
    res = report.render(inputs, out / "r.html", redact=True, ipynb=out / "r.ipynb", template=nb)
    return res


def test_the_html_report_keeps_no_secret_and_still_shows_the_evidence(rendered, plain):
    _, diag = plain
    html = rendered.html.read_text()
    assert rendered.error and "cannot reread" in html  # the failing cell's traceback is there
    assert _leaks(html) == []
    assert _leaks(rendered.error) == []
    assert "Verdict:" in html and diag.verdict in html
    assert diag.first.op in html
    for v in diag.first.ranks.values():
        if v.shapes:
            assert str(v.shapes[0]).replace(" ", "") in html.replace(" ", ""), v.shapes
    assert "[host-" in html and "[inputs]" in html and "[user-" in html
    assert "&lt;host" not in html and "<host" not in html  # masks are visible text, not tags


def test_the_notebook_keeps_no_secret_in_any_output_source_or_metadata(rendered):
    nb = json.loads(rendered.ipynb.read_text())
    for cell in nb["cells"]:
        for out in cell.get("outputs", []):
            for mime in list(out.get("data", {})):
                if mime.startswith("image/"):
                    del out["data"][mime]
    text = json.dumps(nb, ensure_ascii=False)
    assert _leaks(text) == []
    assert any(o.get("output_type") == "error" for c in nb["cells"] for o in c.get("outputs", []))
    assert "application/vnd.denpex.redact+json" not in text  # no hidden output with the raw names


@pytest.mark.parametrize("as_json", [True, False])
def test_diagnose_redact_keeps_no_secret(logs, plain, capsys, as_json):
    rc = cli.main(["diagnose", str(logs), "--redact", "--quiet"] + (["--json"] if as_json else []))
    out = capsys.readouterr().out
    assert rc == 0
    assert _leaks(out) == []
    _, diag = plain
    if as_json:
        d = json.loads(out)
        assert d["verdict"] == diag.verdict and d["culprit_ranks"] == diag.culprit_ranks
        assert d["findings"][0]["op"] == diag.first.op
    else:
        assert diag.verdict in out


def test_without_redact_the_secrets_are_printed(logs, capsys):
    cli.main(["diagnose", str(logs), "--quiet", "--json"])
    assert "acme-secret-project" in capsys.readouterr().out  # the switch is what masks


def test_a_report_whose_loading_failed_still_masks_its_traceback(logs, tmp_path):
    """No kernel redactor to hand over (the first cell failed): the renderer learns from the inputs itself."""
    import nbformat

    from denpex_nb.nbfiles import read

    nb = read("incident_report")
    at = next(i for i, c in enumerate(nb.cells) if "prepare" in c.source)
    nb.cells[at] = nbformat.v4.new_code_cell(
        "raise RuntimeError(str(logs) + open([p for p in logs if p.endswith('_rank1.log')][0]).read())"
    )
    nb.cells = nb.cells[: at + 1]
    inputs = sorted(str(p) for p in logs.rglob("*") if p.is_file())
    res = report.render(inputs, tmp_path / "r.html", redact=True, ipynb=tmp_path / "r.ipynb", template=nb)
    assert res.error and "[inputs]" in res.html.read_text()
    assert _leaks(res.html.read_text()) == [] and _leaks(res.ipynb.read_text()) == [] and _leaks(res.error) == []
