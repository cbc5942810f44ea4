"""What a run shows when it went well, and a traceback flattened onto one line: kinds blind batch n read
as nothing or as "undetermined" (issue 16), each tested on its kind with generated variants (launcher
prefixes, time stamps, hard wraps, cut tails, a subset of ranks) and phrasings of several frameworks.

- Success evidence in three more forms is progress (:data:`denpex_nb.signals.PROGRESS`), the healthy-progress
  policy (README, the decisions of the m batch's health kinds) applied to them: a step reported done in words (``Tensor
  Parallel iter 0 completed``, ``Epoch 3 finished in 12.1s``, ``Finished epoch 2``), a record of measured
  metrics (HF Trainer's ``{'loss': 0.6931, 'grad_norm': 1.2, ...}``, a JSON step log, quoted values
  ``{'loss': '7.6250', 'tok/gpu/s': '3,679.1'}``), a collective test's pass (``allreduce OK``, ``allreduce:
  PASS``, unittest's ``... ok``, pytest's ``PASSED``, nccl-tests' ``Out of bounds values : 0 OK``). Where the
  log shows a job of several processes (a rank, a node label, a distributed word, a DeviceMesh) it is
  ``no-failure`` at low confidence with the progress note; one failure line anywhere still decides
  (test_a_step_done_a_metrics_record_or_a_collective_pass_is_progress_a_failure_still_decides,
  test_success_evidence_survives_stamps_wraps_cuts_and_a_subset_of_ranks).
- Look-alikes stay what they were: a settings dict (``{'epoch': 3, 'lr': 0.1}``, ``'max_grad_norm': 1.0``,
  ``'loss': 'ce'``), a step done "with errors", ``allreduce ok, but ...``, a queued collective (``allreduce 0
  enqueued``), a start-up line: no progress, never an all-clear on their own
  (test_settings_a_step_done_with_errors_and_a_queued_collective_are_no_success).
- A DeviceMesh (``DeviceMesh('cuda', [0, 1, 2, 3])``, ``init_device_mesh``) is a word of a job of several
  processes: progress beside it is an all-clear, alone it stays one process's
  (test_a_device_mesh_shows_a_job_of_processes).
- A traceback flattened onto one line (SageMaker's ``AlgorithmError: ExecuteUserScriptError: ... Traceback (most
  recent call last): File "mnist.py", line 257, in <module> ... RuntimeError: Dataset not found``, a log line
  that joined one) raised the exception at its end: the process's own crash (``rank-crash``), read as the
  same traceback on many lines is, never ``timeout-undetermined`` for the wrapper's name and never an
  all-clear (test_a_traceback_flattened_onto_one_line_is_the_processs_own_exception).
"""

from __future__ import annotations

import pytest

from denpex_nb.signals import classify
from denpex_nb.vocab import ClassId, SignalFamily
from tests.signal_variants import PHRASES, WRAPPERS
from tests.signal_variants import diagnose_files as _diagnose

#: success evidence as several programs print it (one function of the step number each)
_SUCCESS = {
    "iter-completed": lambda i: f"06/16/2025 05:55:0{i % 10} PM  Tensor Parallel iter {i} completed",
    "epoch-finished": lambda i: f"Epoch {i} finished in {12.1 + i:.1f}s",
    "finished-epoch": lambda i: f"Finished epoch {i}",
    "hf-record": lambda i: (
        f"{{'loss': {0.69 - i / 100:.4f}, 'grad_norm': 1.2, 'learning_rate': 5e-05, 'epoch': {i / 10}}}"
    ),
    "json-record": lambda i: f'{{"step": {i * 100}, "loss": {2.31 - i / 100:.2f}, "lr": 0.0003}}',
    "quoted-record": lambda i: (
        f"0 {i * 9 + 1} 2024-03-11 19:58:35.773642 {{'loss': '7.6250', 'avg_loss': '{8.37 - i / 10:.4f}', "
        f"'tok/gpu/s': '3,679.1', 'gpu_utzn': '100%'}}"
    ),
    "allreduce-ok": lambda i: f"rank {i % 2} (GPU{i % 2}): allreduce {i} OK",
    "test-pass": lambda i: f"RCCL 2-GPU native allreduce test {i}: PASS",
    "unittest-ok": lambda i: f"test_all_reduce_sum_{i} (__main__.TestDistBackend) ... ok",
    "pytest-passed": lambda i: f"test/distributed/test_c10d.py::test_allgather_{i} PASSED",
    "nccl-tests-check": lambda i: "#  Out of bounds values : 0 OK",
}

#: failure lines among the success lines: generated phrasings of several families, and a C++ abort cut short
_FAILURES = [t for _f, t, _k in PHRASES[::11]][:4] + ["terminate called after throwing a"]


def _wrap(wrapper: str, lines: list[str], rank: int = 0) -> list[str]:
    return [WRAPPERS[wrapper](rank, t) for t in lines]


@pytest.mark.parametrize("wrapper", ["torch", "mpirun", "ray", "kubectl"])
@pytest.mark.parametrize("style", sorted(_SUCCESS))
def test_a_step_done_a_metrics_record_or_a_collective_pass_is_progress_a_failure_still_decides(
    tmp_path, wrapper, style
):
    steps = [_SUCCESS[style](i) for i in range(1, 7)]
    assert all(classify(t).family == SignalFamily.PROGRESS for t in steps), steps
    healthy = _diagnose(tmp_path, {"log.txt": _wrap(wrapper, steps)})
    assert healthy.verdict == ClassId.NO_FAILURE, (healthy.verdict, healthy.notes)
    assert healthy.all_clear_confidence == "low" and "does not show the job finished" in healthy.notes[0]
    for k, failure in enumerate(_FAILURES):
        at = (k * 2) % (len(steps) + 1)
        (tmp_path / str(k)).mkdir()
        d = _diagnose(tmp_path / str(k), {"log.txt": _wrap(wrapper, steps[:at] + [failure] + steps[at:])})
        assert d.verdict != ClassId.NO_FAILURE, (failure, d.verdict)


@pytest.mark.parametrize("variant", ["stamped", "wrapped", "cut-tail", "two-of-four-ranks", "slurm-labels"])
@pytest.mark.parametrize("style", ["iter-completed", "quoted-record", "allreduce-ok"])
def test_success_evidence_survives_stamps_wraps_cuts_and_a_subset_of_ranks(tmp_path, style, variant):
    steps = [_SUCCESS[style](i) for i in range(1, 12)]
    ranked = _wrap("torch", steps)
    if variant == "stamped":
        files = {"log.txt": [f"2024-05-01T10:00:{i:02d}.123456Z {t}" for i, t in enumerate(ranked)]}
    elif variant == "wrapped":  # a paste hard-wrapped at 60 columns: the last whole line still reads
        files = {"log.txt": [t[k : k + 60] for t in ranked for k in range(0, len(t), 60)] + ranked[-1:]}
    elif variant == "cut-tail":  # the last line cut mid-way
        files = {"log.txt": [*ranked[:-1], ranked[-1][:12]]}
    elif variant == "two-of-four-ranks":
        files = {f"rank{r}.log": _wrap("torch", steps, r) for r in (1, 3)}
    else:  # srun -l on every line of two ranks
        files = {"log.txt": [WRAPPERS["slurm"](i % 2, t) for i, t in enumerate(steps)]}
    d = _diagnose(tmp_path, files)
    assert d.verdict == ClassId.NO_FAILURE, (d.verdict, d.notes)
    assert d.confidence == "low"


@pytest.mark.parametrize(
    "line",
    [
        "{'epoch': 3, 'lr': 0.1}",
        "{'max_grad_norm': 1.0, 'loss': 'ce', 'epochs': 300}",
        "step 4 completed with errors",
        "iter 5 done, 2 failures",
        "allreduce ok, but rank 1 hangs",
        "rank 0 (GPU0): allreduce 0 enqueued",
        "Tensor Parallel training starting...",
    ],
)
def test_settings_a_step_done_with_errors_and_a_queued_collective_are_no_success(tmp_path, line):
    sig = classify(line)
    assert sig is None or sig.family != SignalFamily.PROGRESS, (line, sig)
    d = _diagnose(tmp_path, {"log.txt": _wrap("torch", [line] * 3)})
    assert d.verdict != ClassId.NO_FAILURE, (line, d.verdict, d.notes)


@pytest.mark.parametrize("mesh", ["DeviceMesh('cuda', [0, 1, 2, 3])", "mesh = init_device_mesh('cuda', (2, 4))", None])
def test_a_device_mesh_shows_a_job_of_processes(tmp_path, mesh):
    steps = ["Tensor Parallel training starting..."] + [_SUCCESS["iter-completed"](i) for i in range(3)]
    d = _diagnose(tmp_path, {"log.txt": ([f"Device Mesh created: device_mesh={mesh}"] if mesh else []) + steps})
    if mesh is None:  # one process's progress: nothing distributed was read
        assert d.verdict == ClassId.NO_EVIDENCE, (d.verdict, d.notes)
    else:
        assert d.verdict == ClassId.NO_FAILURE, (d.verdict, d.notes)
        assert d.all_clear_confidence == "low"


_FLAT_TB = (
    'Traceback (most recent call last): File "train.py", line 257, in <module> main(parse_args()) '
    'File "train.py", line 114, in main loader = get_loader(args.data_dir) '
    'File "/opt/conda/lib/python3.10/site-packages/torchvision/datasets/mnist.py", line 83, in __init__ '
    "raise RuntimeError(msg) {exc}"
)
_FLAT_EXCS = {
    "dataset": ("RuntimeError: Dataset not found. You can use download=True to download it", "RuntimeError"),
    "key": ("KeyError: 'label'", "KeyError"),
    "file": ("FileNotFoundError: [Errno 2] No such file or directory: '/data/train.csv'", "FileNotFoundError"),
}
_FLAT_HOSTS = {
    "sagemaker": lambda tb: (
        'AlgorithmError: ExecuteUserScriptError: Command "/opt/conda/bin/python3 train.py --backend gloo" '
        "INFO:__main__:Initialized the distributed environment: 'gloo' backend on 2 nodes. "
        f"INFO:__main__:Get train data loader {tb}, exit code: 1"
    ),
    "log-line": lambda tb: f"INFO:__main__:Initialized the distributed environment: 'nccl' backend {tb}",
    "ranked": lambda tb: f"[rank1]:ERROR worker failed: {tb}",
}


@pytest.mark.parametrize("host", sorted(_FLAT_HOSTS))
@pytest.mark.parametrize("exc", sorted(_FLAT_EXCS))
def test_a_traceback_flattened_onto_one_line_is_the_processs_own_exception(tmp_path, host, exc):
    text, exc_type = _FLAT_EXCS[exc]
    line = _FLAT_HOSTS[host](_FLAT_TB.format(exc=text))
    d = _diagnose(tmp_path, {"log.txt": [line]})
    assert d.verdict == ClassId.RANK_CRASH, (d.verdict, [f.summary for f in d.findings])
    assert exc_type in d.findings[0].summary
    if host == "ranked":
        assert d.culprit_ranks in ([], [1]), d.culprit_ranks
    else:
        assert d.culprit_ranks == [], d.culprit_ranks
