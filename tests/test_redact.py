"""Redaction: what a report shows must not leak hosts, IPs, user names or secrets."""
from __future__ import annotations

import base64
import secrets

import pandas as pd
import pytest

from denpex_nb.diagnose.model import Diagnosis, Evidence, Finding
from denpex_nb.incident import Incident, coerce
from denpex_nb.redact import (HOST, IP, TOKEN, USER, Redactor, hosts_in_text, redact, redact_diagnosis,
                              redact_incident, redact_notebook)


@pytest.mark.parametrize("text, secret", [
    ("Read error [10.1.2.3]:7318: Connection reset by peer", "10.1.2.3"),
    ("node 192.168.0.17 is gone", "192.168.0.17"),
    ("connect to [fe80::1ff:fe23:4567:890a%eth0]:29500", "fe80::1ff:fe23:4567:890a"),
    ("bind 2001:db8::8a2e:370:7334 failed", "2001:db8::8a2e:370:7334"),
    ("listening on ::1 port 5", "::1"),
    ("full 2001:0db8:85a3:0000:0000:8a2e:0370:7334 x", "2001:0db8:85a3:0000:0000:8a2e:0370:7334"),
])
def test_ip_addresses_are_masked(text, secret):
    out = redact(text)
    assert secret not in out
    assert IP in out


@pytest.mark.parametrize("text, user", [
    ('File "/home/alice/proj/train.py", line 88', "alice"),
    ("/Users/bob/Library/x.log", "bob"),
    (r"C:\Users\carol\run\log.txt", "carol"),
])
def test_home_directories_lose_the_user_name_but_keep_the_rest(text, user):
    out = redact(text)
    assert user not in out
    assert USER in out
    assert out.endswith(text.rsplit("\\" if "\\" in text else "/", 1)[-1].split('"')[0]) or "line 88" in out


@pytest.mark.parametrize("token", [
    "hf_" + "a1B2c3D4e5F6g7H8i9J0kLmNoPqR",
    "ghp_" + "0123456789abcdefghijABCDEFGHIJ012345",
    "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
    "xoxb-123456789012-abcdefABCDEF",
    "AKIA" + "ABCDEFGHIJKLMNOP",
    secrets.token_hex(24),                                  # long hex
    base64.b64encode(secrets.token_bytes(48)).decode(),     # long base64
])
def test_tokens_are_masked(token):
    out = redact(f"export SOMETHING {token} done")
    assert token not in out
    assert TOKEN in out


def test_secret_assignments_are_masked_whatever_their_shape():
    out = redact("HF_TOKEN=short_but_secret password: hunter2xyz")
    assert "short_but_secret" not in out and "hunter2xyz" not in out


@pytest.mark.parametrize("text", [
    "RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:537] Read error",
    "terminate called after throwing an instance of 'gloo::EnforceNotMet' in c10::DistBackendError",
    "ProcessGroupGloo::allgather: invalid tensor size at index 1 (expected (5, 4), got (3, 4))",
    "W1129 22:27:47.979000 10045 torch/distributed/elastic/multiprocessing/api.py:1028] at 12:30:45",
    "NCCL commId 0x7e21c4d90a3f5b16 comm 0x5581c0a0 version 2.21.5 model.layers.0.weight train.py",
    "data/recorded/gloo/allgather-shape-mismatch/broken-plain-w2/attempt_0/1/stderr.log",
])
def test_ordinary_log_text_is_left_alone(text):
    assert Redactor(mask_local_host=False)(text) == text


def test_known_hosts_and_fqdns_are_masked():
    line = "tern-07:61204:61266 [0] NCCL INFO Init COMPLETE on tern-07 via node-3.cluster.internal"
    assert hosts_in_text(line) == {"tern-07"}
    out = redact(line)
    assert "tern-07" not in out and "node-3.cluster.internal" not in out
    assert out.count(HOST) == 3
    table = "  host      : gpu-host-12\n  rank      : 1 (local_rank: 1)"
    assert "gpu-host-12" not in redact(table)
    assert "localhost" in redact("  host      : localhost")


def test_incident_and_diagnosis_are_redacted_everywhere_they_show_text():
    inc = Incident(
        events=coerce("events", [{"rank": 0, "seq": 1, "seq_kind": "trace", "op": "all_reduce",
                                   "file": "/home/alice/logs/rank0.log"}]),
        errors=coerce("errors", [{"rank": 1, "kind": "gloo_peer_gone", "file": "/home/alice/logs/rank1.log",
                                   "message": "Connection reset by peer [10.0.0.5]:29500 on tern-07"}]),
        ranks=coerce("ranks", [{"rank": 0, "host": "tern-07"}, {"rank": 1, "host": "tern-08"}]),
    )
    r = Redactor({"tern-07", "tern-08"})
    red = redact_incident(inc, r)
    text = " ".join(str(v) for df in (red.events, red.errors, red.ranks) for v in df.astype(str).to_numpy().ravel())
    for secret in ("alice", "10.0.0.5", "tern-07", "tern-08"):
        assert secret not in text
    assert isinstance(red.ranks["host"].dtype, pd.CategoricalDtype)
    assert "alice" in str(inc.errors["file"].iloc[0])  # the original is untouched
    diag = Diagnosis(findings=[Finding("shape-mismatch", "rank 1 on tern-08 sent [3, 4]",
                                       evidence=[Evidence("/home/alice/x.log", 3, "peer 10.0.0.5 hf_" + "x" * 24)])])
    rd = redact_diagnosis(diag, r)
    blob = rd.to_json()
    assert "tern-08" not in blob and "alice" not in blob and "10.0.0.5" not in blob and "hf_x" not in blob
    assert "tern-08" in diag.to_json()


def test_notebook_outputs_are_redacted_but_images_kept():
    nbformat = pytest.importorskip("nbformat")
    cell = nbformat.v4.new_code_cell("x")
    cell.outputs = [
        nbformat.v4.new_output("stream", name="stdout", text="host tern-07 ip 10.9.8.7\n"),
        nbformat.v4.new_output("display_data", data={"text/html": "<b>/home/alice</b>", "image/png": "iVBORw0KGgo" + "A" * 60}),
        nbformat.v4.new_output("error", ename="RuntimeError", evalue="at 10.9.8.7", traceback=["on tern-07"]),
    ]
    nb = nbformat.v4.new_notebook(cells=[cell])
    redact_notebook(nb, Redactor({"tern-07"}))
    outs = nb.cells[0].outputs
    assert "tern-07" not in outs[0]["text"] and "10.9.8.7" not in outs[0]["text"]
    assert "alice" not in outs[1]["data"]["text/html"]
    assert outs[1]["data"]["image/png"].startswith("iVBORw0KGgo")
    assert "10.9.8.7" not in outs[2]["evalue"] and "tern-07" not in outs[2]["traceback"][0]
