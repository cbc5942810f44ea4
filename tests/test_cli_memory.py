"""The CLI's process asks numpy for ordinary pages (``NUMPY_MADVISE_HUGEPAGE=0``) unless the user
set the variable: on a kernel whose transparent-huge-page defragmentation is ``madvise`` each big
array could stall on memory compaction (see ``denpex_nb.cli.HUGEPAGE_ENV``)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROBE = """
import sys
from denpex_nb import cli
code = cli.main(["diagnose", sys.argv[1], "--json"])
import numpy
print(code, numpy._core.multiarray._get_madvise_hugepage())
"""


@pytest.mark.parametrize(("preset", "expected"), [(None, "False"), ("1", "True"), ("0", "False")])
def test_the_cli_turns_numpys_hugepage_advice_off_unless_the_user_chose(tmp_path, preset, expected):
    log = tmp_path / "rank0.log"
    log.write_text("[rank0]: RuntimeError: boom\n")
    env = {k: v for k, v in os.environ.items() if k != "NUMPY_MADVISE_HUGEPAGE"}
    env["PYTHONPATH"] = ROOT
    if preset is not None:
        env["NUMPY_MADVISE_HUGEPAGE"] = preset
    out = subprocess.run(
        [sys.executable, "-c", PROBE, str(log)], capture_output=True, text=True, env=env, timeout=120, cwd=ROOT
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == f"0 {expected}"


TUNE = """
from denpex_nb import cli
print(cli.keep_freed_memory())
"""


@pytest.mark.skipif(
    not sys.platform.startswith("linux") or os.confstr("CS_GNU_LIBC_VERSION") is None, reason="glibc only"
)
@pytest.mark.parametrize(("tunables", "expected"), [(None, "True"), ("glibc.malloc.trim_threshold=1000000", "False")])
def test_diagnose_keeps_freed_memory_unless_the_user_tuned_malloc(tunables, expected):
    """Without it each 2M-row array of a big incident arrives as fresh pages (kernel time); a user
    who set glibc's malloc tunables keeps them."""
    env = {k: v for k, v in os.environ.items() if k != "GLIBC_TUNABLES"}
    env["PYTHONPATH"] = ROOT
    if tunables is not None:
        env["GLIBC_TUNABLES"] = tunables
    out = subprocess.run([sys.executable, "-c", TUNE], capture_output=True, text=True, env=env, timeout=120, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == expected
