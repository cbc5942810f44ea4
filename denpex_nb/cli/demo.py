"""``denpex-nb demo [--out DIR] [--world-size N]``: a real failing job, diagnosed and reported.

Runs the all_gather shape-mismatch reproducer on gloo as separate processes
(:func:`denpex_nb.repro.run`), renders the incident report of what it left
(:func:`denpex_nb.report.render`, whose kernel loads and diagnoses the run) and prints the verdict
the report recorded. Exit 0 when the report's cells all ran, 1 when one failed.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from pathlib import Path


def run(args) -> int:
    from .. import repro
    from ..report import ranks_text, render

    t0 = time.perf_counter()
    out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="denpex-demo-"))
    out.mkdir(parents=True, exist_ok=True)
    run_dir = out / "run"
    if run_dir.exists():
        shutil.rmtree(run_dir)
    print(
        f"running allgather-shape-mismatch on gloo with {args.world_size} ranks (a real multi-process job) ...",
        flush=True,
    )
    result = repro.run("allgather-shape-mismatch", world_size=args.world_size, trace=True, timeout=5.0, out=run_dir)
    codes = ", ".join(f"rank {r}: {c}" for r, c in enumerate(result.exit_codes))
    print(f"run finished in {result.wall_s:.1f} s ({codes}); logs in {result.out_dir}", flush=True)
    # the report's kernel loads and diagnoses the run; its recorded summary is the verdict printed here
    res = render([str(result.out_dir)], out / "report.html", title="denpex_nb demo: all_gather shape mismatch")
    if res.summary:
        s = res.summary
        init = "undetermined" if s["initiating_rank"] is None else s["initiating_rank"]
        print(
            f"verdict: {s['verdict']} ({s['confidence']} confidence): culprit ranks "
            f"{ranks_text(s['culprit_ranks'])}, initiating rank {init}"
        )
        if s.get("summary"):
            print(f"  {s['summary']}")
    else:
        print("verdict: unknown (the report notebook failed before diagnosing; see the report)")
    print(f"report: {res.html.resolve()}")
    print(f"done in {time.perf_counter() - t0:.1f} s")
    if res.error:
        print(f"denpex-nb: warning: the report was rendered, but {res.error.splitlines()[0][:300]}", file=sys.stderr)
        return 1
    return 0
