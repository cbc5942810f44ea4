"""Wall time of each reproducer run (broken and fixed) against the 15 s bar, gloo.

Run: python benchmarks/bench_repro_wall.py [--world-size 2] [--debug off] [--scenario ID ...]
 or: python benchmarks/bench_repro_wall.py --from-index data/recorded/gloo/index.json
     (summarise the walls measured while recording, every scenario/variant/mode/world size,
     without starting anything)
Every run uses the tracer and Flight Recorder dumps (as the recorded data do). Writes
benchmarks/results/bench_repro_wall_w<N>_<debug>.json. Wall includes starting N Python processes
that import torch, so it is dominated by start-up on a 2-core machine; it is measured under
whatever else runs on the machine (the load average is saved with the figures).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

BAR_S = 15.0


def main(argv=None):
    from _two_ranks import save

    from denpex_nb import repro

    p = argparse.ArgumentParser()
    p.add_argument("--world-size", type=int, default=2)
    p.add_argument("--debug", default="off")
    p.add_argument("--scenario", nargs="*", default=None)
    p.add_argument("--from-index", default=None, help="summarise a recorded index.json instead of running")
    args = p.parse_args(argv)
    if args.from_index:
        return summarise_index(args.from_index)
    rows = []
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        for sid in args.scenario or list(repro.scenarios()):
            for variant in ("broken", "fixed"):
                r = repro.run(
                    sid,
                    fixed=variant == "fixed",
                    world_size=args.world_size,
                    debug=args.debug,
                    flight_recorder=True,
                    trace=True,
                    out=os.path.join(tmp, f"{sid}-{variant}"),
                    wall_limit=120,
                )
                rows.append(
                    {
                        "scenario": sid,
                        "variant": variant,
                        "wall_s": round(r.wall_s, 2),
                        "exit_codes": r.exit_codes,
                        "within_bar": r.wall_s <= BAR_S,
                    }
                )
                print(
                    f"{sid:<26} {variant:<6} {r.wall_s:6.1f} s  {'ok ' if r.wall_s <= BAR_S else 'OVER'}  "
                    f"exit codes {r.exit_codes}",
                    flush=True,
                )
    over = [f"{x['scenario']}/{x['variant']}" for x in rows if not x["within_bar"]]
    print(
        f"{len(rows) - len(over)}/{len(rows)} runs within {BAR_S:.0f} s; max {max(x['wall_s'] for x in rows):.1f} s; "
        f"load average before {load_before[0]:.1f}, after {os.getloadavg()[0]:.1f}"
    )
    res = {
        "bar_s": BAR_S,
        "world_size": args.world_size,
        "debug": args.debug,
        "runs": rows,
        "over_bar": over,
        "load_average_before": load_before,
    }
    print("written", save(f"bench_repro_wall_w{args.world_size}_{args.debug}", res))


def summarise_index(path):
    import json

    from _two_ranks import save

    index = json.loads(open(path).read())
    groups = {}
    for e in index:
        groups.setdefault((e["mode"], e["world_size"]), []).append(e)
    summary = {}
    for (mode, ws), rows in sorted(groups.items()):
        walls = sorted(r["wall_s"] for r in rows)
        over = [f"{r['scenario']}/{r['variant']}" for r in rows if r["wall_s"] > BAR_S]
        summary[f"{mode}-w{ws}"] = {
            "runs": len(rows),
            "median_s": walls[len(walls) // 2],
            "max_s": walls[-1],
            "over_bar": over,
        }
        print(
            f"{mode:>6} w{ws}: {len(rows)} runs, median {walls[len(walls) // 2]:.1f} s, max {walls[-1]:.1f} s, "
            f"over {BAR_S:.0f} s: {len(over)} {over if over else ''}"
        )
    print(
        "written", save("bench_repro_wall_recorded", {"source": path, "bar_s": BAR_S, "groups": summary, "runs": index})
    )


if __name__ == "__main__":
    main()
