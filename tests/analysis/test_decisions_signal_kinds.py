"""The decisions of the failure-signal layer's vocabulary (``denpex_nb/signals.py``) and of the verdicts
it gives when no rule explains a failure (``denpex_nb/analysis/signals.py``), each tested on its kind
with generated variants (wrappers, cuts, phrasings from real threads).

Decisions of the vocabulary (never a false alarm on healthy chatter):

- a record's field (``backend_name: gloo``, DDP's construction record, an environment dump) under a
  level only its wrapper gave it (an application logger that forwards a child's stderr at ERROR) is
  no failure; a field whose own words say something failed still is
  (test_a_records_fields_under_a_forwarding_loggers_error_level_are_no_failure,
  test_a_field_whose_own_words_say_it_failed_still_signals).
- c10d's TCPStore teardown line ``uv_loop_close failed ... EBUSY`` (libuv still closing handles at
  exit, closed on the next pass) is no failure, its glog header whole or cut off
  (test_the_stores_teardown_loop_close_is_no_failure).
- ``broadcast`` in a message about tensor broadcasting (``cannot be broadcast to``, ``broadcast
  together``, ``broadcasting``) is no collective: a shape error there is the process's own
  (test_tensor_broadcasting_is_not_the_broadcast_collective).

Decisions of the verdicts:

- a cross-rank check that found ranks disagreeing on a value (FSDP's ``Rank 1 has different values
  for step``, ZeRO-3's ``disagreement between rank0 and rank2``) is a desync (stall/position family),
  not the raising rank's own crash, whatever wraps it
  (test_ranks_that_disagree_on_a_value_are_a_desync_not_a_crash).
- a size error raised inside a collective call is a ``shape-mismatch`` of that call: the traceback's
  frames give the collective context the message lacks (a library's ``same number of elements``,
  c10d's ``Split sizes doesn't match total dim 0 size`` pasted before or after its frames)
  (test_a_size_error_raised_inside_a_collective_call_is_a_shape_mismatch_of_it,
  test_c10d_split_size_check_is_a_size_error_without_its_frames).
- a traceback cut before its exception line is a crash (the verdict, not only an alternative) when
  the evidence around it decides: a lone process (no rank, host, group, distributed word or
  distributed-library frame anywhere: no collective of several processes ran under it)
  (test_a_lone_processs_cut_traceback_is_its_own_crash), or another rank that lost its connection
  after it (test_a_cut_traceback_the_others_saw_go_away_is_a_crash); a rank prefix, a node label,
  a distributed word, a frame in a collective library, or a lost connection *before* it keeps the
  cause undetermined, the crash an alternative (the cut may have taken a collective's error).
- a failure on lines that show a PyTorch process's own objects (``torch.Size([0])``, a dtype, a path
  in the torch package) and nothing distributed read is that process's crash, not "nothing read";
  the same failure words without them (alien input) stay ``no-evidence``
  (test_a_pytorch_processs_own_error_with_nothing_distributed_is_its_crash).
"""

from __future__ import annotations

import pytest

import denpex_nb as dx
from denpex_nb.signals import classify_text, family_of
from denpex_nb.vocab import ClassId, SignalFamily
from tests.signal_variants import RANKED, WRAPPERS, healthy_lines

#: application loggers that forward every line of a child's stderr at one level (the app's own header)
_FORWARDERS = {
    "applog": lambda r, t: f"[RANK {r}] 2025-01-01 12:00:18 [ERROR] trainer: {t}",
    "pylog": lambda r, t: f"2025-01-01 12:00:18,123 - trainer - ERROR - {t}",
    "glog-E": lambda r, t: f"E0101 12:00:18.123456 {4000 + r} runner.py:88] {t}",
}
#: DDP's construction record (``DDP Initialized with:``) and an environment dump, one field a line
_RECORD = [
    "broadcast_buffers: 1",
    "bucket_cap_bytes: 26214400",
    "backend_name: gloo",
    "gloo_device_transport: N/A",
    "gloo_socket_ifname: N/A",
    "master_addr: 127.0.0.1",
    "device_ids: ",
    "NCCL_SOCKET_IFNAME=eth0",
    "torch_distributed_debug: INFO",
]


def _diagnose(tmp_path, lines, name="job.log"):
    p = tmp_path / name
    p.write_text("\n".join(lines) + "\n")
    return dx.diagnose(dx.load(str(p), progress=False), strict=True)


@pytest.mark.parametrize("forwarder", sorted(_FORWARDERS))
def test_a_records_fields_under_a_forwarding_loggers_error_level_are_no_failure(tmp_path, forwarder):
    lines = healthy_lines()
    for r in range(4):
        at = 8 + 10 * r
        lines[at:at] = [_FORWARDERS[forwarder](r, f) for f in _RECORD]
    d = _diagnose(tmp_path, lines)
    assert d.verdict == ClassId.NO_FAILURE, (d.summary(), d.findings[0].evidence if d.findings else None)
    # the same fields with no wrapper level at all: nothing either (the vocabulary reads the words)
    assert all(classify_text(f) is None for f in _RECORD)


@pytest.mark.parametrize("field", ["status: failed", "exitcode: 1", "error: connection refused", "state: FAILED"])
def test_a_field_whose_own_words_say_it_failed_still_signals(tmp_path, field):
    sig = classify_text(field, "ERROR")
    assert sig is not None and sig.failure, (field, sig)
    lines = healthy_lines() + [_FORWARDERS["applog"](2, field)]
    assert _diagnose(tmp_path, lines).verdict != ClassId.NO_FAILURE


_LOOP_CLOSE = "[c10d] uv_loop_close failed with:-16 errn:EBUSY desc:resource busy or locked"


@pytest.mark.parametrize("wrapper", sorted(WRAPPERS))
@pytest.mark.parametrize(
    "header",
    ["[I1130 00:45:12.457812345 TCPStoreLibUvBackend.cpp:1354] ", "62489 TCPStoreLibUvBackend.cpp:1354] ", ""],
    ids=["glog", "cut-header", "bare"],
)
def test_the_stores_teardown_loop_close_is_no_failure(tmp_path, wrapper, header):
    lines = healthy_lines()
    for r in range(4):
        lines.append(WRAPPERS[wrapper](r, header + _LOOP_CLOSE))
        lines.append(
            WRAPPERS[wrapper](
                r, "[I1130 00:45:12.457840876 TCPStoreLibUvBackend.cpp:1364] [c10d] uv_loop cleanup finished."
            )
        )
    d = _diagnose(tmp_path, lines, f"{wrapper}.log")
    assert d.verdict == ClassId.NO_FAILURE, d.summary()
    # a store that failed at teardown still fails
    lines.append(WRAPPERS[wrapper](1, "[c10d] recvValue failed on SocketImpl(fd=76): Connection reset by peer"))
    assert _diagnose(tmp_path, lines, f"{wrapper}.log").verdict != ClassId.NO_FAILURE


@pytest.mark.parametrize(
    "text",
    [
        "shape mismatch: value tensor of shape [8192, 1024] cannot be broadcast to indexing result of shape [8192, 2048]",
        "RuntimeError: The size of tensor a (4) must match the size of tensor b (5) at non-singleton dimension 1 (broadcasting)",
        "ValueError: operands could not be broadcast together with shapes (3,4) (5,4)",
        "RuntimeError: shape '[2, 3]' is invalid: the shapes are not broadcastable",
    ],
)
@pytest.mark.parametrize("wrapper", ["plain", "torch", "ray", "docker"])
def test_tensor_broadcasting_is_not_the_broadcast_collective(tmp_path, text, wrapper):
    assert family_of(text) != SignalFamily.SIZE, text
    lines = healthy_lines() + [WRAPPERS[wrapper](1, text)]
    d = _diagnose(tmp_path, lines)
    assert d.verdict not in (ClassId.SHAPE_MISMATCH, ClassId.DTYPE_MISMATCH, ClassId.NO_FAILURE), d.summary()
    # the collective, named so, still is one
    assert family_of("RuntimeError: shape mismatch in broadcast from rank 0: [4] vs [8]") == SignalFamily.SIZE


_DISAGREE = [
    ("Rank 1 has different values for step: 8016.0. Other ranks: 7870.0", True),
    ("RuntimeError: disagreement between rank0 and rank2: rank0: [12, 14, 17] rank2: [2, 3, 4]", False),
    ("AssertionError: the checkpoint step of rank 5 differs from the other ranks (1200 vs 1300)", False),
    ("ValueError: ranks 0 and 3 disagree on the number of micro-batches", False),
]


@pytest.mark.parametrize("text, bare", _DISAGREE, ids=range(len(_DISAGREE)))
@pytest.mark.parametrize("wrapper", ["plain", "torch", "mpirun", "slurm", "ray", "kubectl"])
def test_ranks_that_disagree_on_a_value_are_a_desync_not_a_crash(tmp_path, text, bare, wrapper):
    assert family_of(text) == SignalFamily.STALL, text
    lines = healthy_lines() + [WRAPPERS[wrapper](2, text)]
    d = _diagnose(tmp_path, lines)
    assert d.verdict == ClassId.RANK_DESYNC, d.summary()
    # raised, with its traceback: still a desync, not the raising rank's crash
    tb = [
        "Traceback (most recent call last):",
        '  File "/opt/app/train.py", line 88, in <module>',
        "    check_consistent(state)",
        text if not bare else f"RuntimeError: {text}",
    ]
    d = _diagnose(tmp_path, healthy_lines() + [WRAPPERS[wrapper](2, t) for t in tb])
    assert d.verdict == ClassId.RANK_DESYNC, d.summary()
    # alone, cut in the middle of its value list: still a failure, never an all-clear
    d = _diagnose(tmp_path, [text[: max(text.find("disagree"), text.find("differ")) + 30]])
    assert d.verdict != ClassId.NO_FAILURE, d.summary()


_FRAMES = [
    "Traceback (most recent call last):",
    '  File "/work/train.py", line 10, in <module>',
    "    dispatch(tokens, splits)",
    '  File "/usr/lib/python3.12/site-packages/megatron/core/transformer/moe/token_dispatcher.py", line 200, in dispatch',
    "    out = dist.{call}(out, tokens)",
    '  File "/usr/lib/python3.12/site-packages/torch/distributed/distributed_c10d.py", line 4688, in {call}',
    "    work = group.{backend}(",
]


@pytest.mark.parametrize(
    "call, backend", [("all_to_all_single", "alltoall_base"), ("all_gather_into_tensor", "_allgather_base")]
)
@pytest.mark.parametrize(
    "message",
    [
        "ValueError: Tensors must have the same number of elements",
        "RuntimeError: output tensor size must be a multiple of the input tensor size",
        "AssertionError: expected shape [8, 1024] but got [7, 1024]",
    ],
)
@pytest.mark.parametrize("wrapper", ["plain", "torch", "mpirun", "ray"])
def test_a_size_error_raised_inside_a_collective_call_is_a_shape_mismatch_of_it(
    tmp_path, call, backend, message, wrapper
):
    tb = [f.format(call=call, backend=backend) for f in _FRAMES] + [message]
    d = _diagnose(tmp_path, healthy_lines() + [WRAPPERS[wrapper](3, t) for t in tb])
    assert d.verdict == ClassId.SHAPE_MISMATCH, d.summary()
    assert d.findings[0].op == call and d.findings[0].confidence == "low", d.findings[0]
    # the same message raised outside any collective call is no collective's size error
    local = [f.format(call=call, backend=backend) for f in _FRAMES[:3]] + [message]
    d = _diagnose(tmp_path, healthy_lines() + [WRAPPERS[wrapper](3, t) for t in local])
    assert d.verdict != ClassId.SHAPE_MISMATCH, d.summary()


@pytest.mark.parametrize("order", ["message-first", "frames-first", "message-alone"])
@pytest.mark.parametrize("wrapper", ["plain", "torch", "slurm", "kubectl"])
def test_c10d_split_size_check_is_a_size_error_without_its_frames(tmp_path, order, wrapper):
    message = "RuntimeError: Split sizes doesn't match total dim 0 size"
    frames = [f.format(call="all_to_all_single", backend="alltoall_base") for f in _FRAMES[5:]]
    body = {"message-first": [message] + frames, "frames-first": frames + [message], "message-alone": [message]}[order]
    d = _diagnose(tmp_path, [WRAPPERS[wrapper](1, t) for t in body])
    assert d.verdict == ClassId.SHAPE_MISMATCH, d.summary()


#: tracebacks a paste cut before the exception line: (frames, the innermost call's line)
_CUT = [
    ['  File "train.py", line 189, in <module>', "    main_loop()", '  File "train.py", line 135, in main_loop'],
    [
        '  File "/work/train.py", line 120, in main',
        "    batch = next(loader_iter)",
        '  File "/opt/conda/lib/python3.10/site-packages/datasets/load.py", line 1470, in load_from_disk',
        "    return Dataset.load_from_disk(path)",
    ],
    [
        '  File "D:\\proj\\Train_one_epoch.py", line 76, in train_one_epoch',
        "    out_loss.backward()",
        '  File "C:\\Python38\\lib\\site-packages\\torch\\autograd\\__init__.py", line 147, in backward',
        "    Variable._execution_engine.run_backward(",
    ],
]
_PROGRESS = [
    f"   [Train] Epoch: [1][{i}/4899]  Loss:0.56 (Avg 0.55) LR 1.00e-03   (AvgTime 1.4)" for i in range(360, 372)
]


@pytest.mark.parametrize("frames", range(len(_CUT)))
@pytest.mark.parametrize("header", [True, False])
@pytest.mark.parametrize("stamp", ["none", "docker"])
def test_a_lone_processs_cut_traceback_is_its_own_crash(tmp_path, frames, header, stamp):
    tb = (["Traceback (most recent call last):"] if header else []) + _CUT[frames]
    wrap = (lambda t: t) if stamp == "none" else (lambda t: WRAPPERS["docker"](0, t))
    d = _diagnose(tmp_path, [wrap(t) for t in _PROGRESS + tb])
    if header:  # frames alone, no header: a paste of frames is no traceback the reader can start
        assert (d.verdict, d.findings[0].rule, d.confidence) == ("rank-crash", "cut-traceback", "low"), d.summary()
    assert d.verdict != ClassId.NO_FAILURE, d.summary()
    # anything of a second process or a distributed job keeps it undetermined, the crash an alternative
    for other in (
        [WRAPPERS["torch"](1, t) for t in _PROGRESS[:2]] + [WRAPPERS["torch"](0, t) for t in tb],
        [f"10.0.0.1: {t}" for t in _PROGRESS[:3]] + [f"10.0.0.2: {t}" for t in tb],
        ["NCCL version 2.21.5+cuda12.4", "> initializing torch distributed ..."] + _PROGRESS + tb,
        _PROGRESS + tb + ['  File "/opt/site-packages/deepspeed/runtime/zero/stage3.py", line 2040, in backward'],
    ):
        d = _diagnose(tmp_path, [wrap(t) for t in other], "other.log")
        if header:
            assert d.findings[0].rule != "cut-traceback", (other[-3:], d.summary())
            assert any(a.rule == "cut-traceback" for a in d.alternatives), d.summary()


@pytest.mark.parametrize("wrapper", sorted(RANKED))
@pytest.mark.parametrize(
    "victim",
    [
        "[W729 10:15:17.5 TCPStore.cpp:125] [c10d] recvValue failed on SocketImpl(fd=76, remote=[localhost]:29500): "
        "Connection reset by peer",
        "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by peer [10.0.0.2]:4711",
    ],
    ids=["store-reset", "gloo-closed"],
)
def test_a_cut_traceback_the_others_saw_go_away_is_a_crash(tmp_path, wrapper, victim):
    tb = ["Traceback (most recent call last):"] + _CUT[1]
    lines = healthy_lines(steps=4) + [WRAPPERS[wrapper](1, t) for t in tb]
    after = _diagnose(tmp_path, lines + [WRAPPERS[wrapper](3, victim)])
    # (gloo's peer address may map to the rank that raised: then the peer rule names it, as well)
    assert after.verdict == "rank-crash" and after.findings[0].rule in ("cut-traceback", "peer-gone"), after.summary()
    assert 3 not in after.culprit_ranks, after.summary()
    # the same lost connection before the traceback is not its consequence: undetermined
    before = _diagnose(tmp_path, healthy_lines(steps=4) + [WRAPPERS[wrapper](3, victim)] + lines[-len(tb) :])
    assert before.findings[0].rule != "cut-traceback", before.summary()
    # and with no victim at all (the view ends inside the traceback): undetermined, the crash an alternative
    alone = _diagnose(tmp_path, lines)
    assert alone.verdict == ClassId.TIMEOUT_UNDETERMINED, alone.summary()
    assert any(a.rule == "cut-traceback" for a in alone.alternatives), alone.summary()


_OWN = [
    "        size mismatch for model.decoder.layers.{k}.fc1.weight: copying a param with shape torch.Size([0]) from "
    "checkpoint, the shape in current model is torch.Size([10240, 2560]).",
    "RuntimeError: expected scalar type torch.float16 but found torch.float32 in layer {k}",
    "ValueError: mismatch in block {k}: got torch.Size([4, 8]) where torch.Size([8, 4]) was needed",
]


@pytest.mark.parametrize("text", _OWN, ids=range(len(_OWN)))
@pytest.mark.parametrize("wrapper", ["plain", "docker"])
@pytest.mark.parametrize("n", [1, 4])
def test_a_pytorch_processs_own_error_with_nothing_distributed_is_its_crash(tmp_path, text, wrapper, n):
    lines = [WRAPPERS[wrapper](0, text.format(k=k)) for k in range(n)]
    d = _diagnose(tmp_path, lines)
    assert d.verdict == ClassId.RANK_CRASH and not d.culprit_ranks, d.summary()
    # alien input with the same failure words, no PyTorch object and no exception line (which the
    # Python reader reads as a process's exception anyway): nothing distributed read
    alien = [
        WRAPPERS[wrapper](
            0,
            t.format(k=k)
            .replace("torch.Size", "Dim")
            .replace("torch.float", "fp")
            .replace("RuntimeError: ", "")
            .replace("ValueError: ", ""),
        )
        for k, t in enumerate([text] * n)
    ]
    assert _diagnose(tmp_path, alien, "alien.log").verdict == ClassId.NO_EVIDENCE
