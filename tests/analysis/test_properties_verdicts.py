"""Never a false alarm, never a false all-clear, as properties (issue #15): healthy evidence (every
recorded fixed run, every labelled negative control, generated healthy chatter including NCCL's benign
WARNs) never gives a failure verdict, and one failure line inserted anywhere never gives
``no-failure``.

The bases are read as a user would (``load`` of the folder or files) after the insertion, in a
temporary copy. The unmodified fixed runs are pinned to ``no-failure`` by
tests/analysis/test_closed_loop.py::test_recorded_run; the negative controls here. Wild cases that
carry a ``batch`` key are held out: they are scored blind first (benchmarks/bench_blind.py).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

pytest.importorskip("hypothesis")
from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import denpex_nb as dx  # noqa: E402
from tests import wild  # noqa: E402

from . import _gen as g  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
FIXED = sorted(str(p) for p in (ROOT / "data" / "recorded").glob("*/*/fixed-*") if p.is_dir())
NEGATIVES = [c for c in wild.cases() if c.get("role") == "negative-control" and "batch" not in c]
#: verdicts that say something failed (abstentions and the all-clear are not)
NOT_FAILURES = {"no-failure", "no-evidence"}
TEXT = (".log", ".txt", ".out", ".err")

BENIGN = [
    "tern-07:61204:61266 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>",
    "tern-07:61204:61266 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.1<0>",
    "tern-07:61204:61266 [0] NCCL WARN NET/Plugin : dlerror=libnccl-net.so: cannot open shared object file: "
    "No such file or directory No plugin found (libnccl-net.so), using internal implementation",
    "tern-07:61204:61266 [0] NCCL WARN NET/IB : Unable to open libibverbs.so: error loading library",
    "step 12 loss=2.31 lr=3e-4",
    "Initializing distributed: GLOBAL_RANK: 0, MEMBER: 1/4",
    "[W1129 22:27:23.880000 1 ProcessGroupNCCL.cpp:4561] Warning: TORCH_NCCL_AVOID_RECORD_STREAMS is the "
    "default now, this environment variable is thus deprecated. (function operator())",
    "[rank0]:[W1129 22:27:23.880000 1 ProcessGroupNCCL.cpp:1250] Warning: WARNING: process group has NOT been "
    "destroyed before we destruct ProcessGroupNCCL. On normal program exit, the application should call "
    "destroy_process_group to ensure that any pending NCCL operations have finished in this process.",
]
FAILURE = [
    "[rank1]:[E1129 22:27:23.880000 1 ProcessGroupNCCL.cpp:9] [Rank 1] Watchdog caught collective operation "
    "timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE, NumelIn=16, NumelOut=16, Timeout(ms)=600000) ran for 600001 "
    "milliseconds before timing out.",
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.15 GiB",
    "tern-07:61204:61270 [0] NCCL WARN Cuda failure 'out of memory'",
    "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:553] Connection closed by peer [127.0.0.1]:29921",
    "E1129 22:27:48.169000 10045 torch/distributed/elastic/multiprocessing/api.py:1002] failed (exitcode: 1) "
    "local_rank: 0 (pid: 10053) of binary: /usr/bin/python",
    "[rank1]: torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/"
    "ProcessGroupNCCL.cpp:1970, unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.18.1",
]
BASES = [("fixed", p) for p in FIXED] + [("negative", c["id"]) for c in NEGATIVES] + [("generated", "")]


def _copy(kind: str, ident: str, into: str, chatter: list[str]) -> list[str]:
    """Copy a base into ``into`` (a generated one is written there) and return its text files."""
    if kind == "fixed":
        shutil.copytree(ident, into, dirs_exist_ok=True)
    elif kind == "negative":
        case = next(c for c in NEGATIVES if c["id"] == ident)
        for f in case["files"]:
            dst = Path(into) / f
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(Path(case["dir"]) / f, dst)
    else:  # generated healthy chatter: a few ranks' launcher and NCCL lines
        for r in range(len(chatter) % 3 + 1):
            (Path(into) / f"rank{r}.log").write_text("\n".join(chatter or BENIGN[:2]) + "\n")
    return sorted(str(p) for p in Path(into).rglob("*") if p.is_file() and p.suffix in TEXT and "trace" not in p.parts)


def _verdict(kind: str, ident: str, inserts: list[tuple[int, int, str]], chatter: list[str]) -> str:
    with tempfile.TemporaryDirectory(prefix="denpex_props_") as tmp:
        files = _copy(kind, ident, tmp, chatter)
        for which, where, line in inserts:
            path = files[which % len(files)]
            with open(path, encoding="utf-8", errors="surrogateescape", newline="") as fh:
                lines = fh.read().split("\n")
            at = where % (len(lines) + 1)
            lines.insert(at, line)
            with open(path, "w", encoding="utf-8", errors="surrogateescape", newline="") as fh:
                fh.write("\n".join(lines))
        return dx.diagnose(dx.load(tmp, progress=False)).verdict


@pytest.mark.parametrize("case", NEGATIVES, ids=[c["id"] for c in NEGATIVES])
def test_every_negative_control_gives_no_failure_verdict(case):
    """A labelled negative control (a healthy run's log, read from a public thread) never gives a
    failure verdict."""
    files = [os.path.join(case["dir"], f) for f in case["files"]]
    assert dx.diagnose(dx.load(*files, progress=False)).verdict in NOT_FAILURES


def test_the_bases_are_there():
    assert len(FIXED) >= 16 and len(NEGATIVES) >= 5


positions = st.tuples(st.integers(0, 50), st.integers(0, 10**6))
VERDICT_SETTINGS = g.settings(g.SETTINGS, max_examples=12 * g.SCALE)


@VERDICT_SETTINGS
@given(
    base=st.sampled_from(BASES),
    inserts=st.lists(st.tuples(st.integers(0, 50), st.integers(0, 10**6), st.sampled_from(BENIGN)), max_size=4),
    chatter=st.lists(st.sampled_from(BENIGN), max_size=6),
)
def test_healthy_chatter_anywhere_never_gives_a_failure_verdict(base, inserts, chatter):
    """Healthy evidence with benign lines (NCCL INFO and its benign WARNs, launcher banners, torch's
    deprecation and destroy_process_group warnings) inserted anywhere never gives a failure verdict."""
    assert _verdict(*base, inserts, chatter) in NOT_FAILURES


@VERDICT_SETTINGS
@given(
    base=st.sampled_from(BASES),
    where=positions,
    line=st.sampled_from(FAILURE),
    chatter=st.lists(st.sampled_from(BENIGN), max_size=6),
)
def test_one_failure_line_anywhere_never_gives_no_failure(base, where, line, chatter):
    """One failure line (a watchdog timeout, an OOM, a failing NCCL WARN, a peer gone, a launcher's
    failed exit, an NCCL error) inserted anywhere in healthy evidence never leaves it no-failure."""
    assert _verdict(*base, [(where[0], where[1], line)], chatter) != "no-failure"


def test_a_bare_oom_line_after_a_detail_fingerprint_is_read():
    """The falsifying example a deep run found (DENPEX_PROPERTY_EXAMPLES=10), kept: an OOM line inserted
    after a "Running collective" line of a recorded fixed DETAIL run was joined to it as the tail of a
    hard wrap at that line's length, and the run read no-failure."""
    base = next(b for b in BASES if b[1].endswith("dtype-mismatch/fixed-detail-w2"))
    assert _verdict(*base, [(0, 8, FAILURE[1])], []) != "no-failure"
