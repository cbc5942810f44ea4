"""How bench_mutation.py runs a mutant's tests fast: the tests that reach it, in a pre-loaded process.

cosmic-ray runs one test command per mutant, in a fresh process. Here that command is the
*client* of this module. Three things make it cheap on a shared two-core machine; none changes
whether a mutant is killed:

- **Only the tests that execute the mutated statement** (what mutmut does per function, here per
  statement): the unmutated tests run once with :class:`Reach` (a pytest plugin on
  ``sys.settrace``, line events in the target modules only) recording, per test, which lines of
  the modules it executed. A mutant changes one statement (for a compound statement: its header,
  e.g. an ``if`` condition). A test that never executes that statement runs exactly as on the
  original code (the tests are deterministic), so it cannot fail, and is not run. A mutant in a
  statement that runs at import (module constants, decorators, default arguments of top-level
  functions, class bodies) runs every test of the module. A test that starts a process
  (subprocess, multiprocessing) runs for every mutant: what the child executes is not recorded.
  The project's ``functools.lru_cache`` caches are cleared before each recorded test (a cached
  call executes nothing).
- **Killers first**: the tests that killed earlier mutants run first; with ``-x`` a killed mutant
  stops at its first failing test. The same tests run, so only the time changes.
- **No interpreter start per mutant**: a fork server (:func:`serve`) imports the third-party
  libraries (pandas, numpy, pytest, hypothesis, ...) once, never the project; for each mutant it
  forks a child that imports the (mutated) project afresh from the tree and runs pytest.

The client finds the mutated lines by comparing the module on disk with the pristine copy.
"""

from __future__ import annotations

import ast
import difflib
import json
import os
import re
import select
import signal
import socket
import sys
import time

# --- statements: what a mutant changes ----------------------------------------------------------

_COMPOUND = (
    ast.If,
    ast.For,
    ast.AsyncFor,
    ast.While,
    ast.With,
    ast.AsyncWith,
    ast.Try,
    ast.FunctionDef,
    ast.AsyncFunctionDef,
    ast.ClassDef,
)
if hasattr(ast, "Match"):
    _COMPOUND += (ast.Match,)
if hasattr(ast, "TryStar"):
    _COMPOUND += (ast.TryStar,)


def statements(source: str) -> list[tuple[int, int, bool]]:
    """(first line, last line, runs at import) of each statement's own lines: a simple statement's
    lines, a compound statement's header (decorators and signature of a def, the condition of an
    if, the iterable of a for, the ``except`` lines of a try)."""
    out: list[tuple[int, int, bool]] = []

    def visit(node, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ExceptHandler):
                body0 = child.body[0].lineno if child.body else child.end_lineno + 1
                out.append((child.lineno, max(child.lineno, body0 - 1), not in_function))
                visit(child, in_function)
                continue
            if not isinstance(child, ast.stmt):
                continue
            if isinstance(child, _COMPOUND):
                lo = min([child.lineno] + [d.lineno for d in getattr(child, "decorator_list", [])])
                body = getattr(child, "body", None) or []
                body0 = body[0].lineno if body else child.end_lineno + 1
                out.append((lo, max(lo, body0 - 1), not in_function))
                inner = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
                visit(child, inner)
            else:
                out.append((child.lineno, child.end_lineno, not in_function))

    visit(ast.parse(source), False)
    return out


def statement_of(line: int, stmts) -> tuple[int, int, bool] | None:
    """The smallest statement span holding ``line`` (None: none, e.g. a blank or comment line)."""
    best = None
    for lo, hi, at_import in stmts:
        if lo <= line <= hi and (best is None or hi - lo < best[1] - best[0]):
            best = (lo, hi, at_import)
    return best


# --- the reach map: which lines each test executes ------------------------------------------------


class Reach:
    """pytest plugin: per test, the lines of the target modules it executed (and whether it spawned)."""

    def __init__(self, module_files: list[str], out_path: str):
        self.targets = {os.path.realpath(mf) for mf in module_files}
        self.out_path = out_path
        self.reach: dict[str, dict] = {}
        self.order: list[str] = []

    def tracer(self, seen: dict, flags: dict):
        targets = self.targets
        real: dict = {}

        def glob(frame, event, arg):
            co = frame.f_code
            fn = co.co_filename
            if fn not in real:
                real[fn] = os.path.realpath(fn) if fn.endswith(".py") else None
            r = real[fn]
            if r in targets:
                lines = seen.setdefault(r, set())
                lines.add(frame.f_lineno)

                def local(frame, event, arg):
                    if event == "line":
                        lines.add(frame.f_lineno)
                    return local

                return local
            if co.co_name in ("_execute_child", "_launch", "_Popen") and (
                fn.endswith("subprocess.py") or "multiprocessing" in fn
            ):
                flags["spawns"] = True
            return None

        return glob

    def pytest_collection_finish(self, session):
        self.order = [it.nodeid for it in session.items]

    def pytest_sessionfinish(self, session, exitstatus):
        tree = os.path.realpath(os.getcwd())
        here = os.path.dirname(os.path.realpath(__file__))
        third_party = sorted(
            name
            for name, mod in list(sys.modules.items())
            if name != "__main__"
            and (f := getattr(mod, "__file__", None))
            and not os.path.realpath(f).startswith((tree + os.sep, here + os.sep))
        )
        rel = {real: os.path.relpath(real, tree) for real in self.targets}
        reach = {
            t: {"lines": {rel[r]: sorted(ls) for r, ls in v["lines"].items()}, "spawns": v["spawns"]}
            for t, v in self.reach.items()
        }
        with open(self.out_path, "w") as f:
            json.dump({"modules": sorted(rel.values()), "order": self.order, "reach": reach, "preload": third_party}, f)


def _clear_project_caches() -> None:
    for name, mod in list(sys.modules.items()):
        if name.split(".")[0] != "denpex_nb" or mod is None:
            continue
        for v in list(vars(mod).values()):
            clear = getattr(v, "cache_clear", None)
            if callable(clear) and getattr(v, "__module__", None) == name:
                clear()


def _wrap(plugin: Reach):
    import threading

    import pytest

    class Hook:
        @pytest.hookimpl(hookwrapper=True)
        def pytest_runtest_protocol(self, item, nextitem):
            seen: dict = {}
            flags = {"spawns": False}
            _clear_project_caches()
            tr = plugin.tracer(seen, flags)
            sys.settrace(tr)
            threading.settrace(tr)
            try:
                yield
            finally:
                sys.settrace(None)
                threading.settrace(None)
            plugin.reach[item.nodeid] = {"lines": seen, "spawns": flags["spawns"]}

    return Hook()


def pytest_configure(config):
    """Loaded with ``-p _mutation_exec``: record reach when DENPEX_MUTATION_REACH names a spec file
    (JSON: ``modules``, the files to watch, and ``out``, where the map goes)."""
    spec = os.environ.get("DENPEX_MUTATION_REACH")
    if spec:
        with open(spec) as f:
            s = json.load(f)
        plugin = Reach(s["modules"], s["out"])
        config.pluginmanager.register(plugin, "denpex_mutation_reach")
        config.pluginmanager.register(_wrap(plugin), "denpex_mutation_reach_hook")


def select_tests(reach_path: str, tree: str, module_rel: str, pristine_file: str) -> tuple[list[str], str]:
    """The node ids to run for the mutant now on disk in ``module_rel``, and why."""
    with open(reach_path) as f:
        rm = json.load(f)
    with open(pristine_file, encoding="utf-8") as f:
        orig = f.read()
    with open(os.path.join(tree, module_rel), encoding="utf-8") as f:
        now = f.read()
    a, b = orig.split("\n"), now.split("\n")
    changed: set[int] = set()
    for tag, i1, i2, _j1, _j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        if tag != "equal":
            changed.update(range(i1 + 1, max(i2, i1 + 1) + 1))
    stmts = statements(orig)
    spans = [statement_of(ln, stmts) for ln in changed]
    if not changed or any(sp is None or sp[2] for sp in spans):
        return list(rm["order"]), "runs at import: every test"
    want: set[int] = set()
    for lo, hi, _ in spans:
        want.update(range(lo, hi + 1))
    reach = rm["reach"]
    tests = [
        t
        for t in rm["order"]
        if reach.get(t, {}).get("spawns") or want.intersection(reach.get(t, {}).get("lines", {}).get(module_rel, ()))
    ]
    los = sorted({sp[0] for sp in spans})
    return tests, f"executing the statement at line {', '.join(map(str, los))}"


# --- the fork server -------------------------------------------------------------------------------


def _recv_line(conn) -> bytes:
    buf = b""
    while not buf.endswith(b"\n"):
        chunk = conn.recv(65536)
        if not chunk:
            break
        buf += chunk
    return buf


def _die_with_parent() -> None:
    """The forked child is killed when the server dies (Linux prctl PR_SET_PDEATHSIG)."""
    try:
        import ctypes

        ctypes.CDLL(None).prctl(1, signal.SIGKILL)
    except (OSError, AttributeError):
        pass


def _cpu_of(pid: int) -> float:
    """CPU seconds (user + system, its waited-for children included) of a running process, from
    /proc: the per-mutant limit is on CPU, not wall time, so a loaded machine makes no fake kills."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    # fields after the command: state is [0]; utime, stime, cutime, cstime are [11:15]
    return sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def serve(sock_path: str, preload_file: str) -> None:
    """Import ``preload`` once, then for each request fork a child that runs pytest (one at a time)."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    os.environ.setdefault("MKL_NUM_THREADS", "1")
    import importlib

    with open(preload_file) as f:
        preload = json.load(f)
    for name in preload:
        try:
            importlib.import_module(name)
        except BaseException:  # noqa: BLE001 - a module that cannot load alone is loaded by the child
            pass
    import pytest  # noqa: F401

    if os.path.exists(sock_path):
        os.unlink(sock_path)
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(sock_path)
    srv.listen(4)
    print("ready", flush=True)
    while True:
        conn, _ = srv.accept()
        req = json.loads(_recv_line(conn) or b"{}")
        if req.get("quit"):
            conn.close()
            return
        out_path = req["output"]
        pid = os.fork()
        if pid == 0:  # the child: the project is imported here, from the tree
            try:
                os.setpgid(0, 0)
                _die_with_parent()
                srv.close()
                conn.close()
                fd = os.open(out_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                os.dup2(fd, 1)
                os.dup2(fd, 2)
                os.chdir(req["cwd"])
                os.environ.update(req["env"])
                sys.path[:0] = req["path"]
                sys.dont_write_bytecode = True
                sys.argv = ["pytest"]
                import pytest as _pytest

                code = int(_pytest.main(req["args"]))
                sys.stdout.flush()
                sys.stderr.flush()
            except BaseException:  # noqa: BLE001
                import traceback

                traceback.print_exc()
                code = 3
            os._exit(code)
        deadline = time.monotonic() + float(req.get("timeout", 600))
        cpu_limit = req.get("cpu_limit")
        status = None
        cpu = 0.0
        over = None
        next_cpu_check = 0.0
        while status is None:
            done, st, usage = os.wait4(pid, os.WNOHANG)
            if done:
                status = os.waitstatus_to_exitcode(st)
                cpu = usage.ru_utime + usage.ru_stime
                break
            r, _, _ = select.select([conn], [], [], 0.05)
            gone = bool(r) and not conn.recv(1, socket.MSG_PEEK)
            now = time.monotonic()
            if cpu_limit is not None and now >= next_cpu_check:
                next_cpu_check = now + 0.5
                if _cpu_of(pid) > float(cpu_limit):
                    over = "cpu"
                elif _rss_of(pid) > MEMORY_LIMIT_BYTES:
                    over = "memory"
            if now > deadline:
                over = "wall"
            if gone or over:
                try:
                    os.killpg(pid, signal.SIGKILL)
                except OSError:
                    pass
                _pid, _st, usage = os.wait4(pid, 0)
                cpu = usage.ru_utime + usage.ru_stime
                status = -9
        try:
            reply = {"code": status, "cpu_s": round(cpu, 3), "over": over}
            conn.sendall((json.dumps(reply) + "\n").encode())
        except OSError:
            pass
        conn.close()


# a mutant's tests past this resident memory are stopped and counted as a timeout ("memory"): a
# mutated bound once made a test list 2**31 absent ranks and grow to 13.6 GB on a 24 GB machine
# shared by two jobs. No unmutated test of the campaign comes near it (the reach run's peak is
# under 1 GB).
MEMORY_LIMIT_BYTES = 6 * 2**30


def _rss_of(pid: int) -> int:
    """Resident bytes of a running process (its own, not its children's), from /proc."""
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def client(argv: list[str]) -> int:
    """The per-mutant test command: select the tests, ask the server to run them, relay the result."""
    import argparse

    ap = argparse.ArgumentParser()
    ap.add_argument("--sock", required=True)
    ap.add_argument("--tree", required=True)
    ap.add_argument("--module", required=True)
    ap.add_argument("--pristine", required=True)
    ap.add_argument("--reach", required=True)
    ap.add_argument("--timeout", type=float, default=600, help="wall seconds (a safety net for a hang)")
    ap.add_argument("--cpu-limit", type=float, default=None, help="CPU seconds of the tests: past it, a timeout")
    ap.add_argument("--all", action="store_true", help="every test of the module, reached or not")
    ap.add_argument("pytest_args", nargs="*")
    a = ap.parse_args(argv)
    tests, why = select_tests(a.reach, a.tree, a.module, a.pristine)
    if a.all:
        with open(a.reach) as f:
            tests, why = json.load(f)["order"], "every test"
    print(f"mutation-tests: {len(tests)} ({why})", flush=True)
    if not tests:
        return 0
    killers = os.path.join(os.path.dirname(a.reach), "killers.txt")
    tests, n_first = _killers_first(tests, killers)
    # two rounds: the earlier killers alone (few test files to import), then the rest
    rounds = [tests[:n_first], tests[n_first:]] if 0 < n_first < len(tests) else [tests]
    code, text = 0, ""
    t_end = time.monotonic() + a.timeout
    cpu_left = a.cpu_limit
    for chunk in rounds:
        code, out_text = _run(a, chunk, max(1.0, t_end - time.monotonic()), cpu_left)
        text += out_text
        if cpu_left is not None:
            cpu_left = max(1.0, cpu_left - sum(float(x) for x in _CPU_LINE.findall(out_text)))
        sys.stdout.write(out_text)
        if code != 0:
            break
    failed = [ln.split()[1] for ln in text.splitlines() if ln.startswith("FAILED ") and len(ln.split()) > 1]
    if failed:
        with open(killers, "a") as f:
            f.write(failed[0] + "\n")
    return 0 if code == 0 else 1


_CPU_LINE = re.compile(r"^mutation-cpu: ([\d.]+)$", re.M)


def _run(a, tests: list[str], timeout: float, cpu_limit: float | None = None) -> tuple[int, str]:
    """Ask the fork server to run ``tests``; (exit code, output)."""
    out = os.path.join(os.path.dirname(a.reach), f"out-{os.getpid()}.txt")
    req = {
        "cwd": a.tree,
        "path": [a.tree],
        "env": {"PYTHONPATH": a.tree, "PYTHONDONTWRITEBYTECODE": "1"},
        "args": a.pytest_args + tests,
        "output": out,
        "timeout": timeout,
        "cpu_limit": cpu_limit,
    }
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(a.sock)
    s.sendall((json.dumps(req) + "\n").encode())
    reply = json.loads(_recv_line(s) or b'{"code": 3}')
    s.close()
    try:
        with open(out, encoding="utf-8", errors="replace") as f:
            text = f.read()
        os.unlink(out)
    except OSError:
        text = ""
    text += f"\nmutation-cpu: {reply.get('cpu_s', 0)}\n"
    if reply.get("over"):
        text += f"mutation-timeout: {reply['over']}\n"
    return reply["code"], text


_FIRST_ROUND = 12


def _killers_first(tests: list[str], killers: str) -> tuple[list[str], int]:
    """The tests that killed earlier mutants first (most kills first), the rest in their order;
    and how many of the first are killers (at most ``_FIRST_ROUND``: the first round).

    Order only decides how soon a killed mutant stops (``-x``): a mutant is killed when any of
    its tests fails, and the same tests run, so the outcome does not depend on it."""
    try:
        with open(killers) as f:
            counts: dict[str, int] = {}
            for ln in f:
                counts[ln.strip()] = counts.get(ln.strip(), 0) + 1
    except OSError:
        return tests, 0
    pos = {t: i for i, t in enumerate(tests)}
    ordered = sorted(tests, key=lambda t: (-counts.get(t, 0), pos[t]))
    return ordered, min(_FIRST_ROUND, sum(1 for t in tests if t in counts))


if __name__ == "__main__":
    if sys.argv[1] == "serve":
        serve(sys.argv[2], sys.argv[3])
    else:
        sys.exit(client(sys.argv[2:]))
