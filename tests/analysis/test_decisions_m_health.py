"""The healthy-progress kind and two hang/crash kinds that blind batch m read as nothing (issue 16), each
tested on its kind with generated variants (launcher prefixes, time stamps, hard wraps, cut tails, a
subset of ranks) and phrasings of several frameworks.

- Training or benchmark progress (a counter and a metric on one line: torchtitan's ``step: 14  loss: 3.2
  ... tps: 7,282``, DETR's ``Epoch: [0]  [   0/7393] ... loss: 76.2864``, a tqdm bar ``epoch:1 loss:1.77:
  7%|▋ | 26/391 [00:05<00:46,  7.91it/s]``, ``step 3 loss 0.62 lr 3e-4 tokens/s 41230``, a benchmark's ``Total
  img/sec on 2 GPU(s): 212.4``) with no failure signal anywhere is ``no-failure`` at low confidence, and
  the note names the last progress line and says that this does not show the job finished; the same log
  with one failure line anywhere (a C++ abort cut to ``terminate called after throwing a`` too) is never an
  all-clear; that holds only for a log that shows a job of several processes (a rank, a node label, a
  per-rank file name, a distributed word): one process's progress alone is ``no-evidence``, as the CLI
  and the corpus's labels say
  (test_progress_and_no_failure_is_a_low_all_clear_a_failure_line_still_decides,
  test_progress_is_an_all_clear_only_where_the_log_shows_several_processes,
  test_progress_survives_wraps_cuts_and_a_subset_of_ranks,
  test_the_note_names_the_last_progress_line_and_the_limit).
- Start-up only (a settings dump such as ``Namespace(epochs=300, lr=0.0001)``, a banner, ``Training starts
  at step 1``) stays no all-clear: a hang at start looks the same; the same start followed by progress is
  one (test_settings_and_start_up_lines_without_progress_are_no_all_clear).
- A long run keeps two progress rows per rank and file (first, last), outside the capped signal rows, so
  a failure printed after thousands of progress lines still decides
  (test_a_long_run_keeps_two_progress_rows_and_a_late_failure_still_decides); the last one is found from
  the end of the text whatever the chunks it is read in, past lines that hold a progress word and are
  no progress (test_the_last_progress_line_is_found_whatever_the_chunks).
- A stack dump of a live process (py-spy's ``Thread N (idle): "MainThread"``, faulthandler's ``Thread 0x...
  (most recent call first):``, gdb's ``Thread 3 (Thread 0x... (LWP N)):``) is someone looking at a hang:
  ``timeout-undetermined``, never "nothing read" and never an all-clear
  (test_a_stack_dump_of_a_live_process_is_a_suspected_hang).
- glog's fatal CHECK (``F0415 ... file.cc:86] Check failed: ...``, TensorFlow's / XLA's ``... F
  tensorflow/...cc:86] Check failed: ...``) aborts the process: a ``rank-crash``
  (test_a_fatal_check_failure_is_the_processs_abort).
"""

from __future__ import annotations

import pytest

from denpex_nb.vocab import ClassId, SignalFamily
from tests.signal_variants import PHRASES, WRAPPERS
from tests.signal_variants import diagnose_files as _diagnose


def _wrap(wrapper: str, lines: list[str], rank: int = 0) -> list[str]:
    return [WRAPPERS[wrapper](rank, t) for t in lines]


#: progress as several frameworks print it (one function of the step number each)
_PROGRESS = {
    "torchtitan": lambda i: (
        f"[titan] 2025-05-28 21:13:{10 + i},816 - root - INFO - step: {i:2d}  loss:  {3.2 - i / 100:.4f}  "
        f"grad_norm:  0.8319  memory:  9.46GiB(64.99%)  tps: 7,282  tflops: 0.52  mfu: 0.17%"
    ),
    "detr": lambda i: (
        f"Epoch: [0]  [{i * 10:4d}/7393]  eta: 16:41:59  lr: 0.000100  class_error: 99.64  loss: {76.2 - i:.4f} "
        f"(76.2864)  time: 0.4921  data: 0.0123  max mem: 4123"
    ),
    "tqdm": lambda i: f"epoch:1 loss:{1.77 - i / 100:.4f}:   7%|▋         | {26 + i}/391 [00:05<00:46,  7.91it/s]",
    "plain": lambda i: f"step {i} loss {2.5 / (i + 1):.4f} lr 3e-4 grad_norm 1.02 tokens/s 41230",
    "ray": lambda i: f"Epoch {i}, Avg validation loss: {1.46 + i / 100:.2f}, Avg validation accuracy: 45.98%",
    "benchmark": lambda i: f"{i * 10}\timages/sec: {106.2 + i:.1f} +/- 0.3 (jitter = 1.2)\t7.851",
}
#: failure lines among progress: generated phrasings of every family, and a C++ abort a paste cut before
#: the exception's name (no other failure word on it)
_FAILURES = [t for _f, t, _k in PHRASES[::9]][:4] + ["terminate called after throwing a"]


#: wrappers that show a job of several processes (a rank, a node label); "plain" and "docker" (a time
#: stamp) show nothing of the kind
_MARKED = ("torch", "mpirun", "slurm", "ray", "kubectl")


@pytest.mark.parametrize("wrapper", ["plain", "torch", "mpirun", "slurm", "ray", "kubectl", "docker"])
@pytest.mark.parametrize("style", sorted(_PROGRESS))
def test_progress_and_no_failure_is_a_low_all_clear_a_failure_line_still_decides(tmp_path, wrapper, style):
    steps = [_PROGRESS[style](i) for i in range(1, 9)]
    healthy = _diagnose(tmp_path, {"log.txt": _wrap(wrapper, steps)})
    if wrapper in _MARKED:
        assert healthy.verdict == ClassId.NO_FAILURE, healthy.findings
        assert healthy.confidence == "low"
    else:  # one process's progress: nothing distributed was read, and that is said
        assert healthy.verdict == ClassId.NO_EVIDENCE, healthy.findings
        assert any("nothing shows a job of several processes" in n for n in healthy.notes), healthy.notes
    for k, failure in enumerate(_FAILURES):
        at = (k * 3) % (len(steps) + 1)
        lines = _wrap(wrapper, steps[:at] + [failure] + steps[at:])
        (tmp_path / str(k)).mkdir()
        d = _diagnose(tmp_path / str(k), {"log.txt": lines})
        assert d.verdict != ClassId.NO_FAILURE, (failure, d.verdict)


#: one sign each that a log comes from a job of several processes, as logs carry them: (file name, lines
#: before the progress, a function that marks a progress line)
_SIGNS = {
    "rank-prefix": ("log.txt", [], lambda t: f"[rank1]:{t}"),
    "node-label": ("log.txt", [], lambda t: f"(RayTrainWorker pid=4113, ip=10.0.0.7) {t}"),
    "per-rank-file": ("rank3.log", [], lambda t: t),
    "lightning-init": ("log.txt", ["Initializing distributed: GLOBAL_RANK: 0, MEMBER: 1/2"], lambda t: t),
    "detr-init": ("log.txt", ["| distributed init (rank 1): env://"], lambda t: t),
    "launcher-env": ("log.txt", ["MASTER_ADDR=10.0.0.1 MASTER_PORT=29500 WORLD_SIZE=8 LOCAL_RANK=0"], lambda t: t),
    "mpirun-tag-glued": ("log.txt", [], lambda t: f"{t}[1,0]<stdout>:"),  # a tqdm bar's \r glued mpirun's tag on
}


@pytest.mark.parametrize("sign", [None, *_SIGNS])
@pytest.mark.parametrize("style", sorted(_PROGRESS))
def test_progress_is_an_all_clear_only_where_the_log_shows_several_processes(tmp_path, style, sign):
    """The corpus's convention and the CLI's: a healthy text in which nothing shows a job of several
    processes is no-evidence (one process's log says nothing of collectives); any one sign of such a job
    (a rank, a node label, a per-rank file name, a distributed word) makes its progress an all-clear."""
    steps = [_PROGRESS[style](i) for i in range(1, 7)]
    if sign is None:
        d = _diagnose(tmp_path, {"log.txt": steps})
        assert d.verdict == ClassId.NO_EVIDENCE, (d.verdict, d.notes)
        assert d.culprit_ranks == [] and "not an all-clear" in " ".join(d.notes)
        return
    name, before, mark = _SIGNS[sign]
    d = _diagnose(tmp_path, {name: before + [mark(t) for t in steps]})
    assert d.verdict == ClassId.NO_FAILURE, (sign, d.verdict, d.notes)
    assert d.all_clear_confidence == "low" and "does not show the job finished" in d.notes[0]


@pytest.mark.parametrize("variant", ["wrapped", "cut-tail", "two-of-four-ranks", "stamped"])
def test_progress_survives_wraps_cuts_and_a_subset_of_ranks(tmp_path, variant):
    steps = [_PROGRESS["torchtitan"](i) for i in range(1, 30)]
    ranked = _wrap("torch", steps)
    if variant == "wrapped":  # a paste hard-wrapped at 80 columns
        files = {"log.txt": [t[k : k + 80] for t in ranked for k in range(0, len(t), 80)]}
    elif variant == "cut-tail":  # the last line cut mid-way
        files = {"log.txt": [*ranked[:-1], ranked[-1][:40]]}
    elif variant == "two-of-four-ranks":
        files = {f"rank{r}.log": _wrap("torch", steps, r) for r in (1, 3)}
    else:
        files = {"log.txt": [f"2024-05-01T10:00:{i % 60:02d}.123456Z {t}" for i, t in enumerate(ranked)]}
    d = _diagnose(tmp_path, files)
    assert d.verdict == ClassId.NO_FAILURE, (d.verdict, d.notes)
    assert d.confidence == "low"


def test_the_note_names_the_last_progress_line_and_the_limit(tmp_path):
    steps = [_PROGRESS["torchtitan"](i) for i in range(1, 41)]
    d = _diagnose(tmp_path, {"log.txt": _wrap("torch", steps)})
    note = d.notes[0]
    assert "step: 40" in note and "step:  1 " not in note, note
    assert "does not show the job finished" in note and "TORCH_DISTRIBUTED_DEBUG=DETAIL" in note


@pytest.mark.parametrize(
    "lines",
    [
        [
            "| distributed init (rank 0): env://",
            "Namespace(aux_loss=True, backbone='resnet50', batch_size=2, dice_loss_coef=1, epochs=300, lr=0.0001, "
            "world_size=8)",
            "Start training",
        ],
        [
            "Trainer is initialized with local batch size 2, global batch size 2, sequence length 4096, total steps "
            "10 (warmup 2).",
            "Training starts at step 1.",
        ],
        [
            "TensorFlow:  1.10",
            "Model:       resnet50",
            "Batch size:  64 global",
            "Num batches: 100",
            "Generating model",
        ],
    ],
    ids=["settings-dump", "start-banner", "benchmark-config"],
)
def test_settings_and_start_up_lines_without_progress_are_no_all_clear(tmp_path, lines):
    for wrapper in ("ray", "torch"):
        (tmp_path / wrapper).mkdir()
        d = _diagnose(tmp_path / wrapper, {"log.txt": _wrap(wrapper, lines)})
        assert d.verdict != ClassId.NO_FAILURE, (wrapper, d.verdict)
        # the same start followed by progress: the run went on past it
        (tmp_path / wrapper / "on").mkdir()
        steps = [_PROGRESS["torchtitan"](i) for i in range(1, 4)]
        d = _diagnose(tmp_path / wrapper / "on", {"log.txt": _wrap(wrapper, lines + steps)})
        assert d.verdict == ClassId.NO_FAILURE, (wrapper, d.verdict)


def test_a_long_run_keeps_two_progress_rows_and_a_late_failure_still_decides(tmp_path):
    import denpex_nb as dx

    steps = [_PROGRESS["plain"](i) for i in range(6000)]
    (tmp_path / "ok").mkdir()
    p = tmp_path / "ok" / "log.txt"
    p.write_text("\n".join(_wrap("torch", steps)) + "\n")
    inc = dx.load(str(p), progress=False)
    prog = inc.signals[inc.signals["family"].astype(object) == SignalFamily.PROGRESS]
    assert 1 <= len(prog) <= 2
    assert int(prog["line"].max()) == len(steps)
    assert dx.diagnose(inc, strict=True).verdict == ClassId.NO_FAILURE
    # 2,500 noisy warnings fill the capped rows; the failure after them and the progress still decides
    noise = [f"WARNING: dataloader worker {i} is slow (timeout=30)" for i in range(2500)]
    lines = _wrap("torch", steps[:3000] + noise + steps[3000:] + ["RuntimeError: CUDA error: an illegal memory access"])
    d = _diagnose(tmp_path, {"log.txt": lines})
    assert d.verdict != ClassId.NO_FAILURE


_PYSPY = [
    "Process 119809: ray::RayTrainWorker",
    "Python v3.9.22 (/home/ray/anaconda3/bin/python3.9)",
    "",
    'Thread 120142 (idle): "TrainingThread(train_fn_per_worker)"',
    "    get (multiprocessing/queues.py:113)",
    "    _next_data (torch/utils/data/dataloader.py:1329)",
    'Thread 120150 (active+gil): "MainThread"',
    "    wait (threading.py:320)",
]
_FAULTHANDLER = [
    "Timeout (0:30:00)!",
    "Thread 0x00007f3a1c7fe700 (most recent call first):",
    '  File "/usr/lib/python3.10/threading.py", line 320 in wait',
    "Current thread 0x00007f3a2d4c1740 (most recent call first):",
    '  File "/opt/conda/lib/python3.10/site-packages/torch/distributed/distributed_c10d.py", line 2050 in all_reduce',
    '  File "train.py", line 88 in <module>',
]
_GDB = [
    "Thread 3 (Thread 0x7f2a1c7fe700 (LWP 12345)):",
    "#0  0x00007f2a3b2c4ad3 in futex_wait_cancelable () from /lib64/libpthread.so.0",
    "#1  0x00007f2a3b2c4ad3 in pthread_cond_wait@@GLIBC_2.3.2 () from /lib64/libpthread.so.0",
    "Thread 1 (Thread 0x7f2a3d4c1740 (LWP 12301)):",
    "#0  0x00007f2a3b2c8f3e in sched_yield () from /lib64/libc.so.6",
]


@pytest.mark.parametrize("wrapper", ["plain", "torch", "ray", "kubectl"])
@pytest.mark.parametrize("dump", [_PYSPY, _FAULTHANDLER, _GDB], ids=["py-spy", "faulthandler", "gdb"])
def test_a_stack_dump_of_a_live_process_is_a_suspected_hang(tmp_path, wrapper, dump):
    for name, lines in (("whole", dump), ("cut", dump[: max(2, len(dump) // 2)])):
        (tmp_path / name).mkdir()
        d = _diagnose(tmp_path / name, {"dump.txt": _wrap(wrapper, lines)})
        assert d.verdict == ClassId.TIMEOUT_UNDETERMINED, (name, d.verdict)
    # beside healthy progress too: the dump says it stopped going on
    steps = [_PROGRESS["plain"](i) for i in range(5)]
    (tmp_path / "after").mkdir()
    d = _diagnose(tmp_path / "after", {"log.txt": _wrap(wrapper, steps + dump)})
    assert d.verdict == ClassId.TIMEOUT_UNDETERMINED, d.verdict


@pytest.mark.parametrize("wrapper", ["plain", "torch", "slurm", "docker"])
@pytest.mark.parametrize(
    "lines",
    [
        [
            "2022-04-15 06:35:51.117279: E tensorflow/core/tpu/kernels/tpu_compilation_cache_external.cc:113] during "
            "context [post-optimization]: HloModule has a mix of layout constrained and unconstrained AllReduce "
            "instructions.",
            "2022-04-15 06:35:51.117346: F tensorflow/core/tpu/kernels/tpu_program_group.cc:86] Check failed: "
            "xla_tpu_programs.size() > 0 (0 vs. 0)",
        ],
        [
            "F0415 06:35:51.117346 12345 pjrt_stream_executor_client.cc:1245] Check failed: device_ordinal >= 0 "
            "(-1 vs. 0)",
            "*** Check failure stack trace: ***",
            "    @     0x7f2a3b2c4ad3  absl::log_internal::LogMessageFatal::~LogMessageFatal()",
        ],
        [
            "2024-01-02 10:00:00.123456: F external/xla/xla/service/gpu/gpu_executable.cc:612] Check failed: "
            "buffer.size() == expected (1024 vs. 2048)",
        ],
    ],
    ids=["tf-header-after-an-error", "glog-with-stack", "xla-alone"],
)
def test_a_fatal_check_failure_is_the_processs_abort(tmp_path, wrapper, lines):
    d = _diagnose(tmp_path, {"log.txt": _wrap(wrapper, lines, rank=1)})
    assert d.verdict == ClassId.RANK_CRASH, (d.verdict, d.findings)


@pytest.mark.parametrize("hyperscan", [True, False], ids=["hyperscan", "bytes.find"])
@pytest.mark.parametrize("chunk", [4096, 65536, 16 << 20])
def test_the_last_progress_line_is_found_whatever_the_chunks(chunk, hyperscan):
    import io

    from denpex_nb.ingest.base import FileContext, Output
    from denpex_nb.ingest.parse import all_text_readers
    from denpex_nb.ingest.scan import NeedleMatcher, UnparsedSink, scan_text

    if hyperscan:
        pytest.importorskip("hyperscan")
    steps = [_PROGRESS["torchtitan"](i) for i in range(1, 2001)]
    tail = ["[titan] saving a checkpoint to /ckpt/step-2000 (Loss scaler state kept)", "done"]
    data = ("\n".join(_wrap("torch", steps + tail, rank=2)) + "\n").encode()
    readers = all_text_readers()
    matcher = NeedleMatcher.for_readers(readers, signals=True, use_hyperscan=hyperscan)
    out, sink = Output(), UnparsedSink(1 << 20)
    sc = scan_text(io.BytesIO(data), readers, FileContext(file="f"), out, sink, matcher=matcher, chunk_size=chunk)
    rows = sc.signals.batch()
    assert [(ln, f) for ln, f in zip(rows["line"], rows["family"])] == [(1, "progress"), (2000, "progress")]
    assert set(rows["rank"]) == {2}
