"""A load of dumps imports the file readers only; the text readers come with the first text file."""

from __future__ import annotations

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROBE = """
import sys
import denpex_nb as dx
from denpex_nb.testing.frcompare import write_synthetic_dumps
text = ("c10d", "nccl", "nccl_tests", "python", "horovod", "frtrace_text")
loaded = lambda: sorted(m for m in text if "denpex_nb.ingest." + m in sys.modules)
write_synthetic_dumps(sys.argv[1] + "/fr", 2, 3, "size", plant_rank=1)
inc = dx.load(sys.argv[1] + "/fr", jobs=1)
print(len(inc.events), loaded())
open(sys.argv[1] + "/rank0.log", "w").write("[rank0]: RuntimeError: boom\\n")
inc = dx.load(sys.argv[1], jobs=1)
print(len(inc.events), loaded(), len(inc.errors) > 0)
from denpex_nb.ingest.base import file_readers, text_readers
print([r.name for r in file_readers()], [r.name for r in text_readers()])
"""


def test_dumps_alone_leave_the_text_readers_unimported_and_the_registry_order_holds(tmp_path):
    env = dict(os.environ, PYTHONPATH=ROOT)
    out = subprocess.run(
        [sys.executable, "-c", PROBE, str(tmp_path)], capture_output=True, text=True, env=env, timeout=120, cwd=ROOT
    )
    assert out.returncode == 0, out.stderr
    first, second, names = out.stdout.strip().splitlines()[-3:]
    assert first == "6 []"
    assert second == "6 ['c10d', 'frtrace_text', 'horovod', 'nccl', 'nccl_tests', 'python'] True"
    assert names == (
        "['repro_manifest', 'fr_pickle', 'fr_json', 'trace'] "
        "['c10d', 'nccl', 'nccl_tests', 'python', 'horovod', 'frtrace']"
    )
