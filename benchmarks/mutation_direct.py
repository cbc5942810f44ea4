"""A semantic mutation run without reach maps: every in-scope mutant of a campaign config's module
(bench_mutation.py's operators and scopes, cosmic-ray's ``mutate_code``), applied to an export of a
commit, each run against a fixed, ordered list of test files (``pytest -x``, in a forked child).

Why: bench_mutation.py first records which tests reach each line (a traced run of the whole
selection per module), then runs each mutant against those tests only. On a machine at load 10 to
14 (2 cores, many sessions) that reach run over tests/analysis took longer than a session has (it
did not finish in 30 minutes). Here the test files are named per module, killers first, and a
mutant stops at its first failing test; a survivor has run every listed file. What this cannot see:
a test outside the list that would kill a survivor (check survivors with verify_mutants.py against
the rest of the suite); the report says which files each module ran.

    python benchmarks/mutation_direct.py --config C.toml --module denpex_nb/analysis/rules.py \\
        --tests tests/analysis/test_decisions_records_end.py ... --out run.jsonl --tree /tmp/t
    python benchmarks/mutation_direct.py --report run.jsonl ... --json R.json --markdown R.md

Each mutant is one JSON line: module, line, operator, occurrence, source, mutated, outcome (killed,
survived, timeout), killed_by (the first failed test), wall_s. ``--report`` merges several runs'
lines into a JSON summary and a Markdown table, survivors marked with their recorded
``[[equivalent]]`` reason (benchmarks/mutation_equivalents.toml) or as unexplained.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import tomllib

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

PYTEST_ARGS = ["-x", "-q", "-p", "no:cacheprovider", "-p", "no:randomly", "--hypothesis-seed=0", "-rf"]


def _export(commit: str, tree: Path) -> None:
    tree.mkdir(parents=True)
    data = subprocess.run(["git", "-C", str(ROOT), "archive", commit], capture_output=True, check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(data)) as tf:
        tf.extractall(tree, filter="data")


def _run_tests(tree: Path, tests: list[str], timeout: float) -> tuple[str, str | None]:
    """(outcome, first failed test) of the test files in a forked child importing the project from ``tree``."""
    import pytest

    out = tree.parent / f"{tree.name}.out.txt"
    pid = os.fork()
    if pid == 0:
        code = 3
        try:
            fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(fd, 1)
            os.dup2(fd, 2)
            os.chdir(tree)
            sys.path[:0] = [str(tree)]
            code = int(pytest.main([*PYTEST_ARGS, *tests]))
        finally:
            os._exit(code)
    t0 = time.monotonic()
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() - t0 > timeout:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            return "timeout", None
        time.sleep(0.2)
    if os.waitstatus_to_exitcode(status) == 0:
        return "survived", None
    text = out.read_text(errors="replace")
    failed = [ln.split(" ", 1)[1].split(" - ")[0] for ln in text.splitlines() if ln.startswith("FAILED ")]
    return "killed", (failed[0] if failed else "(error: " + " ".join(text.split())[-200:] + ")")


def run(args) -> int:
    import bench_mutation as bm
    from cosmic_ray.mutating import mutate_code
    from cosmic_ray.plugins import get_operator

    bm.register_operators()
    cfg = tomllib.loads(args.config.read_text())
    mod = next(m for m in cfg["module"] if m["path"] == args.module)
    if not args.tree.exists():
        _export(args.commit, args.tree)
    import hypothesis  # noqa: F401 - the third-party libraries once, never the project (see _run_tests)
    import numpy  # noqa: F401
    import pandas  # noqa: F401

    path = args.tree / args.module
    original = path.read_text(encoding="utf-8")
    specs = bm.mutations_of(path, args.module, cfg["campaign"]["operators"], mod.get("scope"))
    for s in specs:
        mutated = mutate_code(original, get_operator(s.operator_name)(), s.occurrence)
        if mutated is None:
            continue
        a, b = original.splitlines(), mutated.splitlines()
        i = next((k for k, (x, y) in enumerate(zip(a, b)) if x != y), 0)
        t0 = time.monotonic()
        try:
            path.write_text(mutated, encoding="utf-8")
            outcome, by = _run_tests(args.tree, args.tests, args.timeout)
        finally:
            path.write_text(original, encoding="utf-8")
        rec = {
            "module": args.module,
            "line": i + 1,
            "operator": s.operator_name,
            "occurrence": s.occurrence,
            "source": a[i].strip(),
            "mutated": b[i].strip(),
            "outcome": outcome,
            "killed_by": by,
            "wall_s": round(time.monotonic() - t0, 1),
            "tests": args.tests,
            "commit": args.commit,
        }
        with args.out.open("a", encoding="utf-8") as f:
            f.write(json.dumps(rec) + "\n")
        print(outcome, args.module, i + 1, s.operator_name, b[i].strip()[:90], flush=True)
    return 0


def _equivalent(m: dict, table: dict) -> str | None:
    for e in table.get("equivalent", []):
        if e["module"] != m["module"] or e["source"] != m["source"]:
            continue
        if e.get("operator") not in (None, m["operator"]) or e.get("mutated") not in (None, m["mutated"]):
            continue
        return " ".join(e["why"].split())
    return None


def report(args) -> int:
    table = tomllib.loads((HERE / "mutation_equivalents.toml").read_text())
    verified = {}
    for v in json.loads(args.verified.read_text()) if args.verified else []:
        verified[(v["module"], v["operator"], v["source"], v["mutated"])] = v["killed_by"]
    rows = [json.loads(ln) for p in args.report for ln in p.read_text().splitlines() if ln.strip()]
    for m in rows:
        if m["outcome"] == "survived":
            m["equivalent"] = _equivalent(m, table)
            m["killed_now_by"] = verified.get((m["module"], m["operator"], m["source"], m["mutated"]))
    mods = sorted({m["module"] for m in rows}, key=[m["module"] for m in rows].index)
    summary = {
        "method": "benchmarks/mutation_direct.py (fixed test files per module, no reach run)",
        "commit": rows[0]["commit"] if rows else None,
        "mutants": len(rows),
        "killed": sum(m["outcome"] in ("killed", "timeout") for m in rows),
        "timeouts": sum(m["outcome"] == "timeout" for m in rows),
        "survived": sum(m["outcome"] == "survived" for m in rows),
        "equivalent": sum(bool(m.get("equivalent")) for m in rows),
        "killed_by_later_tests": sum(bool(m.get("killed_now_by")) and not m.get("equivalent") for m in rows),
        "modules": [
            {
                "path": p,
                "tests": next(m["tests"] for m in rows if m["module"] == p),
                "mutants": sum(m["module"] == p for m in rows),
                "killed": sum(m["module"] == p and m["outcome"] in ("killed", "timeout") for m in rows),
            }
            for p in mods
        ],
        "all": rows,
    }
    summary["unexplained"] = summary["survived"] - summary["equivalent"] - summary["killed_by_later_tests"]
    args.json.write_text(json.dumps(summary, indent=1) + "\n")
    out = [
        f"# {args.title}",
        "",
        f"Run by `benchmarks/mutation_direct.py` at commit `{summary['commit']}` (config: `{args.config_name}`): every",
        "in-scope mutant it reached before it was stopped (the notes below say what was not run), each against",
        "the module's test files below with `pytest -x`; no reach run (the script's docstring says why, and what",
        "it cannot see).",
        "",
        "| module | tests | mutants | killed |",
        "|---|---|---|---|",
    ]
    for mm in summary["modules"]:
        tests = ", ".join(f"`{t.split('/')[-1]}`" for t in mm["tests"])
        out.append(f"| `{mm['path']}` | {tests} | {mm['mutants']} | {mm['killed']} |")
    out += [
        f"| **all** | | **{summary['mutants']}** | **{summary['killed']}** |",
        "",
        f"Survivors: {summary['survived']} = {summary['equivalent']} equivalent + {summary['killed_by_later_tests']}"
        f" killed by tests outside the run's list or written after it (verified by applying the mutant) + "
        f"{summary['unexplained']} unexplained. Timeouts (counted killed): {summary['timeouts']}.",
        "",
        f"## Survivors ({summary['survived']})",
        "",
        "| where | operator | mutant | why it survives |",
        "|---|---|---|---|",
    ]
    for m in rows:
        if m["outcome"] != "survived":
            continue
        why = m.get("equivalent") or (
            f"killed by `{m['killed_now_by']}` (verified)" if m.get("killed_now_by") else "**UNEXPLAINED**"
        )
        mutated = m["mutated"].replace("|", "\\|").replace("`", "'")
        out.append(f"| `{m['module']}:{m['line']}` | `{m['operator'].split('/')[1]}` | `{mutated}` | {why} |")
    args.markdown.write_text("\n".join(out) + "\n" + (args.notes.read_text() if args.notes else ""))
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", type=Path)
    ap.add_argument("--module")
    ap.add_argument("--tests", nargs="+")
    ap.add_argument("--commit", default="HEAD")
    ap.add_argument("--tree", type=Path, help="where the commit is exported (one per parallel run)")
    ap.add_argument("--out", type=Path, help="JSON lines, appended")
    ap.add_argument("--timeout", type=float, default=420.0, help="wall seconds a mutant's tests may take")
    ap.add_argument("--report", type=Path, nargs="+", help="merge these runs' JSON lines into --json/--markdown")
    ap.add_argument("--verified", type=Path, help="verify_mutants.py's output: survivors a test kills")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--markdown", type=Path)
    ap.add_argument("--notes", type=Path, help="Markdown appended to the report")
    ap.add_argument("--title", default="Semantic mutation run")
    ap.add_argument("--config-name", default="")
    args = ap.parse_args(argv)
    if args.report:
        return report(args)
    args.commit = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", args.commit], capture_output=True, text=True, check=True
    ).stdout.strip()
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
