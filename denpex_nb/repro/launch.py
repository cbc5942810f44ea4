"""Start N ranks of a scenario as separate OS processes, bound them, and write the run folder.

Why our own launcher and not torchrun:

* **Startup cost.** torchrun adds an agent process that imports torch and runs a rendezvous
  before any worker starts (seconds on 2 cores); every run here must finish in well under 15 s.
* **Bounded kill.** We own every rank's process session, so a hard wall-clock deadline ends
  each rank's whole process group (SIGTERM, a grace period for Flight Recorder dumps, then
  SIGKILL) and nothing is orphaned. torchrun SIGTERMs the survivors the moment one rank fails,
  which destroys the evidence (their errors, their dumps) that the diagnosis needs.
* **Deterministic files.** torchrun's ``--log-dir`` adds ``<run_id>_<random>/`` and its tee
  output goes to our stdout; here the layout is fixed: ``combined.log`` (every rank's stdout and
  stderr, each line prefixed ``[default<R>]:`` as ``torchrun --tee 3`` prints it, in arrival
  order), ``attempt_0/<R>/stdout.log`` and ``stderr.log`` (torchrun's layout, unprefixed),
  ``manifest.json``, and optional ``fr/`` and ``trace/``.

Workers get the same environment torchrun gives them (MASTER_ADDR=127.0.0.1, a free port,
RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE), so the rank bodies would run under torchrun too.
"""

from __future__ import annotations

import collections
import datetime as _dt
import importlib.util
import json
import os
import platform
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import MissingDependencyError, UsageError
from ..processes import signal_group, signal_name
from . import registry

BACKENDS = ("gloo", "nccl")
DEBUG_MODES = ("off", "info", "detail")

#: environment per debug mode. ``detail`` also sets the C++ log level to INFO so that every
#: collective's fingerprint is logged ("Running collective: CollectiveFingerPrint(...)").
DEBUG_ENV = {
    "off": {},
    "info": {"TORCH_DISTRIBUTED_DEBUG": "INFO", "TORCH_CPP_LOG_LEVEL": "INFO"},
    "detail": {"TORCH_DISTRIBUTED_DEBUG": "DETAIL", "TORCH_CPP_LOG_LEVEL": "INFO"},
}
NCCL_ENV = {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,COLL"}
#: variables we always control in the children (removed when inherited and not set by us)
_CONTROLLED = (
    "TORCH_DISTRIBUTED_DEBUG",
    "TORCH_CPP_LOG_LEVEL",
    "NCCL_DEBUG",
    "NCCL_DEBUG_SUBSYS",
    "DENPEX_TRACE_DIR",
    "TORCH_FR_BUFFER_SIZE",
    "TORCH_NCCL_TRACE_BUFFER_SIZE",
)

#: seconds between SIGTERM and SIGKILL: a rank's SIGTERM handler dumps its Flight Recorder (1.5-3 s)
KILL_GRACE_S = 6.0


@dataclass
class RunResult:
    """What a reproducer run left behind. ``ok`` is True when every rank exited 0."""

    scenario: str
    variant: str
    out_dir: Path
    manifest: dict
    exit_codes: list
    signals: list
    wall_s: float
    files: list = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(code == 0 for code in self.exit_codes)

    @property
    def failed_ranks(self) -> list[int]:
        return [r for r, code in enumerate(self.exit_codes) if code != 0]

    @property
    def killed_ranks(self) -> list[int]:
        return [r["rank"] for r in self.manifest.get("ranks", []) if r.get("killed_by_launcher")]

    @property
    def combined_log(self) -> Path:
        return self.out_dir / "combined.log"

    def rank_log(self, rank: int, stream: str = "stderr") -> Path:
        return self.out_dir / "attempt_0" / str(rank) / f"{stream}.log"

    def summary(self) -> str:
        lines = [
            f"{self.scenario} ({self.variant}) on {self.manifest.get('backend')}, "
            f"{len(self.exit_codes)} ranks, {self.wall_s:.1f} s: {'ok' if self.ok else 'FAILED'}"
        ]
        for r in self.manifest.get("ranks", []):
            how = f"signal {r['signal']}" if r.get("signal") else f"exit code {r['exit_code']}"
            extra = " (killed by the launcher)" if r.get("killed_by_launcher") else ""
            lines.append(f"  rank {r['rank']}: {how}{extra}; last line: {r.get('last_line') or '-'}")
        lines.append(f"  logs: {self.out_dir}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return (
            f"RunResult(scenario={self.scenario!r}, variant={self.variant!r}, ok={self.ok}, "
            f"exit_codes={self.exit_codes}, signals={self.signals}, wall_s={self.wall_s:.2f}, out_dir='{self.out_dir}')"
        )


def check_backend(backend: str, world_size: int) -> None:
    """Raise a one-line UsageError unless ``backend`` can run ``world_size`` ranks here."""
    if backend not in BACKENDS:
        raise UsageError(f"unknown backend {backend!r}", fix=f"use one of {', '.join(BACKENDS)}")
    if backend == "nccl":
        visible = gpu_count()
        if visible < world_size:
            raise UsageError(
                f"--backend nccl needs {world_size} visible CUDA GPUs, found {visible}",
                fix="run on a machine with enough GPUs, lower --world-size, or use --backend gloo",
            )


def gpu_count() -> int:
    """Visible CUDA devices (0 without torch or without CUDA)."""
    if importlib.util.find_spec("torch") is None:
        return 0
    import torch

    try:
        return torch.cuda.device_count() if torch.cuda.is_available() else 0
    except Exception:
        return 0


def free_port() -> int:
    """A TCP port that was free a moment ago on 127.0.0.1 (never a fixed one)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _torch_version() -> str | None:
    try:
        from importlib.metadata import version

        return version("torch")
    except Exception:
        return None


def validate(scenario: str, world_size: int, backend: str, debug: str, timeout: float) -> registry.Scenario:
    """Every check that needs no process: one-line UsageError / MissingDependencyError on bad input."""
    sc = registry.get(scenario)
    if not isinstance(world_size, int) or world_size < 2:
        raise UsageError(
            f"world size must be at least 2, got {world_size}",
            fix="pass --world-size 2 or more (a collective needs two ranks to disagree)",
        )
    if debug not in DEBUG_MODES:
        raise UsageError(f"unknown debug mode {debug!r}", fix=f"use one of {', '.join(DEBUG_MODES)}")
    if not timeout or timeout <= 0:
        raise UsageError(f"timeout must be positive, got {timeout}", fix="pass --timeout 5")
    if importlib.util.find_spec("torch") is None:
        raise MissingDependencyError(
            "torch is not installed; the reproducers run real torch.distributed ranks", fix="pip install torch==2.13.0"
        )
    check_backend(backend, world_size)
    return sc


class _Collector:
    """Reads every rank's stdout and stderr line by line into the per-rank files and combined.log.

    ``max_lines`` (per rank and stream) keeps the first ``max_lines // 2`` and the last
    ``max_lines // 2`` lines and writes one ``[denpex-nb: N lines trimmed]`` marker in between, so
    that recorded runs stay small while keeping the start-up and the failure. Lines containing
    any of ``drop`` are left out of every file (counted in the manifest).
    """

    def __init__(self, out: Path, world_size: int, max_lines: int | None, drop: tuple[str, ...] = ()):
        self.out = out
        self.drop = tuple(drop)
        self.dropped = 0
        self.lock = threading.Lock()
        self.combined = open(out / "combined.log", "w", encoding="utf-8", newline="\n")
        self.max_lines = max_lines
        self.last_line: dict[int, str] = {}
        self.threads: list[threading.Thread] = []
        self.files: dict[tuple[int, str], object] = {}
        for r in range(world_size):
            d = out / "attempt_0" / str(r)
            d.mkdir(parents=True, exist_ok=True)
            for stream in ("stdout", "stderr"):
                self.files[(r, stream)] = open(d / f"{stream}.log", "w", encoding="utf-8", newline="\n")

    def follow(self, rank: int, stream: str, pipe) -> None:
        t = threading.Thread(
            target=self._pump, args=(rank, stream, pipe), daemon=True, name=f"denpex-collect-{rank}-{stream}"
        )
        t.start()
        self.threads.append(t)

    def _write(self, rank: int, stream: str, text: str) -> None:
        with self.lock:
            self.files[(rank, stream)].write(text + "\n")
            self.combined.write(f"[default{rank}]:{text}\n")
            if text.strip():
                self.last_line[rank] = text.strip()[:300]

    def _pump(self, rank: int, stream: str, pipe) -> None:
        head = None if self.max_lines is None else max(1, self.max_lines // 2)
        tail = collections.deque(maxlen=head or 1)
        n = 0
        trimmed = 0
        for raw in iter(pipe.readline, b""):
            text = raw.decode("utf-8", "replace").rstrip("\r\n")
            if self.drop and any(d in text for d in self.drop):
                with self.lock:
                    self.dropped += 1
                continue
            n += 1
            if head is None or n <= head:
                self._write(rank, stream, text)
            else:
                if len(tail) == tail.maxlen:
                    trimmed += 1
                tail.append(text)
        pipe.close()
        if trimmed:
            self._write(rank, stream, f"[denpex-nb: {trimmed} lines trimmed]")
        for text in tail if head is not None else ():
            self._write(rank, stream, text)

    def close(self, join_timeout: float = 5.0) -> None:
        for t in self.threads:
            t.join(join_timeout)
        with self.lock:
            for fh in self.files.values():
                fh.close()
            self.combined.close()


def run(
    scenario: str,
    *,
    fixed: bool = False,
    world_size: int = 2,
    backend: str = "gloo",
    debug: str = "off",
    flight_recorder: bool = False,
    trace: bool = False,
    timeout: float = 5.0,
    out=None,
    fr_stack_traces: bool = False,
    wall_limit: float | None = None,
    max_log_lines: int | None = None,
    drop_lines_containing: tuple[str, ...] = (),
    hang: bool = False,
    stop: threading.Event | None = None,
) -> RunResult:
    """Run ``scenario`` as ``world_size`` real processes and return what they left behind.

    ``flight_recorder`` dumps every rank's Flight Recorder ring to ``<out>/fr/`` (on failure, at
    exit, on SIGTERM); ``fr_stack_traces`` adds each entry's call stack (1.5-3 s of CPU per rank).
    ``trace`` switches on :mod:`denpex_nb.trace` (``<out>/trace/``).
    ``timeout`` is the collective timeout (``init_process_group(timeout=...)``). ``wall_limit``
    (default ``timeout + 25`` s) is the hard deadline after which every rank's process group is
    SIGTERMed, then SIGKILLed ``KILL_GRACE_S`` later. Once a rank has failed, the others get
    ``timeout + KILL_GRACE_S + 4`` more seconds (20 instead of 4 with ``fr_stack_traces``, whose
    dumps are slow) to fail on their own and dump before they are stopped the same way. ``max_log_lines`` and ``drop_lines_containing`` shrink the logs (see
    :class:`_Collector`); both are recorded in the manifest. ``hang=True`` keeps a rank that
    finished alive instead of letting it exit, so its peers hang in the collective it skipped (use
    a long ``timeout``); setting the ``stop`` event ends the job as the wall-clock limit would. ``out`` defaults to ``runs/<scenario>-<variant>-<UTC stamp>``.
    """
    sc = validate(scenario, world_size, backend, debug, timeout)
    variant = "fixed" if fixed else "broken"
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%S")
    out_dir = Path(out) if out is not None else Path("runs") / f"{sc.id}-{variant}-{stamp}"
    out_dir.mkdir(parents=True, exist_ok=True)
    for stale in ("combined.log", "manifest.json"):
        (out_dir / stale).unlink(missing_ok=True)
    wall_limit = float(wall_limit) if wall_limit is not None else float(timeout) + 25.0

    # survivors of a failure need up to one collective timeout to notice, plus their dump
    after_failure_s = float(timeout) + KILL_GRACE_S + (20.0 if flight_recorder and fr_stack_traces else 4.0)
    port = free_port()
    env_set = {
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(port),
        "WORLD_SIZE": str(world_size),
        "LOCAL_WORLD_SIZE": str(world_size),
        "PYTHONUNBUFFERED": "1",
        "OMP_NUM_THREADS": "1",
    }
    env_set.update(DEBUG_ENV[debug])
    if backend == "nccl":
        env_set.update(NCCL_ENV)
    fr_dir = out_dir / "fr" if flight_recorder else None
    trace_dir = out_dir / "trace" if trace else None
    if flight_recorder:
        env_set["TORCH_FR_BUFFER_SIZE"] = "2000"
    for d in (fr_dir, trace_dir):
        if d is not None:
            d.mkdir(parents=True, exist_ok=True)
            for old in d.iterdir():
                old.unlink()
    if trace_dir is not None:
        env_set["DENPEX_TRACE_DIR"] = str(trace_dir.resolve())

    base_env = {k: v for k, v in os.environ.items() if k not in _CONTROLLED}
    pkg_root = str(Path(__file__).resolve().parents[2])
    base_env["PYTHONPATH"] = os.pathsep.join(
        [pkg_root] + ([base_env["PYTHONPATH"]] if base_env.get("PYTHONPATH") else [])
    )
    cmd = [
        sys.executable,
        "-m",
        "denpex_nb.repro._worker",
        "--scenario",
        sc.id,
        "--variant",
        variant,
        "--backend",
        backend,
        "--debug",
        debug,
        "--timeout",
        str(timeout),
    ]
    if fr_dir is not None:
        cmd += ["--fr-dir", str(fr_dir.resolve())] + (["--fr-stacks"] if fr_stack_traces else [])
    if trace_dir is not None:
        cmd += ["--trace-dir", str(trace_dir.resolve())]
    if hang:
        cmd += ["--hang"]

    collector = _Collector(out_dir, world_size, max_log_lines, drop_lines_containing)
    procs: list[subprocess.Popen] = []
    started = time.monotonic()
    started_wall = time.time()
    killed: set[int] = set()
    kill_reason = None
    ended_at: dict[int, float] = {}
    try:
        for r in range(world_size):
            env = dict(base_env, **env_set, RANK=str(r), LOCAL_RANK=str(r), GROUP_RANK="0", ROLE_RANK=str(r))
            p = subprocess.Popen(
                cmd,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
            procs.append(p)
            collector.follow(r, "stdout", p.stdout)
            collector.follow(r, "stderr", p.stderr)
        first_failure = None
        term_sent_at = None
        while True:
            now = time.monotonic()
            for r, p in enumerate(procs):
                if r not in ended_at and p.poll() is not None:
                    ended_at[r] = now - started
                    if p.returncode != 0 and first_failure is None:
                        first_failure = now
            if len(ended_at) == world_size:
                break
            if term_sent_at is None:
                reason = None
                if now - started > wall_limit:
                    reason = f"wall-clock limit of {wall_limit:.0f} s reached"
                elif stop is not None and stop.is_set():
                    reason = "stopped by the caller"
                elif first_failure is not None and now - first_failure > after_failure_s:
                    reason = f"other ranks still running {after_failure_s:.0f} s after the first failure"
                if reason:
                    kill_reason = reason
                    for r, p in enumerate(procs):
                        if r not in ended_at:
                            killed.add(r)
                            signal_group(p, signal.SIGTERM)
                    term_sent_at = now
            elif now - term_sent_at > KILL_GRACE_S:
                for r, p in enumerate(procs):
                    if r not in ended_at:
                        signal_group(p, signal.SIGKILL)
            time.sleep(0.02)
    finally:
        for p in procs:  # on any launcher error (KeyboardInterrupt included) leave nothing behind
            if p.poll() is None:
                signal_group(p, signal.SIGKILL)
                p.wait()
            else:
                signal_group(p, signal.SIGKILL)  # a rank's stray children, if any
        collector.close()
    wall = time.monotonic() - started
    if fr_dir is not None:
        for tmp in fr_dir.glob("*.tmp"):
            tmp.unlink()

    exit_codes = [p.returncode for p in procs]
    signals = [signal_name(c) for c in exit_codes]
    ranks = [
        {
            "rank": r,
            "local_rank": r,
            "pid": p.pid,
            "exit_code": p.returncode,
            "signal": signals[r],
            "killed_by_launcher": r in killed,
            "ended_after_s": round(ended_at.get(r, wall), 3),
            "last_line": collector.last_line.get(r),
        }
        for r, p in enumerate(procs)
    ]
    files = sorted(str(f.relative_to(out_dir)) for f in out_dir.rglob("*") if f.is_file()) + ["manifest.json"]
    from importlib.metadata import version

    manifest = {
        "scenario": sc.id,
        "title": sc.title,
        "variant": variant,
        "backend": backend,
        "world_size": world_size,
        "debug": debug,
        "flight_recorder": flight_recorder,
        "fr_stack_traces": bool(flight_recorder and fr_stack_traces),
        "trace": trace,
        "hang": hang,
        "timeout_s": timeout,
        "wall_limit_s": wall_limit,
        "launcher": "denpex_nb.repro.launch (own subprocess launcher, one process session per rank)",
        "command": ["python"] + [c.replace(str(out_dir.resolve()), "<out>") for c in cmd[1:]],
        "env": {k: (v if k != "DENPEX_TRACE_DIR" else "trace") for k, v in env_set.items()},
        "env_per_rank": ["RANK", "LOCAL_RANK", "GROUP_RANK", "ROLE_RANK"],
        "torch": _torch_version(),
        "python": platform.python_version(),
        "platform": platform.platform(terse=True),
        "denpex_nb": version("denpex_nb"),
        "started_at": _dt.datetime.fromtimestamp(started_wall, _dt.timezone.utc).isoformat(timespec="microseconds"),
        "wall_s": round(wall, 3),
        "exit_codes": exit_codes,
        "signals": signals,
        "ranks": ranks,
        "killed_by_launcher": sorted(killed),
        "kill_reason": kill_reason,
        "outcome": "ok" if all(c == 0 for c in exit_codes) else "failed",
        "log_lines_limit": max_log_lines,
        "dropped_lines": {"containing": list(drop_lines_containing), "count": collector.dropped},
        "files": files,
        "expected": sc.expected(variant, world_size, debug),
    }
    with open(out_dir / "manifest.json", "w", encoding="utf-8") as fh:
        json.dump(manifest, fh, indent=2)
        fh.write("\n")
    return RunResult(
        scenario=sc.id,
        variant=variant,
        out_dir=out_dir,
        manifest=manifest,
        exit_codes=exit_codes,
        signals=signals,
        wall_s=wall,
        files=[out_dir / f for f in files],
    )
