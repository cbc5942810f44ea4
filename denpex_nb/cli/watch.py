"""``denpex-nb watch PATH... [--json] [--stall S] [--on-finding CMD] [--once] [--idle-exit S]``.

Follows a running job's evidence (:class:`denpex_nb.live.Watcher`) and prints each finding the
moment it is made: human text, or one JSON object per line with ``--json`` (the fields of
``diagnose --json`` plus ``since_divergence_s``). ``--on-finding CMD`` runs ``CMD`` through the
shell once per finding with the finding's JSON on its standard input (say, to take a Flight
Recorder dump or ``py-spy dump`` the stuck ranks); it runs beside the watcher, bounded by
``--on-finding-timeout``, and its process group is stopped if it overruns. When the job's
evidence ends, on Ctrl-C, or after the first finding with ``--once``, the whole evidence gets the
ordinary diagnosis, printed last (``{"final": ...}`` with ``--json``). Exit 0.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time


def run(args) -> int:
    from ..human import fmt_ranks
    from ..live import Watcher

    w = Watcher(args.paths, stall=args.stall, interval=args.interval, idle_exit=args.idle_exit)
    hooks: list[threading.Thread] = []
    said_waiting = said_absent = False
    stop_reason = None
    try:
        for finding in w.findings(ticks=True):
            if finding is None:  # a tick without findings: say what we wait for, once
                msg = w.waiting_for()
                if msg and not said_waiting:
                    print(f"denpex-nb watch: {msg}", file=sys.stderr, flush=True)
                    said_waiting = True
                absent = w.absent_ranks()
                if absent and not said_absent and w.clock() - w.started_at >= w.state.stall_s():
                    print(
                        f"denpex-nb watch: no trace yet from {fmt_ranks(absent)} of a group of "
                        f"{max(g.n_members() for g in w.state.groups.values())} (absent so far)",
                        file=sys.stderr,
                        flush=True,
                    )
                    said_absent = True
                continue
            if args.json:
                print(json.dumps(finding.to_dict()), flush=True)
            else:
                print(f"[{time.strftime('%H:%M:%S')}] {finding}", flush=True)
            if args.on_finding:
                hooks.append(_hook(args.on_finding, finding.to_dict(), args.on_finding_timeout))
            if args.once:
                stop_reason = "stopped after the first finding (--once)"
                break
        else:
            stop_reason = w.ended_reason
    except KeyboardInterrupt:
        stop_reason = "interrupted"
    finally:
        w.close()
    for t in hooks:
        t.join(args.on_finding_timeout + 10)
    for path, why in w.trace.restarts + w.other.restarts:
        print(f"denpex-nb watch: {path} was {why}; read again from its start", file=sys.stderr)
    if w.state.bad_lines:
        print(
            f"denpex-nb watch: {w.state.bad_lines} tracer line(s) could not be read and were skipped", file=sys.stderr
        )
    if not (w.trace.tails or w.other.tails):
        print("denpex-nb watch: no evidence appeared; nothing to diagnose", file=sys.stderr)
        return 0
    final = w.final_diagnosis()
    if args.json:
        print(
            json.dumps({"final": final.to_dict(), "stopped": stop_reason, "stall_s": round(w.state.stall_s(), 3)}),
            flush=True,
        )
    else:
        print(
            f"--- {stop_reason or 'stopped'} (stall time {w.state.stall_s():.1f} s); final diagnosis of the whole evidence:"
        )
        print(final)
    return 0


def _hook(cmd: str, finding: dict, timeout: float) -> threading.Thread:
    """Run ``cmd`` with the finding on stdin in its own process group, beside the watcher."""
    from ..processes import stop_group

    def go():
        try:
            p = subprocess.Popen(cmd, shell=True, stdin=subprocess.PIPE, start_new_session=True)
        except OSError as e:
            print(f"denpex-nb watch: --on-finding could not start: {e}", file=sys.stderr)
            return
        try:
            p.communicate(json.dumps(finding).encode() + b"\n", timeout=timeout)
        except subprocess.TimeoutExpired:
            stop_group(p)
            print(f"denpex-nb watch: --on-finding ran past {timeout:g} s and was stopped", file=sys.stderr)
        except BrokenPipeError:
            p.wait(timeout)
        if p.returncode not in (0, None):
            print(f"denpex-nb watch: --on-finding exited with {p.returncode}", file=sys.stderr)

    t = threading.Thread(target=go, name="denpex-on-finding", daemon=True)
    t.start()
    return t
