"""The semantic mutation campaign of issue #15: every mutant that changes a decision, run in full.

Configuration: ``benchmarks/mutation_campaign.toml`` (operators, modules and their scope, the
tests of each module). Tool: cosmic-ray 8.7.0; its missing operators (min/max swap, dropped set
member, dropped dict entry) are in ``benchmarks/mutation_operators.py``. Survivors that no input
can tell apart from the original are explained in ``benchmarks/mutation_equivalents.toml``;
a survivor without an explanation there is listed as unexplained.

What it does, for a commit (``--commit``, default HEAD):

1. exports the commit (``git archive``) into ``--work`` (one copy per parallel job), so the
   mutants are applied to that exact tree and never to a working copy;
2. builds one cosmic-ray session (a sqlite work database) per module with the campaign's operators,
   keeping only the mutation positions in the module's scope (annotations are never in scope);
3. runs the module's tests once unmutated (they must pass: the timing sets the timeout), then runs
   every mutant through cosmic-ray's own executor (``cosmic_ray.commands.execute``, local
   distributor: apply the mutation on disk, run the test command, restore);
4. writes ``benchmarks/results/mutation_semantic.json``: per mutant its module, line, operator,
   diff, outcome and the first failing test; per module and overall the killed share.

    nice -n 10 python benchmarks/bench_mutation.py                 # the whole campaign
    python benchmarks/bench_mutation.py --count                    # only count the mutants
    nice -n 10 python benchmarks/bench_mutation.py --modules align --jobs 2
    # a second sitting of one campaign: the first's pending mutants, merged under its report
    python benchmarks/bench_mutation.py --commit C --only REPORT.json-pending-list --part 0/2 --work W0 ...
    python benchmarks/bench_mutation.py --collect --work W0 W1 --base-report REPORT.json --markdown

cosmic-ray counts a mutant whose tests time out as killed (its own rule), and so does this report.
"""

from __future__ import annotations

import argparse
import ast
import glob
import hashlib
import json
import os
import platform
import re
import shlex
import subprocess
import sys
import tarfile
import threading
import time
from pathlib import Path

import tomllib

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
CONFIG = HERE / "mutation_campaign.toml"
EQUIVALENTS = HERE / "mutation_equivalents.toml"
OUT = HERE / "results" / "mutation_semantic.json"


# --- the campaign's configuration ---------------------------------------------------------------


def load_config(path: Path) -> dict:
    with open(path, "rb") as f:
        cfg = tomllib.load(f)
    for m in cfg["module"]:
        m["name"] = Path(m["path"]).stem
    return cfg


def expand_tests(patterns: list[str], cfg: dict, tree: Path) -> list[str]:
    """The test files of a module, in order, globs expanded in ``tree``; ``@name`` is a shared list."""
    out: list[str] = []
    for p in patterns:
        if p.startswith("@"):
            out.extend(expand_tests(cfg[p[1:]]["tests"], cfg, tree))
            continue
        for hit in sorted(glob.glob(str(tree / p))) if any(c in p for c in "*?[") else [str(tree / p)]:
            rel = os.path.relpath(hit, tree)
            if (tree / rel).is_file() and rel not in out:
                out.append(rel)
    return out


# --- scope: which positions of a module are mutated --------------------------------------------


def _named_ranges(source: str) -> dict[str, tuple[int, int]]:
    """Line ranges of top-level functions, methods (``Class.method``) and module-level names."""
    out: dict[str, tuple[int, int]] = {}
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out[node.name] = (node.lineno, node.end_lineno)
        elif isinstance(node, ast.ClassDef):
            out[node.name] = (node.lineno, node.end_lineno)
            for sub in node.body:
                if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    out[f"{node.name}.{sub.name}"] = (sub.lineno, sub.end_lineno)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                for n in ast.walk(t):
                    if isinstance(n, ast.Name):
                        out[n.id] = (node.lineno, node.end_lineno)
    return out


def _annotation_spans(source: str) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """(start, end) positions (line, col) of every annotation: never evaluated at run time here."""
    spans = []
    for node in ast.walk(ast.parse(source)):
        anns = []
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = node.args
            for arg in a.posonlyargs + a.args + a.kwonlyargs + [a.vararg, a.kwarg]:
                if arg is not None and arg.annotation is not None:
                    anns.append(arg.annotation)
            if node.returns is not None:
                anns.append(node.returns)
        elif isinstance(node, ast.AnnAssign):
            anns.append(node.annotation)
        for an in anns:
            spans.append(((an.lineno, an.col_offset), (an.end_lineno, an.end_col_offset)))
    return spans


def scope_filter(source: str, scope: list[str] | None):
    """A predicate on (start_pos, end_pos): in the module's scope and not inside an annotation."""
    ranges = None
    if scope:
        named = _named_ranges(source)
        unknown = [s for s in scope if s not in named]
        if unknown:
            raise SystemExit(f"bench_mutation: scope names not found in the module: {unknown}")
        ranges = [named[s] for s in scope]
    anns = _annotation_spans(source)

    def keep(start: tuple[int, int], end: tuple[int, int]) -> bool:
        if ranges is not None and not any(lo <= start[0] <= hi for lo, hi in ranges):
            return False
        return not any(a <= start and end <= b for a, b in anns)

    return keep


# --- building and running a cosmic-ray session ---------------------------------------------------


def register_operators() -> None:
    """Make the ``denpex/...`` operators known to cosmic-ray (see mutation_operators.py)."""
    import cosmic_ray.plugins

    sys.path.insert(0, str(HERE))
    import mutation_operators

    cosmic_ray.plugins.OPERATOR_PROVIDERS.setdefault("denpex", mutation_operators.Provider())


def mutations_of(module_file: Path, module_rel: str, operators: list[str], scope: list[str] | None):
    """Every in-scope mutation of a module: (MutationSpec, line text) in cosmic-ray's own order."""
    from cosmic_ray.ast import ast_nodes, get_ast
    from cosmic_ray.ast.ast_query import ASTQuery
    from cosmic_ray.plugins import get_operator
    from cosmic_ray.work_item import MutationSpec

    source = module_file.read_text(encoding="utf-8")
    keep = scope_filter(source, scope)
    tree = get_ast(source)
    out = []
    for name in operators:
        op = get_operator(name)()
        positions = ((node, s, e) for node in ast_nodes(tree) for s, e in op.mutation_positions(node))
        for occurrence, (node, start, end) in enumerate(positions):
            if not keep(start, end):
                continue
            spec = MutationSpec(
                module_path=str(module_file),
                operator_name=name,
                occurrence=occurrence,
                start_pos=start,
                end_pos=end,
                definition_name=ASTQuery(node).get_definition_name(),
            )
            out.append(spec)
    return out


def only_these(specs, module_file: Path, module_rel: str, wanted: list[dict]):
    """The specs named in ``wanted`` (``--only``: module, operator, occurrence and the source line,
    as the JSON report writes them): a rerun of chosen mutants, e.g. a run's survivors after the
    tests that kill them were written. A named mutant whose line changed is an error, never skipped."""
    lines = module_file.read_text(encoding="utf-8").split("\n")
    want = {(w["operator"], w["occurrence"]): w for w in wanted if w["module"] == module_rel}
    out = []
    for s in specs:
        w = want.pop((s.operator_name, s.occurrence), None)
        if w is None:
            continue
        if lines[s.start_pos[0] - 1].strip() != w["source"]:
            raise SystemExit(
                f"bench_mutation: --only: {module_rel} {s.operator_name} #{s.occurrence} is not on {w['source']!r}"
            )
        out.append(s)
    if want:
        raise SystemExit(f"bench_mutation: --only: not found in {module_rel}: {sorted(want)}")
    return out


def skip_equivalents(specs, module_file: Path, module_rel: str, equivalents: list[dict]):
    """``--skip-equivalent``: (the specs to run, records of those not run). A mutant is not run when
    its module, operator, original line and mutated line (the text, so a changed line runs again)
    match an ``[[equivalent]]`` entry, whose reason was written when a run found it surviving. What
    this mode cannot see: a change elsewhere that makes such a mutant decide differently; the
    default mode runs every mutant."""
    from cosmic_ray.mutating import mutate_code
    from cosmic_ray.plugins import get_operator

    original = module_file.read_text(encoding="utf-8")
    lines = original.split("\n")
    run, skipped = [], []
    for spec in specs:
        mutated = mutate_code(original, get_operator(spec.operator_name)(), spec.occurrence)
        rec = {
            **_where(module_rel, spec, lines),
            "mutated": None if mutated is None else _changed_line(original, mutated),
        }
        if mutated is not None and _entry_for(rec, equivalents) is not None:
            rec.update(
                diff=None,
                outcome="not-run-equivalent",
                worker=None,
                tests_run=0,
                cpu_s=0.0,
                tests_why=None,
                killed_by=None,
                timeout=None,
            )
            skipped.append(rec)
        else:
            run.append(spec)
    return run, skipped


def _where(module_rel: str, spec, lines: list[str]) -> dict:
    """A mutant's place, as the report names it: module, line, column, operator, occurrence, the
    function it is in and the original line's text (stripped)."""
    return {
        "module": module_rel,
        "line": spec.start_pos[0],
        "col": spec.start_pos[1],
        "operator": spec.operator_name,
        "occurrence": spec.occurrence,
        "definition": spec.definition_name,
        "source": lines[spec.start_pos[0] - 1].strip(),
    }


def _changed_line(original: str, mutated: str) -> str:
    """The mutated line(s), stripped, joined with " / " (as the report's ``mutated``)."""
    import difflib

    return " / ".join(
        ln[1:].strip()
        for ln in difflib.unified_diff(original.split("\n"), mutated.split("\n"), lineterm="", n=0)
        if ln.startswith("+") and not ln.startswith("+++") and ln[1:].strip()
    )


def job_id(module_rel: str, spec) -> str:
    return hashlib.sha1(f"{module_rel}:{spec.operator_name}:{spec.occurrence}".encode()).hexdigest()[:16]


def reach_run(tree: Path, tests: list[str], modules: list[str], cfg: dict, out: Path) -> tuple[float, float]:
    """Run the tests once, unmutated, recording which tests reach which function of ``modules``
    (``_mutation_exec.Reach``); they must pass. Returns (wall, CPU) seconds (with the recording on)."""
    spec = out.with_suffix(".spec.json")
    spec.write_text(json.dumps({"modules": [str(tree / m) for m in modules], "out": str(out)}))
    env = dict(os.environ)
    env.update(
        PYTHONPATH=os.pathsep.join([str(tree), str(HERE)]),
        PYTHONDONTWRITEBYTECODE="1",
        DENPEX_MUTATION_REACH=str(spec),
    )
    cmd = [sys.executable, "-m", "pytest", "-p", "_mutation_exec", *pytest_args(cfg), *tests]
    t0 = time.monotonic()
    log = out.with_suffix(".log")
    with open(log, "w") as fh:
        proc = subprocess.Popen(cmd, cwd=tree, env=env, stdout=fh, stderr=subprocess.STDOUT)
        _pid, status, usage = os.wait4(proc.pid, 0)
    took = time.monotonic() - t0
    cpu = usage.ru_utime + usage.ru_stime
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"bench_mutation: the unmutated tests fail:\n{log.read_text()[-4000:]}")
    return took, cpu


def pytest_args(cfg: dict) -> list[str]:
    args = list(cfg["campaign"]["pytest_args"])
    for d in cfg["campaign"].get("deselect", []):
        args += ["--deselect", d]
    return args


class ForkServer:
    """One ``_mutation_exec.serve`` process per tree (see its docstring)."""

    def __init__(self, tree: Path, sock: Path, preload: Path):
        self.sock = sock
        env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
        self.proc = subprocess.Popen(
            [sys.executable, str(HERE / "_mutation_exec.py"), "serve", str(sock), str(preload)],
            cwd=tree,
            env=env,
            stdout=subprocess.PIPE,
            text=True,
        )
        if self.proc.stdout.readline().strip() != "ready":
            raise SystemExit("bench_mutation: the fork server did not start")

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait(timeout=30)


def mutant_command(
    tree: Path,
    module_rel: str,
    pristine: Path,
    reach: Path,
    sock: Path,
    timeout: float,
    cfg,
    every_test=False,
    cpu_limit: float | None = None,
) -> str:
    args = [
        sys.executable,
        str(HERE / "_mutation_exec.py"),
        "client",
        "--sock", str(sock),
        "--tree", str(tree),
        "--module", module_rel,
        "--pristine", str(pristine),
        "--reach", str(reach),
        "--timeout", f"{timeout:.0f}",
        *(["--cpu-limit", f"{cpu_limit:.0f}"] if cpu_limit is not None else []),
        *(["--all"] if every_test else []),
        "--",
        *pytest_args(cfg),
    ]  # fmt: skip
    return " ".join(shlex.quote(a) for a in args)


_FAILED = re.compile(r"^(?:FAILED|ERROR) (\S+)", re.M)


def first_failure(output: str | None) -> str | None:
    if not output:
        return None
    if output == "timeout":
        return "timeout"
    m = _FAILED.search(output)
    return m.group(1) if m else None


class ReachMaps:
    """One reach run per distinct test list, shared by the modules (and jobs) that use it."""

    def __init__(self, cfg: dict, modules: list[dict], work: Path, tree0: Path, reuse: Path | None = None):
        self.cfg, self.work, self.tree0, self.reuse = cfg, work, tree0, reuse
        self.groups: dict[tuple, list[str]] = {}
        for m in modules:
            self.groups.setdefault(self.key(m), []).append(m["path"])
        self.done: dict[tuple, tuple[Path, float, float]] = {}
        self.lock = threading.Lock()

    def key(self, m: dict) -> tuple:
        return tuple(expand_tests(m["tests"], self.cfg, self.tree0))

    def get(self, m: dict, log) -> tuple[Path, float, float]:
        k = self.key(m)
        with self.lock:
            if k not in self.done:
                name = "reach-" + hashlib.sha1("\n".join(k).encode()).hexdigest()[:12]
                out = self.work / "reach" / f"{name}.json"
                out.parent.mkdir(exist_ok=True)
                old = self.reuse / "reach" / f"{name}.json" if self.reuse else None
                same = old is not None and (self.reuse / "commit").read_text() == (self.work / "commit").read_text()
                if same and old.exists() and old.with_suffix(".time.json").exists():
                    # the same commit and test list: the same reach map (``--reach-from``)
                    out.write_text(old.read_text())
                    took, cpu = json.loads(old.with_suffix(".time.json").read_text())
                else:
                    took, cpu = reach_run(self.tree0, list(k), self.groups[k], self.cfg, out)
                    out.with_suffix(".time.json").write_text(json.dumps([took, cpu]))
                log(
                    f"reach map {out.name}: {len(k)} test files for {', '.join(self.groups[k])}: "
                    f"{took:.0f} s wall, {cpu:.0f} s CPU"
                )
                self.done[k] = (out, took, cpu)
            return self.done[k]


def run_module(module: dict, tree: Path, cfg: dict, work: Path, servers: dict, maps: ReachMaps, log) -> dict:
    """Run every mutant of one module in ``tree``; the module's result record."""
    from cosmic_ray.commands import execute
    from cosmic_ray.config import ConfigDict
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import WorkItem

    rel, name = module["path"], module["name"]
    tests = expand_tests(module["tests"], cfg, tree)
    specs = mutations_of(tree / rel, rel, cfg["campaign"]["operators"], module.get("scope"))
    if cfg.get("_only") is not None:
        specs = only_these(specs, tree / rel, rel, cfg["_only"])
    if cfg.get("_part") is not None:  # --part K/N: every N-th mutant from the K-th
        k, n = cfg["_part"]
        specs = specs[k::n]
    skipped: list[dict] = []
    if cfg.get("_skip_equivalent"):
        equivalents = load_equivalents(EQUIVALENTS, commit=cfg["_commit"])
        specs, skipped = skip_equivalents(specs, tree / rel, rel, equivalents)
    (work / "sessions" / f"{name}.skipped.json").write_text(json.dumps(skipped))
    pristine = work / "pristine" / f"{name}.py"
    pristine.parent.mkdir(exist_ok=True)
    pristine.write_text((tree / rel).read_text(encoding="utf-8"), encoding="utf-8")
    reach, base, base_cpu = maps.get(module, log)
    camp = cfg["campaign"]
    # the limit that decides a timeout is on the tests' CPU time (a loaded machine slows the wall
    # clock, not the CPU a test needs); the wall limit is only a safety net for a hang
    cpu_limit = camp["cpu_timeout_multiplier"] * base_cpu + camp["cpu_timeout_constant"]
    timeout = max(camp["wall_timeout_multiplier"] * base + camp["wall_timeout_constant"], 2 * cpu_limit)
    reach_map = json.loads(reach.read_text())
    if tree not in servers:
        preload = work / "preload.json"
        preload.write_text(json.dumps(reach_map["preload"]))
        servers[tree] = ForkServer(tree, work / f"{tree.name}.sock", preload)
    sock = servers[tree].sock
    log(
        f"{rel}: {len(specs)} mutants"
        + (f" (+{len(skipped)} recorded equivalent, not run)" if skipped else "")
        + f", {len(tests)} test files ({len(reach_map['order'])} tests), "
        f"timeout {cpu_limit:.0f} s CPU ({timeout:.0f} s wall)"
    )
    db_path = work / "sessions" / f"{name}.sqlite"
    if db_path.exists():
        db_path.unlink()
    meta = {
        "path": rel,
        "scope": module.get("scope") or "whole file",
        "tests": tests,
        "n_tests": len(reach_map["order"]),
        "reach_run_s": round(base, 1),
        "reach_run_cpu_s": round(base_cpu, 1),
        "timeout_cpu_s": round(cpu_limit, 1),
        "timeout_wall_s": round(timeout, 1),
        "tree": str(tree),
        "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "wall_s": None,
    }
    meta_path = work / "sessions" / f"{name}.meta.json"
    meta_path.write_text(json.dumps(meta))
    t0 = time.monotonic()
    with use_db(str(db_path), WorkDB.Mode.create) as db:
        db.add_work_items(WorkItem.single(job_id=job_id(rel, s), mutation=s) for s in specs)
        command = mutant_command(tree, rel, pristine, reach, sock, timeout, cfg, cpu_limit=cpu_limit)
        config = ConfigDict(
            {"test-command": command, "timeout": timeout + 60, "distributor": ConfigDict({"name": "local"})}
        )
        execute(db, config)
    meta["wall_s"] = round(time.monotonic() - t0, 1)
    meta_path.write_text(json.dumps(meta))
    r = collect_module(module, work)
    killed = sum(m["outcome"] == "killed" for m in r["mutants"])
    log(f"{rel}: {killed}/{len(r['mutants'])} killed in {meta['wall_s']:.0f} s")
    return r


def collect_parts(module: dict, works: list[Path]) -> dict:
    """A module's record from every work folder that ran a part of it (``--part``): the mutants of
    all parts; the per-part figures (timeouts, reach run, wall) of the first, the wall time the sum."""
    parts = [collect_module(module, w) for w in works if (w / "sessions" / f"{module['name']}.meta.json").exists()]
    r = dict(parts[0])
    # one record per mutant: a mutant left pending in one folder (a process stopped) and run in
    # another (``--only`` over the pending ones) counts once, with its result
    best: dict[tuple, dict] = {}
    for mu in (mu for p in parts for mu in p["mutants"]):
        k = (mu["operator"], mu["occurrence"])
        if k not in best or best[k]["outcome"] == "pending":
            best[k] = mu
    r["mutants"] = sorted(best.values(), key=lambda m: (m["line"], m["col"], m["operator"], m["occurrence"]))
    r["parts"] = len(parts)
    r["wall_s"] = round(sum(p["wall_s"] or 0 for p in parts), 1)
    return r


def merge_base(module: dict, r: dict | None, base: dict) -> dict:
    """A module's record with the mutants an earlier sitting of the same campaign ran (``--base-report``:
    its collected report, the work folders of that sitting being gone) under the ones run now: a
    mutant run now replaces its pending entry there; the wall times add up."""
    old = next((b for b in base["modules"] if b["path"] == module["path"]), None)
    if old is None:
        return r
    mine = [mu for mu in base["all"] if mu["module"] == module["path"]]
    if r is None:
        return {**{x: old[x] for x in old if x not in ("mutants", "killed", "pending", "test_cpu_s")}, "mutants": mine}
    now = {(mu["operator"], mu["occurrence"]): mu for mu in r["mutants"] if mu["outcome"] != "pending"}
    merged = [now.pop((mu["operator"], mu["occurrence"]), mu) for mu in mine] + list(now.values())
    merged.sort(key=lambda m: (m["line"], m["col"], m["operator"], m["occurrence"]))
    out = dict(r)
    out["mutants"] = merged
    out["parts"] = (old.get("parts") or 1) + (r.get("parts") or 1)
    out["wall_s"] = round((old.get("wall_s") or 0) + (r.get("wall_s") or 0), 1)
    out["started_utc"] = old.get("started_utc", r.get("started_utc"))
    return out


def campaign_wall(modules: list[dict], works: list[Path]) -> float | None:
    """Wall seconds from the first work folder's start (its ``started`` stamp) to the last module's end."""
    starts, ends = [], []
    for w in works:
        if (w / "started").exists():
            starts.append(float((w / "started").read_text()))
        for m in modules:
            meta = w / "sessions" / f"{m['name']}.meta.json"
            if meta.exists():
                ends.append(meta.stat().st_mtime)
    return round(max(ends) - min(starts), 1) if starts and ends else None


def collect_module(module: dict, work: Path) -> dict:
    """The module's result record from its cosmic-ray session (mutants not run yet: 'pending')."""
    from cosmic_ray.work_db import WorkDB, use_db

    name = module["name"]
    meta = json.loads((work / "sessions" / f"{name}.meta.json").read_text())
    lines = (work / "pristine" / f"{name}.py").read_text(encoding="utf-8").split("\n")
    with use_db(str(work / "sessions" / f"{name}.sqlite"), WorkDB.Mode.open) as db:
        items = list(db.work_items)
        results = dict(db.results)
    mutants = []
    for item in items:
        spec = item.mutations[0]
        res = results.get(item.job_id)
        if res is None:
            outcome, worker, output, diff = "pending", None, "", None
        else:
            outcome = res.test_outcome.value if res.test_outcome is not None else res.worker_outcome.value
            worker, output, diff = res.worker_outcome.value, res.output or "", res.diff
        ran = _TESTS_RUN.search(output)
        cpu = sum(float(x) for x in _CPU.findall(output))
        mutants.append(
            {
                **_where(meta["path"], spec, lines),
                "mutated": _mutated_line(diff),
                "diff": _short_diff(diff, meta["tree"]),
                "outcome": outcome,
                "worker": worker,
                "tests_run": int(ran.group(1)) if ran else None,
                "cpu_s": round(cpu, 2),
                "tests_why": ran.group(2) if ran else None,
                "killed_by": first_failure(output) if outcome == "killed" else None,
                "timeout": _timeout_of(output),
            }
        )
    skipped = work / "sessions" / f"{name}.skipped.json"
    if skipped.exists():  # --skip-equivalent: the recorded equivalents this run did not run
        mutants.extend(json.loads(skipped.read_text()))
    mutants.sort(key=lambda m: (m["line"], m["col"], m["operator"], m["occurrence"]))
    return {**{k: v for k, v in meta.items() if k != "tree"}, "mutants": mutants}


_CPU = re.compile(r"^mutation-cpu: ([\d.]+)$", re.M)
_OVER = re.compile(r"^mutation-timeout: (\w+)$", re.M)


def _timeout_of(output: str | None) -> str | None:
    """'cpu' / 'wall' (the tests' limit, see run_module) or 'tool' (cosmic-ray's own), else None."""
    if not output:
        return None
    if output == "timeout":
        return "tool"
    m = _OVER.search(output)
    return m.group(1) if m else None


_TESTS_RUN = re.compile(r"^mutation-tests: (\d+) \((.*)\)$", re.M)


def _mutated_line(diff: str | None) -> str | None:
    if not diff:
        return None
    plus = [
        ln[1:].strip() for ln in diff.split("\n") if ln.startswith("+") and not ln.startswith("+++") and ln[1:].strip()
    ]
    return " / ".join(plus) if plus else ""


def _short_diff(diff: str | None, tree: str) -> str | None:
    if not diff:
        return None
    keep = [ln for ln in diff.split("\n") if ln[:1] in "+-@" and not ln.startswith(("+++", "---"))]
    return "\n".join(keep).replace(tree + "/", "")


# --- survivors: explained or not ------------------------------------------------------------------


def load_equivalents(path: Path, table: str = "equivalent", commit: str | None = None) -> list[dict]:
    """The survivors' explanations: ``[[equivalent]]`` (no input tells the mutant from the original)
    or ``[[fixed]]`` (the mutant's behaviour was the right one: the run's code was wrong there and
    was changed after the run, in ``fixed_in``, with ``test`` pinning the new decision; such a
    survivor is neither killed nor equivalent, and the report counts it on its own).

    With the run's ``commit``, only the entries that hold for that code: a ``[[fixed]]`` entry only
    where ``fixed_in`` is not in the run's history (after the fix the same mutant is an ordinary
    survivor again), an ``[[equivalent]]`` entry with ``since`` only where that commit is."""
    if not path.exists():
        return []
    with open(path, "rb") as f:
        entries = tomllib.load(f).get(table, [])
    if commit is None:
        return entries
    if table == "fixed":
        return [e for e in entries if not _in_history(e["fixed_in"], commit)]
    return [e for e in entries if "since" not in e or _in_history(e["since"], commit)]


def _in_history(ancestor: str, commit: str) -> bool:
    """Is ``ancestor`` ``commit`` itself or one of its ancestors?"""
    r = subprocess.run(["git", "-C", str(ROOT), "merge-base", "--is-ancestor", ancestor, commit], capture_output=True)
    return r.returncode == 0


def _entry_for(m: dict, entries: list[dict]) -> dict | None:
    for e in entries:
        if (
            e["module"] == m["module"]
            and e.get("operator", m["operator"]) == m["operator"]  # none: every operator (dead code)
            and e["source"] == m["source"]
            and e.get("mutated", m["mutated"]) == m["mutated"]
        ):
            return e
    return None


def explanation(m: dict, equivalents: list[dict]) -> str | None:
    """The recorded reason a survivor is equivalent (matched on module, operator, source line, mutated line)."""
    e = _entry_for(m, equivalents)
    return e["why"] if e else None


def fix_of(m: dict, fixed: list[dict]) -> str | None:
    """How a survivor that revealed a wrong decision was fixed (``[[fixed]]``), in one sentence."""
    e = _entry_for(m, fixed)
    return f"revealed a wrong decision, fixed in {e['fixed_in']} (pinned by `{e['test']}`): {e['why']}" if e else None


# --- main ----------------------------------------------------------------------------------------


def export_tree(commit: str, dest: Path) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", commit], capture_output=True, check=True).stdout
    import io

    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(dest, filter="data")


def run_all(args, cfg: dict, modules: list[dict], commit: str) -> float | None:
    """Run every module's mutants (``--jobs`` at a time); the wall time, or None on failure."""
    import shutil

    if args.work.exists():
        shutil.rmtree(args.work)
    (args.work / "sessions").mkdir(parents=True)
    (args.work / "commit").write_text(commit + "\n")
    (args.work / "started").write_text(f"{time.time():.1f}\n")
    trees = [args.work / f"tree{k}" for k in range(max(args.jobs, 1))]
    for t in trees:
        export_tree(commit, t)
        (t / ".hypothesis").mkdir(exist_ok=True)

    lock = threading.Lock()

    def log(msg: str) -> None:
        with lock:
            print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)

    # longest modules first, each to the job with the least work so far (greedy)
    queue = list(modules)
    results: dict[str, dict] = {}
    errors: list[str] = []
    servers: dict[Path, ForkServer] = {}
    maps = ReachMaps(cfg, modules, args.work, trees[0], args.reach_from)

    def worker(tree: Path) -> None:
        while True:
            with lock:
                if not queue:
                    return
                m = queue.pop(0)
            try:
                results[m["path"]] = run_module(m, tree, cfg, args.work, servers, maps, log)
            except BaseException as exc:  # noqa: BLE001 - reported, the other jobs go on
                errors.append(f"{m['path']}: {exc}")
                log(f"{m['path']}: FAILED {exc}")

    t0 = time.monotonic()
    threads = [threading.Thread(target=worker, args=(t,)) for t in trees]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    wall = time.monotonic() - t0
    for srv in servers.values():
        srv.close()
    if errors:
        print("\n".join(errors), file=sys.stderr)
        return None
    return wall


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", type=Path, default=CONFIG)
    ap.add_argument("--commit", default="HEAD")
    ap.add_argument("--modules", nargs="*", help="only modules whose path contains one of these")
    ap.add_argument("--jobs", type=int, default=1, help="parallel jobs (each in its own copy of the tree)")
    ap.add_argument(
        "--work",
        type=Path,
        nargs="+",
        default=[Path("/tmp/denpex_mutation")],
        help="the work folder; with --collect, several (the parts of one campaign, see --part)",
    )
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--count", action="store_true", help="only count the mutants per module and operator")
    ap.add_argument("--markdown", nargs="?", const=HERE / "results" / "mutation_semantic.md", type=Path)
    ap.add_argument("--previous", type=Path, help="the first run's JSON: its survivors and what kills them now")
    ap.add_argument(
        "--verified",
        type=Path,
        help="JSON list of {module, operator, source, mutated, killed_by, run_commit}: survivors of this run that a "
        "test written after it kills (checked by verify_mutants.py: the mutant applied to the run's tree, that test "
        "fails; without it, it passes); entries of another run_commit are ignored",
    )
    ap.add_argument(
        "--part",
        help="K/N: only every N-th mutant of each module from the K-th (0-based), so that N processes "
        "share a module; their reports are merged by --collect with several --work",
    )
    ap.add_argument("--reach-from", type=Path, help="a work folder of the same commit: reuse its reach maps")
    ap.add_argument(
        "--only",
        type=Path,
        help="JSON list of mutants ({module, operator, occurrence, source}, e.g. a report's survivors): run "
        "only those (the modules without one are skipped)",
    )
    ap.add_argument(
        "--skip-equivalent",
        action="store_true",
        help="do not run the mutants that match a recorded [[equivalent]] (module, operator, original and mutated "
        "line text): they are reported as equivalent, not run. Cheaper: an equivalent runs every test that reaches it",
    )
    ap.add_argument(
        "--base-report",
        type=Path,
        help="the collected report of an earlier sitting of the same campaign (same commit) whose work folders are "
        "gone: its mutants are kept, those run now (e.g. with --only over its pending ones) replace them",
    )
    ap.add_argument(
        "--collect", action="store_true", help="only write the report from the sessions in --work (a run cut short)"
    )
    args = ap.parse_args(argv)
    works: list[Path] = args.work
    args.work = works[0]
    if len(works) > 1 and not args.collect:
        ap.error("several --work folders only with --collect")

    cfg = load_config(args.config)
    modules = [m for m in cfg["module"] if not args.modules or any(s in m["path"] for s in args.modules)]
    cfg["_skip_equivalent"] = args.skip_equivalent
    cfg["_commit"] = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", args.commit], capture_output=True, text=True, check=True
    ).stdout.strip()
    if args.part:
        k, n = (int(x) for x in args.part.split("/"))
        cfg["_part"] = (k, n)
    if args.only:
        only = json.loads(args.only.read_text())
        if isinstance(only, dict):  # a report: its survivors
            only = [m for m in only["all"] if m["outcome"] not in ("killed", "pending")]
        cfg["_only"] = only
        modules = [m for m in modules if any(w["module"] == m["path"] for w in only)]
    commit = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", args.commit], capture_output=True, text=True, check=True
    ).stdout.strip()
    register_operators()

    if args.count:
        total = 0
        for m in modules:
            specs = mutations_of(ROOT / m["path"], m["path"], cfg["campaign"]["operators"], m.get("scope"))
            by_op: dict[str, int] = {}
            for s in specs:
                by_op[s.operator_name] = by_op.get(s.operator_name, 0) + 1
            total += len(specs)
            print(
                f"{m['path']}: {len(specs)}  " + ", ".join(f"{k.split('/')[1]}={v}" for k, v in sorted(by_op.items()))
            )
        print(f"total: {total}")
        return 0

    wall = None
    if not args.collect:
        wall = run_all(args, cfg, modules, commit)
        if wall is None:
            return 1
    else:
        modules = [m for m in modules if any((w / "sessions" / f"{m['name']}.meta.json").exists() for w in works)]
        commits = {(w / "commit").read_text().strip() for w in works}
        if len(commits) != 1:
            raise SystemExit(f"bench_mutation: --collect: the work folders ran different commits: {sorted(commits)}")
        commit = commits.pop()
        wall = campaign_wall(modules, works)
    equivalents = load_equivalents(EQUIVALENTS, commit=commit)
    fixed = load_equivalents(EQUIVALENTS, "fixed", commit=commit)
    verified = {}
    if args.verified:
        # only checks made against this run's commit (verify_mutants.py writes ``run_commit``): a
        # test already in the tree that did not kill a survivor in this run must not be credited
        for v in json.loads(args.verified.read_text()):
            if v.get("run_commit") == commit:
                verified[(v["module"], v["operator"], v["source"], v["mutated"])] = v["killed_by"]
    base = json.loads(args.base_report.read_text()) if args.base_report else None
    if base is not None:
        if base["commit"] != commit:
            raise SystemExit(f"bench_mutation: --base-report ran {base['commit'][:12]}, the work folders {commit[:12]}")
        ran = {m["path"] for m in modules}
        modules += [
            m for m in cfg["module"] if m["path"] not in ran and any(b["path"] == m["path"] for b in base["modules"])
        ]
        modules.sort(key=lambda m: [c["path"] for c in cfg["module"]].index(m["path"]))
        sittings = list(
            base.get("sittings") or [{"mutants_run": base["mutants"] - base["pending"], "wall_s": base["wall_s"]}]
        )
        sittings.append({"mutants_run": None, "wall_s": wall, "parts": len(works)})
        wall = (base.get("wall_s") or 0) + (wall or 0)  # the sittings' wall times add up
    base_keys = (
        {(mu["module"], mu["operator"], mu["occurrence"]) for mu in base["all"] if mu["outcome"] != "pending"}
        if base is not None
        else set()
    )
    per_module, all_mutants = [], []
    for m in modules:
        r = (
            collect_parts(m, works)
            if any((w / "sessions" / f"{m['name']}.meta.json").exists() for w in works)
            else None
        )
        if base is not None:
            r = merge_base(m, r, base)
        for mu in r["mutants"]:
            if mu["outcome"] != "killed":
                mu["equivalent"] = explanation(mu, equivalents)
                mu["fixed"] = fix_of(mu, fixed)
                if _key(mu) in verified:
                    mu["killed_now_by"] = verified[_key(mu)]
        n, k = len(r["mutants"]), sum(mu["outcome"] == "killed" for mu in r["mutants"])
        pending = sum(mu["outcome"] == "pending" for mu in r["mutants"])
        cpu = round(sum(mu.get("cpu_s") or 0 for mu in r["mutants"]), 1)
        per_module.append(
            {**{x: r[x] for x in r if x != "mutants"}, "mutants": n, "killed": k, "pending": pending, "test_cpu_s": cpu}
        )
        all_mutants.extend(r["mutants"])
    n, k = len(all_mutants), sum(mu["outcome"] == "killed" for mu in all_mutants)
    pending = sum(mu["outcome"] == "pending" for mu in all_mutants)
    survivors = [mu for mu in all_mutants if mu["outcome"] not in ("killed", "pending")]
    if base is not None:
        sittings[-1]["mutants_run"] = sum(
            mu["outcome"] != "pending" and (mu["module"], mu["operator"], mu["occurrence"]) not in base_keys
            for mu in all_mutants
        )
    report = {
        "commit": commit,
        "tool": f"cosmic-ray {_version('cosmic-ray')}",
        "python": platform.python_version(),
        "operators": cfg["campaign"]["operators"],
        "pytest_args": pytest_args(cfg),
        "jobs": args.jobs,
        "wall_s": None if wall is None else round(wall, 1),
        "load_avg_end": os.getloadavg(),
        "sittings": sittings if base is not None else None,
        "mutants": n,
        "pending": pending,
        "killed": k,
        "killed_pct": round(100 * k / ran, 2)
        if (ran := n - pending - sum(mu["outcome"] == "not-run-equivalent" for mu in all_mutants))
        else None,
        "not_run_equivalent": sum(mu["outcome"] == "not-run-equivalent" for mu in all_mutants),
        "killed_pct_of_not_equivalent": (
            round(100 * k / live, 2)
            if (live := n - pending - sum(bool(mu.get("equivalent")) for mu in survivors))
            else None
        ),
        "timeouts": sum(mu.get("timeout") is not None for mu in all_mutants),
        "survivors": len(survivors),
        "survivors_unexplained": sum(
            mu.get("equivalent") is None and mu.get("killed_now_by") is None and mu.get("fixed") is None
            for mu in survivors
        ),
        "survivors_fixed": sum(mu.get("fixed") is not None for mu in survivors),
        "survivors_killed_now": sum(mu.get("killed_now_by") is not None for mu in survivors),
        "test_cpu_s": round(sum(mu.get("cpu_s") or 0 for mu in all_mutants), 1),
        "modules": per_module,
        "verified": {"|".join(map(str, k)): v for k, v in verified.items()},
        "all": all_mutants,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1, default=str) + "\n")
    print(
        f"{k}/{n - pending} killed ({report['killed_pct']} %), {pending} not run, {len(survivors)} survivors "
        f"({report['survivors_unexplained']} unexplained), wall {report['wall_s']} s -> {args.out}"
    )
    if args.markdown:
        previous = json.loads(args.previous.read_text()) if args.previous else None
        args.markdown.write_text(markdown(report, previous, cfg))
    for mu in survivors:
        tag = (
            "equivalent"
            if mu.get("equivalent")
            else "killed now"
            if mu.get("killed_now_by")
            else "fixed"
            if mu.get("fixed")
            else "UNEXPLAINED"
        )
        print(f"  {tag}: {mu['module']}:{mu['line']} {mu['operator']}: {mu['source']}  ->  {mu['mutated']}")
    return 0


def _version(dist: str) -> str:
    from importlib.metadata import version

    return version(dist)


# --- the markdown report ---------------------------------------------------------------------------


def _key(m: dict) -> tuple:
    return (m["module"], m["operator"], m["source"], m["mutated"])


def markdown(report: dict, previous: dict | None, cfg: dict) -> str:
    """benchmarks/results/mutation_semantic.md from a report (and the first run's, for its survivors)."""
    done = report["mutants"] - report["pending"]
    title = (
        "every decision-changing mutant, run in full"
        if not report["pending"]
        else f"cut short: {done} of {report['mutants']} mutants run"
    )
    out = [
        f"# Semantic mutation campaign (issue #15): {title}",
        "",
        "Written by `benchmarks/bench_mutation.py` from `benchmarks/results/mutation_semantic.json`; the",
        "configuration is `benchmarks/mutation_campaign.toml`, the equivalent survivors' reasons",
        "`benchmarks/mutation_equivalents.toml`. Rerun: `nice -n 10 python benchmarks/bench_mutation.py --jobs 2"
        " --markdown`.",
        "",
        "## Run",
        "",
        f"- commit `{report['commit'][:12]}` (exported with `git archive`; the mutants were applied to that tree)",
        f"- {report['tool']}, Python {report['python']}, jobs: {report['jobs']}, under `nice -n 10`",
        f"- wall time {report['wall_s']} s; load average at the end {', '.join(f'{x:.1f}' for x in report['load_avg_end'])}"
        " (2 cores shared with other sessions)",
        *(
            [
                "- in "
                + str(len(report["sittings"]))
                + " sittings on this commit (`--base-report`): "
                + "; ".join(
                    f"{k + 1}: {st['mutants_run']} mutants, {st['wall_s']} s wall"
                    + (f", {st['parts']} parallel parts" if st.get("parts") else "")
                    for k, st in enumerate(report["sittings"])
                )
            ]
            if report.get("sittings")
            else []
        ),
        f"- timeouts (counted as killed, cosmic-ray's rule): {report.get('timeouts')}; the limit is on the tests' CPU"
        " time (per module: `timeout_cpu_s` in the JSON), so the machine's load makes no fake kills",
        f"- operators: {', '.join('`' + o + '`' for o in report['operators'])}",
        f"- pytest: `{' '.join(report['pytest_args'])}`",
        "",
        "## Score",
        "",
        "| module | scope | mutants | killed | survived | not run | killed % | tests' CPU s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for m in report["modules"]:
        scope = m["scope"] if isinstance(m["scope"], str) else ", ".join(f"`{s}`" for s in m["scope"])
        ran = m["mutants"] - m["pending"]
        pct = f"{100 * m['killed'] / ran:.1f}" if ran else "-"
        out.append(
            f"| `{m['path']}` | {scope} | {m['mutants']} | {m['killed']} | {ran - m['killed']} | {m['pending']} | {pct} |"
            f" {m.get('test_cpu_s')} |"
        )
    n, k, p = report["mutants"], report["killed"], report["pending"]
    out += [
        f"| **all** | | **{n}** | **{k}** | **{n - p - k}** | {p} | **{report['killed_pct']}** |"
        f" {report.get('test_cpu_s')} |",
        "",
        _survivor_summary(report),
        "",
        "Per module, the tests run (in this order, killers first within it; each mutant runs only those",
        "that execute the mutated statement):",
        "",
    ]
    for m in report["modules"]:
        out.append(f"- `{m['path']}` ({m['n_tests']} tests): " + ", ".join(f"`{t}`" for t in m["tests"]))
    survivors = [m for m in report["all"] if m["outcome"] not in ("killed", "pending")]
    out += ["", f"## Survivors ({len(survivors)})", ""]
    if survivors:
        out += ["| where | operator | original | mutant | why it survives |", "|---|---|---|---|---|"]
        for m in survivors:
            why = (
                m.get("equivalent")
                or (
                    f"a test written after this run kills it: `{m['killed_now_by']}`"
                    if m.get("killed_now_by")
                    else None
                )
                or m.get("fixed")
                or "**UNEXPLAINED**"
            )
            out.append(
                f"| `{m['module']}:{m['line']}` | `{m['operator'].split('/')[1]}` | `{_cell(m['source'])}` |"
                f" `{_cell(m['mutated'] or '')}` | {_cell(why, code=False)} |"
            )
    if previous is not None:
        now = {_key(m): m for m in report["all"]}
        prev_surv = [m for m in previous["all"] if m["outcome"] not in ("killed", "pending")]
        out += [
            "",
            f"## The first run's survivors and what kills them now ({len(prev_surv)})",
            "",
            f"First run: commit {previous['commit']}, {previous['killed']}/{previous['mutants'] - previous['pending']}"
            f" killed ({previous['killed_pct']} %).",
            "",
            "| where | operator | original | mutant | now |",
            "|---|---|---|---|---|",
        ]
        for m in prev_surv:
            cur = now.get(_key(m))
            ran_module = m["module"] in {x["path"] for x in report["modules"]}
            by_hand = report.get("verified", {}).get("|".join(map(str, _key(m))))
            if cur is not None and cur["outcome"] == "killed":
                state = f"killed by `{cur['killed_by']}`"
            elif by_hand:
                state = f"killed by `{by_hand}` (written after this run; checked by applying the mutant)"
            elif cur is None and not ran_module:
                state = "not run (its module was not run in this run)"
            elif cur is None:
                state = "the code changed: this mutant no longer exists"
            elif cur["outcome"] == "killed":
                state = f"killed by `{cur['killed_by']}`"
            elif cur["outcome"] == "pending":
                state = "not run"
            else:
                state = "survives: " + (cur.get("equivalent") or "UNEXPLAINED")
            out.append(
                f"| `{m['module']}:{m['line']}` | `{m['operator'].split('/')[1]}` | `{_cell(m['source'])}` |"
                f" `{_cell(m['mutated'] or '')}` | {_cell(state, code=False)} |"
            )
    return "\n".join(out) + "\n"


def _survivor_summary(report: dict) -> str:
    """One sentence: how the survivors are explained, and the share killed counting later tests."""
    surv = [m for m in report["all"] if m["outcome"] not in ("killed", "pending")]
    eq = sum(bool(m.get("equivalent")) for m in surv)
    now = sum(not m.get("equivalent") and bool(m.get("killed_now_by")) for m in surv)
    fixed = sum(not m.get("equivalent") and not m.get("killed_now_by") and bool(m.get("fixed")) for m in surv)
    not_run = sum(m["outcome"] == "not-run-equivalent" for m in surv)
    ran = report["mutants"] - report["pending"] - not_run
    share = f"{100 * (report['killed'] + now) / ran:.1f} %" if ran else "-"
    live = report["mutants"] - report["pending"] - eq
    live_share = f"{100 * (report['killed'] + now) / live:.1f} %" if live else "-"
    return (
        f"Survivors: {len(surv)} = {eq} equivalent"
        + (f" ({not_run} of them recorded equivalent and not run: `--skip-equivalent`)" if not_run else "")
        + f" + {now} killed by tests written after the run (verified) + "
        f"{fixed} that revealed a wrong decision, fixed after the run + "
        f"{len(surv) - eq - now - fixed} unexplained. Killed, counting the later tests: {share} of those run; "
        f"of the mutants not equivalent, {live_share}."
    )


def _cell(text: str, code: bool = True) -> str:
    text = " ".join(str(text).split()).replace("|", "\\|")
    return text.replace("`", "'") if code else text


if __name__ == "__main__":
    sys.exit(main())
