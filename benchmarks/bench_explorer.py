"""Explorer interaction latency in a real JupyterLab, in Chromium: choose a seq at 512 ranks x 2000 collectives.

python benchmarks/bench_explorer.py [--ranks 512] [--entries 2000] [--choices 12]
    -> prints the figures, writes benchmarks/results/bench_explorer.json (goal: median < 300 ms)

What is measured: the post-mortem notebook as shipped (notebooks/postmortem.ipynb, its `logs` set
to the incident) is opened in a JupyterLab server in headless Chromium (Playwright, the system
chromium) and run; then a seq is committed in the explorer's seq box (its change event, as Enter
fires) and the time until the table of every rank at that seq is on screen is taken inside the
page (performance.now and a MutationObserver): the kernel round trip, the explorer's work and the
browser's update. Between choices the benchmark waits for the picture to settle, as a person
looking at it would. The incident: one Flight Recorder dump per rank from
denpex_nb.testing.frcompare.write_synthetic_dumps, rank 300 passing a different size at seq 1500.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GOAL_S = 0.300


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=512)
    ap.add_argument("--entries", type=int, default=2000)
    ap.add_argument("--choices", type=int, default=12)
    ap.add_argument("--out", default=str(ROOT / "benchmarks/results/bench_explorer.json"))
    ap.add_argument("--screenshot", default=None, help="save a screenshot of the explorer here")
    args = ap.parse_args()

    import nbformat

    from denpex_nb.testing.frcompare import write_synthetic_dumps
    from denpex_nb.testing.jupyterlab import LabServer, Notebook, browser

    culprit, planted_seq = min(300, args.ranks - 1), max(2, int(args.entries * 0.75))
    work = Path(tempfile.mkdtemp(prefix="dx-bench-explorer-"))
    try:
        t0 = time.perf_counter()
        write_synthetic_dumps(
            work / "lab" / "dumps", args.ranks, args.entries, "size", plant_rank=culprit, plant_seq=planted_seq
        )
        gen_s = time.perf_counter() - t0
        nb = nbformat.read(str(ROOT / "notebooks/postmortem.ipynb"), as_version=4)
        (params,) = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
        params.source = 'logs = ["dumps"]\ninteractive = None'
        nbformat.write(nb, str(work / "lab" / "postmortem.ipynb"))
        seqs = [1, planted_seq, args.entries, planted_seq - 1, args.entries // 2, 7]  # never the current one
        seqs = (seqs * ((args.choices + len(seqs) - 1) // len(seqs)))[: args.choices]
        server = LabServer(work / "lab")
        with server:
            with browser(width=1400, height=1600) as page:
                book = Notebook(page, server, "postmortem.ipynb", timeout_ms=900_000)
                run_s = book.run_all()
                book.wait_text("status", f"{args.ranks} ranks × {args.entries} seqs")
                opened_on = book.text("at-seq").splitlines()[0]
                lat = []
                for s in seqs:
                    before = book.wait_picture_settled()
                    lat.append(book.choose_seq_latency(s))
                    try:  # let the picture settle before the next choice, as a person would
                        book.wait_picture_change(before, timeout_ms=20_000)
                    except Exception:  # noqa: BLE001 - an unchanged picture is fine (same column)
                        pass
                    page.wait_for_timeout(300)
                culprit_first = book.text("at-seq")
                if args.screenshot:
                    book.type_int("seq", planted_seq)
                    book.wait_text("at-seq", f"Every rank at seq {planted_seq} ")
                    page.wait_for_timeout(1500)
                    page.locator(".dx-explorer").first.screenshot(path=args.screenshot)
        left = server.alive()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    ms = [round(x * 1000, 1) for x in lat]
    result = {
        "ranks": args.ranks,
        "collectives": args.entries,
        "events": args.ranks * args.entries,
        "generate_dumps_s": round(gen_s, 1),
        "run_all_cells_s": round(run_s, 1),
        "opened_on": opened_on,
        "choose_seq_ms": ms,
        "median_ms": round(statistics.median(ms), 1),
        "max_ms": max(ms),
        "goal_ms": GOAL_S * 1000,
        "met": statistics.median(ms) < GOAL_S * 1000,
        "processes_left": left,
        "last_table_head": culprit_first.splitlines()[:3],
        "cpus": os.cpu_count(),
        "load_avg": [round(x, 2) for x in os.getloadavg()],
        "python": platform.python_version(),
        "command": "python benchmarks/bench_explorer.py"
        + (f" --ranks {args.ranks}" if args.ranks != 512 else "")
        + (f" --entries {args.entries}" if args.entries != 2000 else ""),
    }
    print(
        f"explorer at {args.ranks} ranks x {args.entries} collectives: run all cells {run_s:.1f} s; "
        f"choose a seq: median {result['median_ms']:.0f} ms, max {result['max_ms']:.0f} ms over {len(ms)} choices "
        f"({ms}); goal < {GOAL_S * 1000:.0f} ms -> {'met' if result['met'] else 'NOT met'}; "
        f"load average {result['load_avg']}"
    )
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
