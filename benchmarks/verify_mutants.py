"""Check that a test written after a mutation campaign kills a survivor of it: mutant on, the test
fails; mutant off, it passes. The result feeds ``bench_mutation.py --verified``.

A survivor is named as the campaign's report names it (module, operator, the source line and the
mutated line, stripped). For each, on a fresh export (``git archive``) of the campaign's commit with
the *current* ``tests/`` laid over it (the product code is the run's, the tests are today's):

1. the named test (``killed_by``, a pytest node id) runs on the unmutated tree: it must pass;
2. the mutation is applied with cosmic-ray's own ``mutate_code`` (the operator and occurrence the
   report recorded), and the mutated line must read as the report says (else ``STALE``);
3. the named test runs again: it must fail (``verified``), else ``NOT KILLED``.

The file is restored after each. Entries that pass are written, with ``run_commit``, to
``--out`` (merged with what it holds, keyed by the survivor); the others are printed and the exit
status is 1.

    python benchmarks/verify_mutants.py --report benchmarks/results/mutation_semantic.json \\
        --claims /tmp/claims.json --out benchmarks/results/mutation_semantic_verified.json

``--claims``: a JSON list of {module, operator, source, mutated, killed_by}. Where one module holds
the same line (and mutation) twice, the claim covers every survivor of that text: each is applied
and must be killed (a twin the run killed is not the claim's).

``--fixed``: check the ``[[fixed]]`` entries of ``benchmarks/mutation_equivalents.toml`` instead
(survivors whose behaviour was the right one; the code was changed after the run): on the run's
tree, the entry's ``test`` must FAIL unmutated (the run's code was wrong) and PASS with the mutant
applied (the mutant decides as the fix does). Nothing is written; the exit status says.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def export(commit: str, dest: Path) -> None:
    data = subprocess.run(["git", "-C", str(ROOT), "archive", commit], capture_output=True, check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(data)) as tf:
        tf.extractall(dest, filter="data")
    shutil.rmtree(dest / "tests")
    shutil.copytree(ROOT / "tests", dest / "tests", ignore=shutil.ignore_patterns("__pycache__", ".hypothesis"))


PYTEST_ARGS = ["-x", "-q", "-p", "no:cacheprovider", "-p", "no:randomly", "--hypothesis-seed=0"]


def _preload() -> None:
    """Import the third-party libraries once (never the project): each test run is a fork that
    imports the project afresh from the tree, mutated or not (as bench_mutation's fork server)."""
    import hypothesis  # noqa: F401
    import numpy  # noqa: F401
    import pandas  # noqa: F401
    import pytest  # noqa: F401


def run_test(tree: Path, node: str, timeout: float) -> tuple[bool, str]:
    """Run one test in a forked child (the project imported there, from ``tree``): (passed, output)."""
    assert not any(m == "denpex_nb" or m.startswith("denpex_nb.") for m in sys.modules)
    out = tree.parent / "out.txt"
    pid = os.fork()
    if pid == 0:
        code = 3
        try:
            fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(fd, 1)
            os.dup2(fd, 2)
            os.chdir(tree)
            sys.path[:0] = [str(tree)]
            os.environ["PYTHONDONTWRITEBYTECODE"] = "1"
            sys.dont_write_bytecode = True
            import pytest

            code = int(pytest.main([*PYTEST_ARGS, node]))
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            return False, "timeout"
        time.sleep(0.05)
    return os.waitstatus_to_exitcode(status) == 0, out.read_text(errors="replace")[-1500:]


def run_on_mutant(
    tree: Path, module: str, operator: str, occurrence: int, expected: str, test: str, timeout: float
) -> tuple[bool, str] | None:
    """Apply one mutant (cosmic-ray's ``mutate_code``) to ``tree``, run ``test`` on it, restore the
    file; (passed, output), or None when the mutated line no longer reads ``expected`` (stale)."""
    from cosmic_ray.mutating import mutate_code
    from cosmic_ray.plugins import get_operator

    path = tree / module
    original = path.read_text(encoding="utf-8")
    mutated = mutate_code(original, get_operator(operator)(), occurrence)
    if mutated is None or _mutated_line(original, mutated) != expected:
        return None
    try:
        path.write_text(mutated, encoding="utf-8")
        return run_test(tree, test, timeout)
    finally:
        path.write_text(original, encoding="utf-8")


def _mutated_line(original: str, mutated: str) -> str:
    import difflib

    plus = [
        ln[1:].strip()
        for ln in difflib.unified_diff(original.split("\n"), mutated.split("\n"), lineterm="", n=0)
        if ln.startswith("+") and not ln.startswith("+++") and ln[1:].strip()
    ]
    return " / ".join(plus)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--report", type=Path, required=True, help="the campaign's JSON (its commit and mutants)")
    ap.add_argument("--claims", type=Path)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--fixed", action="store_true", help="check mutation_equivalents.toml's [[fixed]] entries")
    ap.add_argument("--timeout", type=float, default=600.0)
    args = ap.parse_args(argv)
    if not args.fixed and (args.claims is None or args.out is None):
        ap.error("--claims and --out are needed (or --fixed)")

    sys.path.insert(0, str(HERE))
    from bench_mutation import EQUIVALENTS, load_equivalents, register_operators

    register_operators()
    _preload()
    report = json.loads(args.report.read_text())
    commit = report["commit"]
    # one key can name several mutants: the same line text (and mutation) twice in a module
    by_key: dict[tuple, list[dict]] = {}
    for m in report["all"]:
        by_key.setdefault((m["module"], m["operator"], m["source"], m["mutated"]), []).append(m)
    if args.fixed:
        return check_fixed(report, load_equivalents(EQUIVALENTS, "fixed", commit=commit), by_key, args.timeout)
    claims = json.loads(args.claims.read_text())
    old = json.loads(args.out.read_text()) if args.out.exists() else []
    kept = {(v["module"], v["operator"], v["source"], v["mutated"], v.get("run_commit")): v for v in old}
    failed = 0
    with tempfile.TemporaryDirectory(prefix="verify_mutants_") as tmp:
        tree = Path(tmp) / "tree"
        export(commit, tree)
        for c in claims:
            key = (c["module"], c["operator"], c["source"], c["mutated"])
            # the survivors of the key (a claim is about a survivor; its twin may have been killed)
            same = [m for m in by_key.get(key, []) if m["outcome"] != "killed"] or by_key.get(key, [])
            if (*key, commit) in kept and kept[(*key, commit)]["killed_by"] == c["killed_by"]:
                print(f"already verified: {c['module']} {c['operator']}: {c['mutated']}", flush=True)
                continue
            tag = f"{c['module']}:{','.join(str(m['line']) for m in same) or '?'} {c['operator']}: {c['mutated']}"
            if not same:
                print(f"NOT IN THE REPORT: {tag}")
                failed += 1
                continue
            ok, out = run_test(tree, c["killed_by"], args.timeout)
            if not ok:
                print(f"FAILS UNMUTATED: {tag}: {c['killed_by']}\n{out}")
                failed += 1
                continue
            # the claim covers every surviving mutant of its key (identical lines): each must be killed
            verdicts = [
                run_on_mutant(
                    tree, c["module"], c["operator"], m["occurrence"], c["mutated"], c["killed_by"], args.timeout
                )
                for m in same
            ]
            if any(r is None for r in verdicts):
                print(f"STALE: {tag}")
                failed += 1
                continue
            if any(passed or out == "timeout" for passed, out in verdicts):
                print(f"NOT KILLED: {tag}: {c['killed_by']}")
                failed += 1
                continue
            print(f"verified: {tag}: {c['killed_by']}", flush=True)
            entry = {**{k: c[k] for k in ("module", "operator", "source", "mutated", "killed_by")}}
            entry.update(line=same[0]["line"], occurrence=same[0]["occurrence"], run_commit=commit)
            if len(same) > 1:
                entry.update(lines=[m["line"] for m in same], occurrences=[m["occurrence"] for m in same])
            kept[(*key, commit)] = entry
            # written after each one: a long check stopped halfway keeps what it verified
            args.out.write_text(json.dumps(list(kept.values()), indent=1) + "\n")
    return 1 if failed else 0


def check_fixed(report: dict, fixed: list[dict], by_key: dict, timeout: float) -> int:
    """Each ``[[fixed]]`` survivor: its test fails on the run's code and passes on the mutant."""

    failed = 0
    with tempfile.TemporaryDirectory(prefix="verify_fixed_") as tmp:
        tree = Path(tmp) / "tree"
        export(report["commit"], tree)
        for e in fixed:
            m = next((ms[0] for k, ms in by_key.items() if k[0] == e["module"] and k[1] == e["operator"]
                      and k[2] == e["source"] and k[3] == e.get("mutated", k[3])), None)  # fmt: skip
            tag = f"{e['module']} {e['operator']}: {e['source']}"
            if m is None:
                print(f"NOT IN THE REPORT: {tag}")
                failed += 1
                continue
            ok, _out = run_test(tree, e["test"], timeout)
            if ok:
                print(f"PASSES ON THE RUN'S CODE (nothing was wrong?): {tag}: {e['test']}")
                failed += 1
                continue
            result = run_on_mutant(tree, e["module"], e["operator"], m["occurrence"], m["mutated"], e["test"], timeout)
            if result is None:
                print(f"STALE: {tag}")
                failed += 1
                continue
            ok, out = result
            print(
                f"{'verified' if ok else 'MUTANT FAILS THE FIX TEST'}: {tag}: {e['test']}" + ("" if ok else "\n" + out)
            )
            failed += not ok
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
