"""Redaction rules, one by one: each test fails when its rule is dropped or weakened.

Every secret below is checked both ways: it is gone from the output and the right mask stands in
its place. The vocabulary tests check the other failure: masking that destroys the evidence.
"""

from __future__ import annotations

import base64
import re
import secrets

import pandas as pd
import pytest

from denpex_nb.analysis.model import Diagnosis, Evidence, Finding, RankView
from denpex_nb.incident import Incident, coerce
from denpex_nb.redact import (
    EMAIL,
    HOST,
    INPUTS,
    IP,
    MASK_RE,
    TOKEN,
    USER,
    Redactor,
    hosts_in_text,
    redact,
    redact_diagnosis,
    redact_incident,
    redact_notebook,
    redactor_for,
)


def red(text: str, *hosts: str) -> str:
    """Learn from the text, then mask it (the local host name is left out: tests must not depend on it)."""
    r = Redactor(hosts, mask_local_host=False)
    r.learn(text)
    return r(text)


def gone(text: str, secret: str, mask: str, *hosts: str) -> str:
    out = red(text, *hosts)
    assert secret.lower() not in out.lower(), (secret, out)
    assert mask in out, (mask, out)
    return out


# --- addresses ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, secret",
    [
        ("Read error [10.1.2.3]:7318: Connection reset by peer", "10.1.2.3"),
        ("node 192.168.0.17 is gone", "192.168.0.17"),
        ("MASTER_ADDR=172.31.255.254", "172.31.255.254"),
        ("log 10.0.1.106_rank0.log", "10.0.1.106"),
        ("leading zeros 010.000.001.007 x", "010.000.001.007"),
    ],
)
def test_ipv4_is_masked(text, secret):
    gone(text, secret, IP)


@pytest.mark.parametrize(
    "text, secret",
    [
        ("full 2001:0db8:85a3:0000:0000:8a2e:0370:7334 x", "2001:0db8:85a3:0000:0000:8a2e:0370:7334"),
        ("bind 2001:db8::8a2e:370:7334 failed", "2001:db8::8a2e:370:7334"),  # :: in the middle
        ("at 2001:db8:1:2:3:4:5:: now", "2001:db8:1:2:3:4:5::"),  # :: at the end
        ("via ::8a2e:370:7334 now", "::8a2e:370:7334"),  # :: at the start
        ("listening on ::1 port 5", "::1"),
        ("connect to [fe80::1ff:fe23:4567:890a%eth0]:29500", "fe80::1ff:fe23:4567:890a"),  # zone, brackets
        ("peer [2001:db8::1]:29500 closed", "2001:db8::1"),
        ("bind [::]:29500", "[::]"),
        ("addr ::ffff:10.0.3.17 port", "10.0.3.17"),  # IPv4-mapped
        ("addr ::FFFF:10.0.3.17.", "10.0.3.17"),
        ("nat64 64:ff9b::192.0.2.33 x", "192.0.2.33"),
        ("UPPER 2001:DB8::ABCD:1 x", "2001:DB8::ABCD:1"),
        ("NCCL INFO NET/Socket : Using [0]eth0:fe80::1ff:fe23:4567:890a%eth0<0>", "fe80::1ff:fe23:4567:890a"),
        ("peer 2001:db8::8a2e:370:7334:29500 gone", "2001:db8::8a2e:370:7334"),  # address:port, no brackets
    ],
)
def test_ipv6_is_masked_in_every_form(text, secret):
    out = gone(text, secret, IP)
    assert not re.search(r"\[ip-\d+\]\.\d", out), out  # never "<ip>.0.3.17"


def test_an_address_keeps_its_number_and_the_text_around_it():
    out = red("from 10.0.0.5 to 10.0.0.6, then 10.0.0.5 again")
    assert out == "from [ip-1] to [ip-2], then [ip-1] again"


@pytest.mark.parametrize(
    "text",
    [
        "W1129 22:27:47.979000 10045 api.py:1028] at 12:30:45",  # times are no IPv6
        "terminate called after throwing 'gloo::EnforceNotMet' in c10::DistBackendError",
        "mac aa:bb:cc:dd:ee:ff here",
        "version 2.21.5 and 12.4",
    ],
)
def test_colon_and_dot_text_that_is_no_address_is_kept(text):
    assert red(text) == text


# --- hosts ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, host",
    [
        ("NCCL WARN Connection closed by remote peer gpu-node-201<57890>", "gpu-node-201"),
        ("NCCL WARN Connection closed by remote peer tern<57890>", "tern"),  # bare name, by position
        ("RuntimeError: ip-10-0-1-105 unreachable", "ip-10-0-1-105"),
        ("DistBackendError: gpu-node-105:29500", "gpu-node-105"),
        ("connect to [hostx7]:29500 (errno: 110 - Connection timed out)", "hostx7"),
        ("The client socket has failed to connect to [zeus]:29500", "zeus"),  # [host]:port
        ("ssh deploy@zeus-3 failed", "zeus-3"),  # after @
        ("zeus:4101:4101 [0] NCCL INFO Bootstrap", "zeus"),  # NCCL prefix
        ("  host      : zeus\n  rank      : 1", "zeus"),  # torchrun table
        ("MASTER_ADDR=zeus python train.py", "zeus"),
        ("torchrun --master_addr zeus --nproc_per_node 8", "zeus"),
        ("--rdzv_endpoint=zeus:29400", "zeus"),
        ('{"host": "zeus", "rank": 0}', "zeus"),
        ("store at tcp://zeus:29500 timed out", "zeus"),
        ("SLURM_JOB_NODELIST=gpu-node-[101-104,200]", "gpu-node-[101-104,200]"),
    ],
)
def test_hosts_in_host_positions_are_masked(text, host):
    gone(text, host, HOST)


@pytest.mark.parametrize(
    "host",
    [
        "gpu-node-105",
        "node-a7",
        "worker-3-abc12",
        "ip-10-0-1-105",
        "dgx-a100-07",
        "myjob-worker-0",
        "compute-0-12",
        "nid001234",
        "nid-0042",
        "cn0123",
        "gpu-017",
        "trainer-7d9f8c6b5-x2k9q",
        "myapp-7d9f8c6b5-x2k9q",
        "train-job-abc12",  # pod hashes
        "ip-10-0-1-105.ec2.internal",
        "ip-10-0-1-105.us-west-2.compute.internal",
        "i-0abc123def4567890",
        "i-0abc1234",
        "gke-prod-default-pool-1a2b3c4d-abcd",
        "aks-nodepool1-12345678-vmss000000",
        "tern.cluster.example.com",
        "db1.corp",
        "head.local",
        "node-a7.cluster.example.com",
    ],
)
def test_hosts_are_recognised_by_shape_alone(host):
    gone(f"rank 3 failed on {host} after 3 s", host, HOST)


@pytest.mark.parametrize("variant", ["GPU-NODE-105", "Gpu-Node-105", "gpu-node-105"])
def test_case_variants_of_a_host_share_its_mask(variant):
    r = Redactor({"gpu-node-105"}, mask_local_host=False)
    assert r(f"lost {variant}") == "lost [host-1]"


def test_a_learned_bare_host_is_masked_everywhere_after():
    r = Redactor(mask_local_host=False)
    r.learn("tern:4101:4101 [0] NCCL INFO Bootstrap")
    assert r("RuntimeError: tern unreachable; TERN gone") == "RuntimeError: [host-1] unreachable; [host-1] gone"


@pytest.mark.parametrize(
    "path, kept",
    [
        ("/logs/node-a7.cluster.example.com_rank1.log", "_rank1.log"),
        ("/logs/ip-10-0-1-106-rank0.err", "-rank0.err"),
        ("/logs/gpu-node-105/stderr.log", "/stderr.log"),
        ("/logs/GPU-NODE-105.log", ".log"),
        ("/logs/tern.corp.example.com/rank0.log", "/rank0.log"),
    ],
)
def test_hosts_in_file_and_folder_names_are_masked_and_the_rest_kept(path, kept):
    out = red(path)
    assert out.endswith(kept) and HOST in out, out
    assert not re.search(r"node|ip-10|tern", out, re.I), out


def test_a_short_name_and_its_fqdn_share_a_number():
    out = red("node-a7.cluster.example.com then node-a7 and gpu-node-9")
    assert out == "[host-1] then [host-1] and [host-2]"


def test_hosts_in_text_reports_positions_and_shapes():
    line = "tern-07:61204:61266 [0] NCCL INFO Init COMPLETE on tern-07 via node-3.cluster.internal"
    assert (
        {"tern-07", "node-3.cluster.internal"}
        <= hosts_in_text(line)
        <= {"tern-07", "node-3.cluster.internal", "node-3"}
    )
    assert "localhost" in redact("  host      : localhost")


# --- people --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, user",
    [
        ('File "/home/alice/proj/train.py", line 88', "alice"),
        ("/Users/bob/Library/x.log", "bob"),
        (r"C:\Users\carol\run\log.txt", "carol"),
        (r"C:\\Users\\carol\\run\\log.txt", "carol"),  # JSON-escaped
        ("C:/Users/carol/run", "carol"),
        ("/nfs/home/dave/ckpt", "dave"),
        ("cd ~erin/runs && ls", "erin"),
    ],
)
def test_user_names_from_home_paths_are_masked(text, user):
    gone(text, user, USER)


def test_a_user_name_is_masked_wherever_it_then_appears():
    r = Redactor(mask_local_host=False)
    r.learn('File "/home/alice/proj/train.py", line 88')
    out = r("job alice_run3 by Alice failed; malice is a word")
    assert out == "job [user-1]_run3 by [user-1] failed; malice is a word"


def test_vocabulary_in_a_host_position_is_no_host():
    text = '{"host": "unknown", "hostname": "None"} then an unknown error; None left; MASTER_ADDR=localhost'
    assert red(text) == text


def test_home_folders_that_name_nobody_are_kept():
    assert red("/home/ubuntu/x and /root/y and ~/z") == "/home/ubuntu/x and /root/y and ~/z"


@pytest.mark.parametrize("email", ["alice@example.com", "a.b+tag@mail.corp.example.co.uk", "ALICE@EXAMPLE.ORG"])
def test_emails_are_masked(email):
    gone(f"contact {email} now", email, EMAIL)


# --- secrets -------------------------------------------------------------------------------------------

_PREFIXED = [
    "hf_" + "a1B2c3D4e5F6g7H8i9J0kLmNoPqR",
    "ghp_" + "abcdefghijklmnopqrst",
    "gho_" + "abcdefghijklmnopqrst",
    "github_pat_" + "11ABCDEFG0123456789ab",
    "glpat-" + "abcdefghij0123456789",
    "xoxb-123456789012-abcdefABCDEF",
    "sk-" + "proj-abcdefghij0123456789ABCDEFGHIJ",
    "sk-" + "abcdefghij0123456789ABCDEFGHIJ",
    "AKIA" + "ABCDEFGHIJKLMNOP",
    "ASIA" + "ABCDEFGHIJKLMNOP",
    "AIza" + "SyA-abcdefghijklmnopqrstuvwxyz01234",
    "ya29." + "a0AfH6SMBabcdefghijklmnop",
    "npm_" + "abcdefghijklmnopqrstuvwxyz0123456789",
    "pypi-" + "abcdefghij" * 4,
    "dckr_pat_" + "abcdefghij0123456789ab",
    "eyJhbGciOiJIUzI1NiJ9." + "eyJzdWIiOiIxMjM0NTY3ODkwIn0." + "dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
]


@pytest.mark.parametrize("token", _PREFIXED)
def test_every_known_token_prefix_is_masked(token):
    """Bodies short or plain enough that only the prefix rule knows them (not the hex/base64 rules)."""
    out = gone(f"export SOMETHING {token} done", token, TOKEN)
    assert out == f"export SOMETHING {TOKEN} done"
    assert red(f"glued_{token}") == f"glued_{TOKEN}"  # after an underscore, too


@pytest.mark.parametrize("n", [32, 33, 40, 48, 64])
def test_long_hex_secrets_are_masked_from_32_digits(n):
    secret = secrets.token_hex(32)[:n]
    gone(f"key {secret} end", secret, TOKEN)
    gone(f"key 0x{secret} end", secret, TOKEN)
    gone(f"key_{secret}.bin", secret, TOKEN)  # glued to a word


def test_uuids_and_random_base64_are_masked():
    u = "123e4567-e89b-12d3-a456-426614174000"
    gone(f"run {u} x", u, TOKEN)
    b = base64.b64encode(secrets.token_bytes(48)).decode()
    gone(f"blob {b} x", b, TOKEN)


@pytest.mark.parametrize(
    "text, secret",
    [
        ("HF_TOKEN=short_but_secret", "short_but_secret"),
        ("password: hunter2xyz", "hunter2xyz"),
        ('{"api_key": "abcd1234"}', "abcd1234"),
        ("WANDB_API_KEY='k9k9k9k9'", "k9k9k9k9"),
        ("--token s3cr3tval --other 1", "s3cr3tval"),
        ("Authorization: Bearer abc.def.ghi123456", "abc.def.ghi123456"),
        ("git clone https://user:pa55word@git.example.org/x.git", "pa55word"),
        ("pip install --index-url https://oauth2:glpat-xyz@pkgs.example.org/simple", "oauth2"),
    ],
)
def test_secret_assignments_and_credentials_are_masked(text, secret):
    gone(text, secret, TOKEN)


def test_a_url_keeps_its_path_and_loses_its_credentials_and_host():
    assert red("https://user:pass@host.example.org/x/y") == "https://[token]@[host-1]/x/y"


# --- control sequences ---------------------------------------------------------------------------------


@pytest.mark.parametrize("esc", ["\x1b[31m", "\x1b[1;31m", "^[[31m", "[31m", "\x1b]0;title\x07", "\x00"])
def test_a_secret_right_after_a_control_sequence_is_masked(esc):
    tok = "hf_" + "a1B2c3D4e5F6g7H8i9J0kLmNoPqR"
    out = red(f"{esc}{tok}\x1b[0m {esc}10.1.2.3 {esc}gpu-node-7")
    assert tok not in out and "10.1.2.3" not in out and "gpu-node-7" not in out
    assert esc in out  # the sequence itself is kept


# --- masks ---------------------------------------------------------------------------------------------


def test_masks_survive_html_and_are_never_masked_again():
    out = red("peer gpu-node-201<57890> at 10.0.0.1 /home/alice hf_" + "x1Y2" * 6)
    from html import escape

    masks = MASK_RE.findall(out)
    assert len(masks) == 4 and all(escape(m) == m for m in masks)  # nothing a browser would hide
    r = Redactor(mask_local_host=False)
    assert r(out) == out  # idempotent
    assert r(INPUTS + "/a.log") == INPUTS + "/a.log"


def test_state_round_trips_with_the_same_numbers():
    r = Redactor(mask_local_host=False)
    r.learn("gpu-node-1 gpu-node-2 10.0.0.9 /home/alice x@y.com")
    r.add_root("/data/customer/job")
    again = Redactor.from_state(r.state())
    text = "gpu-node-2 GPU-NODE-1 10.0.0.9 alice x@y.com /data/customer/job/a.log"
    assert again(text) == r(text) == "[host-2] [host-1] [ip-1] [user-1] [email-1] [inputs]/a.log"
    assert again.scrub("<td>gpu-node-2</td>") == "<td>[host-2]</td>"


# --- what must stay readable ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:537] Read error",
        "terminate called after throwing an instance of 'gloo::EnforceNotMet' in c10::DistBackendError",
        "ProcessGroupGloo::allgather: invalid tensor size at index 1 (expected (5, 4), got (3, 4))",
        "W1129 22:27:47.979000 10045 torch/distributed/elastic/multiprocessing/api.py:1028] at 12:30:45",
        "NCCL commId 0x7e21c4d90a3f5b16 comm 0x5581c0a0 version 2.21.5 model.layers.0.weight train.py",
        "data/recorded/gloo/allgather-shape-mismatch/broken-plain-w2/attempt_0/1/stderr.log",
        "[rank1]: Watchdog caught collective operation timeout: WorkNCCL(SeqNum=3, OpType=ALLGATHER, NumelIn=20, "
        "NumelOut=40, Timeout(ms)=600000) ran for 600123 milliseconds before timing out.",
        "ProcessGroupNCCL.cpp:1234] [PG ID 0 PG GUID 0(default_pg) Rank 1] Process group watchdog thread terminated",
        "NCCL INFO Channel 00/02 : 0 1 via NET/IB/0 busId 1b000 nvmlDev 0 cudaDev 0 NVIDIA A100-SXM4-80GB",
        "torch.float16 bfloat16 cuda:0 cuda:1 local_rank: 1 node_rank=0 all_gather_into_tensor reduce_scatter",
        "op.preamble.length <= op.nbytes. 40 vs 24. x86-64 utf-8 sm_90 py3-none-any",
        "out = self.net(x); torchvision.io.read_image(p); threading.local()",
        "see https://pytorch.org/docs/stable/distributed.html and github.com/pytorch/pytorch/issues/1",
        "[default0]:[rank0]: Traceback (most recent call last): in all_reduce work.wait()",
        "step 3/100 loss=2.3500 grad_sum=0.4800 [3, 4] [5, 4] float32",
        "[W socket.cpp:464] [c10d] The server socket has failed to listen on [::]:29500 (errno: 98 - Address in use).",
    ],
)
def test_ordinary_log_text_is_left_alone(text):
    out = red(text)
    if "[::]" in text:  # the unspecified address goes, the words stay
        assert out == text.replace("[::]", "[[ip-1]]")
    else:
        assert out == text


# --- incidents, diagnoses, notebooks -------------------------------------------------------------------


def test_every_text_column_of_every_frame_is_redacted_including_extra_columns():
    inc = Incident(
        events=coerce(
            "events",
            [
                {
                    "rank": 0,
                    "seq": 1,
                    "seq_kind": "trace",
                    "op": "all_reduce",
                    "pg": "0",
                    "pg_desc": "tp on gpu-node-9",
                    "file": "/home/alice/logs/rank0.log",
                    "frames": ("/home/alice/x.py", "/home/alice/y.py"),
                }
            ],
        ),
        errors=coerce(
            "errors",
            [
                {
                    "rank": 1,
                    "kind": "gloo_peer_gone",
                    "file": "/home/alice/logs/rank1.log",
                    "message": "Connection reset by peer [10.0.0.5]:29500 on tern-07",
                    "host": "tern-08",
                    "peer": "gpu-node-3:29500",
                    "call_site": "/home/alice/t.py:3",
                    "error_file": "/home/alice/err.json",
                }
            ],
        ),
        ranks=coerce("ranks", [{"rank": 0, "host": "tern-07"}, {"rank": 1, "host": "tern-08"}]),
        unparsed=coerce(
            "unparsed", [{"file": "/home/alice/logs/rank0.log", "line": 1, "n_lines": 1, "text": "hf_" + "q" * 24}]
        ),
        sources=coerce("sources", [{"file": "/home/alice/logs/rank0.log", "error": "gpu-node-3 gone"}]),
        notes=["read /home/alice/logs on tern-07"],
    )
    r = redactor_for(inc, mask_local_host=False)
    red_inc = redact_incident(inc, r)
    text = repr(
        [
            df.astype(str).to_numpy().tolist()
            for df in (red_inc.events, red_inc.errors, red_inc.ranks, red_inc.unparsed, red_inc.sources)
        ]
    ) + repr(red_inc.notes)
    for secret in ("alice", "10.0.0.5", "tern-07", "tern-08", "gpu-node", "hf_q"):
        assert secret not in text, secret
    assert list(red_inc.ranks["host"]) == ["[host-1]", "[host-2]"]  # rank order numbers hosts
    assert isinstance(red_inc.ranks["host"].dtype, pd.CategoricalDtype)
    assert str(red_inc.errors["message"].dtype) == "string"
    assert isinstance(red_inc.events["frames"].iloc[0], tuple)
    assert "alice" in str(inc.errors["file"].iloc[0])  # the original is untouched


def test_two_names_that_become_one_mask_merge_their_categories():
    inc = Incident(ranks=coerce("ranks", [{"rank": 0, "host": "GPU-NODE-1"}, {"rank": 1, "host": "gpu-node-1"}]))
    out = redact_incident(inc, redactor_for(inc, mask_local_host=False))
    assert list(out.ranks["host"]) == ["[host-1]", "[host-1]"]


def test_the_diagnosis_is_redacted_everywhere_it_holds_text():
    r = Redactor({"tern-07", "tern-08"}, mask_local_host=False)
    state = pd.DataFrame(
        {"rank": [1], "first_error": ["peer 10.0.0.5 gone"], "sources": [("/home/alice/r1.log", "tern-08.log")]}
    )
    f = Finding(
        "shape-mismatch",
        "rank 1 on tern-08 sent [3, 4]",
        pg="tern-07-pg",
        op="all_gather",
        consequence_of="op-mismatch@fr:3/pg tern-07-pg",
        ranks={1: RankView(op="all_gather", shapes=[[3, 4]])},
        basis=("on tern-07",),
        evidence=[Evidence("/home/alice/x.log", 3, "peer 10.0.0.5 hf_" + "x" * 24, rank=1)],
    )
    diag = Diagnosis(findings=[f], notes=["tern-07 was slow"], rank_state=state, group_size_basis="tern-07 table")
    rd = redact_diagnosis(diag, r)
    blob = rd.to_json() + repr(rd.rank_state.to_dict())
    for secret in ("tern-07", "tern-08", "alice", "10.0.0.5", "hf_x"):
        assert secret not in blob, secret
    assert rd.verdict == "shape-mismatch" and rd.first.ranks[1].shapes == [[3, 4]] and rd.first.op == "all_gather"
    assert rd.first.consequence_of == f"op-mismatch@fr:3/pg {rd.first.pg}" and rd.first.pg.startswith("[host-")
    assert "fr" not in r.hosts  # the key's "@fr" is no user@host
    assert "tern-08" in diag.to_json()


def test_notebook_outputs_tracebacks_and_metadata_are_redacted_but_images_kept():
    nbformat = pytest.importorskip("nbformat")
    cell = nbformat.v4.new_code_cell("x")
    png = "iVBORw0KGgo" + base64.b64encode(secrets.token_bytes(60)).decode()
    cell.outputs = [
        nbformat.v4.new_output("stream", name="stdout", text="host tern-07 ip 10.9.8.7\n"),
        nbformat.v4.new_output(
            "display_data",
            data={"text/html": "<b>/home/alice</b>", "image/png": png, "application/json": {"where": "gpu-node-4"}},
        ),
        nbformat.v4.new_output(
            "error",
            ename="RuntimeError",
            evalue="at 10.9.8.7",
            traceback=["on tern-07", "\x1b[31mFile /home/alice/x.py\x1b[0m"],
        ),
    ]
    nb = nbformat.v4.new_notebook(cells=[cell], metadata={"papermill": {"parameters": {"logs": ["/home/alice/l"]}}})
    redact_notebook(nb, Redactor({"tern-07"}, mask_local_host=False))
    outs = nb.cells[0].outputs
    assert "tern-07" not in outs[0]["text"] and "10.9.8.7" not in outs[0]["text"]
    assert "alice" not in outs[1]["data"]["text/html"] and "[user-1]" in outs[1]["data"]["text/html"]
    assert "gpu-node-4" not in str(outs[1]["data"]["application/json"])
    assert outs[1]["data"]["image/png"] == png
    assert "10.9.8.7" not in outs[2]["evalue"] and "tern-07" not in outs[2]["traceback"][0]
    assert "alice" not in outs[2]["traceback"][1] and outs[2]["traceback"][1].startswith("\x1b[31m")
    assert "alice" not in str(nb.metadata)
