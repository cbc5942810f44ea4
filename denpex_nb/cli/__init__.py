"""``denpex-nb``: demo, diagnose, watch, report, notebooks, repro.

This file parses the arguments and turns :class:`~denpex_nb.errors.DenpexError` into one line on
stderr with exit code 2. Each sub-command's handler is a module of this package (``diagnose.py``,
``watch.py``, ``report.py``, ``demo.py``, ``notebooks.py``, ``repro.py``), imported only when its command runs, so ``diagnose``
never imports papermill or torch. A handler takes the parsed arguments and returns the exit code;
the work itself is done by the library (:mod:`denpex_nb.ingest`, :mod:`denpex_nb.analysis`,
:mod:`denpex_nb.report`, :mod:`denpex_nb.repro`).
"""

from __future__ import annotations

import argparse
import importlib
import sys

from ..errors import DenpexError

#: sub-command -> "module:function"; the function takes the parsed args and returns an exit code
HANDLERS = {
    "demo": "denpex_nb.cli.demo:run",
    "diagnose": "denpex_nb.cli.diagnose:run",
    "watch": "denpex_nb.cli.watch:run",
    "report": "denpex_nb.cli.report:run",
    "notebooks": "denpex_nb.cli.notebooks:run",
    "repro list": "denpex_nb.cli.repro:list_scenarios",
    "repro run": "denpex_nb.cli.repro:run",
    "repro record": "denpex_nb.cli.repro:record",
}


def _version() -> str:
    """The installed distribution's version (pyproject.toml is the one place it is written)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("denpex_nb")
    except PackageNotFoundError:  # a source tree that was never installed
        return "0+unknown"


class _Parser(argparse.ArgumentParser):
    """argparse exits 2 on usage errors already; keep its one-line message, drop the usage dump."""

    def error(self, message):  # noqa: D401
        self.exit(
            2,
            f"denpex-nb: error: {message} (fix: see 'denpex-nb {self.prog.split(' ', 1)[-1]} --help')\n"
            if " " in self.prog
            else f"denpex-nb: error: {message} (fix: see 'denpex-nb --help')\n",
        )


def _year(text: str) -> int:
    """``--year``: a whole number within the years a timestamp can hold (see ``ingest.check_year``)."""
    from ..ingest.sources import YEAR_RANGE

    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--year {text!r} is not a whole number") from None
    lo, hi = YEAR_RANGE
    if not lo <= value <= hi:
        raise argparse.ArgumentTypeError(f"--year {text} is out of range: give a year from {lo} to {hi}")
    return value


class _VersionAction(argparse.Action):
    """``--version``, its text looked up only when asked for: ``importlib.metadata`` and the look-up
    cost every command ~15 ms of CPU at start."""

    def __call__(self, parser, namespace, values, option_string=None):
        sys.stdout.write(f"denpex-nb {_version()}\n")  # to stdout, as argparse's own version action
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="denpex-nb", description="Find out why multi-rank PyTorch jobs fail in their collectives.")
    p.add_argument("--version", action=_VersionAction, nargs=0, help="show the version and exit")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    d = sub.add_parser("demo", help="run the all_gather shape-mismatch reproducer, diagnose it, render a report")
    d.add_argument("--out", default=None, help="folder for the run and the report (default: a new temp folder)")
    d.add_argument("--world-size", type=int, default=2)

    g = sub.add_parser("diagnose", help="diagnose logs and dumps")
    g.add_argument("paths", nargs="+", help="files, folders, globs, or - for standard input")
    g.add_argument("--json", action="store_true", help="print the diagnosis as JSON")
    g.add_argument("--format", dest="force_format", default=None, help="force a reader for every input")
    g.add_argument("--year", type=_year, default=None, help="year for year-less log timestamps")
    g.add_argument("--quiet", action="store_true", help="no progress bar")
    g.add_argument(
        "--redact", action="store_true", help="mask hosts, IPs, user names, e-mails and tokens in the output"
    )
    g.add_argument(
        "--scheduler",
        default=None,
        metavar="ADDR",
        help="parse the files on this dask.distributed scheduler's workers (tcp://host:8786; "
        "needs the dask extra; DENPEX_DASK_TIMEOUT bounds the wait)",
    )

    w = sub.add_parser("watch", help="follow a running job's evidence and name a divergence while it hangs")
    w.add_argument("paths", nargs="+", help="folders, files or globs the job writes (tracer, logs, dumps)")
    w.add_argument("--json", action="store_true", help="one JSON object per finding, then the final diagnosis")
    w.add_argument(
        "--stall",
        type=float,
        default=None,
        help="seconds of no progress before ranks missing from a collective are called stuck (default: adaptive, 2 s floor)",
    )
    w.add_argument("--interval", type=float, default=0.25, help="seconds between polls of the files")
    w.add_argument("--idle-exit", type=float, default=None, help="stop after this many seconds without new evidence")
    w.add_argument("--once", action="store_true", help="stop after the first finding")
    w.add_argument("--on-finding", default=None, metavar="CMD", help="run CMD (shell) per finding, JSON on stdin")
    w.add_argument("--on-finding-timeout", type=float, default=120.0, help="seconds before --on-finding CMD is stopped")

    r = sub.add_parser("report", help="render an incident report (HTML) from logs and dumps")
    r.add_argument("paths", nargs="+")
    r.add_argument("-o", "--output", default="report.html")
    r.add_argument("--title", default=None)
    r.add_argument(
        "--redact",
        action="store_true",
        help="mask hosts, IPs, user names, e-mails and tokens in the report and the notebook",
    )
    r.add_argument("--ipynb", default=None, metavar="PATH", help="also keep the executed notebook here")

    nb = sub.add_parser("notebooks", help="copy the post-mortem, the report template and the lessons into a folder")
    nb.add_argument("dest", help="folder to copy the .ipynb files into (created if missing)")
    nb.add_argument("--overwrite", action="store_true", help="replace notebooks of the same name already there")

    rp = sub.add_parser("repro", help="run the reproducer zoo")
    rsub = rp.add_subparsers(dest="repro_command", required=True, parser_class=_Parser)
    rsub.add_parser("list", help="list scenarios")
    rr = rsub.add_parser("run", help="run one scenario as N real processes")
    rr.add_argument("scenario")
    rr.add_argument("--fixed", action="store_true", help="run the fixed variant")
    rr.add_argument("--world-size", type=int, default=2)
    rr.add_argument("--backend", choices=("gloo", "nccl"), default="gloo")
    rr.add_argument("--debug", choices=("off", "info", "detail"), default="off")
    rr.add_argument("--flight-recorder", action="store_true", help="dump Flight Recorder buffers per rank")
    rr.add_argument("--fr-stacks", action="store_true", help="include call stacks in the Flight Recorder dumps (slow)")
    rr.add_argument("--trace", action="store_true", help="enable the denpex_nb.trace collective tracer")
    rr.add_argument("--timeout", type=float, default=5.0, help="collective timeout in seconds")
    rr.add_argument("--out", default=None, help="output folder (default: runs/<scenario>-<variant>-<stamp>)")
    rc = rsub.add_parser("record", help="regenerate the recorded runs under data/recorded")
    rc.add_argument("--out", default="data/recorded")
    rc.add_argument("--backend", choices=("gloo", "nccl"), default="gloo")
    rc.add_argument(
        "--world-size",
        type=int,
        action="append",
        dest="world_sizes",
        default=None,
        help="world size to record (repeatable; default 2 and 4)",
    )
    rc.add_argument(
        "--scenario",
        action="append",
        dest="scenarios",
        default=None,
        help="only this scenario (repeatable; default every scenario)",
    )
    return p


#: numpy asks the kernel for transparent huge pages for every array of 4 MB or more; where THP
#: defragmentation is "madvise" (a common default) and memory is fragmented (a page cache full of
#: logs), each such fault may compact memory first: measured on a 2-core VM, 40 arrays of 16 MB
#: took 1.3-1.7 s of CPU (5.5 s wall) instead of 0.3 s, and a 1024-dump diagnose spent 2.1 s in
#: the kernel instead of 1.0 s. The CLI is a short process over 2M-row frames: it asks for ordinary
#: pages unless the user chose otherwise (an existing ``NUMPY_MADVISE_HUGEPAGE`` is kept).
HUGEPAGE_ENV = "NUMPY_MADVISE_HUGEPAGE"


#: glibc hands a freed block of 128 KiB or more (every column of a 2M-row frame) back to the
#: kernel at once, and the next such block arrives as fresh pages, each zeroed on its first touch.
#: ``diagnose`` is a short process that makes and frees hundreds of such arrays, so it keeps freed
#: memory for reuse: blocks up to this size come from the heap and the heap is not trimmed
#: (:func:`keep_freed_memory`). Measured on 1024 Flight Recorder dumps x 2000 entries (2-core VM,
#: 4 runs each way, alternating): kernel CPU 0.73-0.76 -> 0.59-0.65 s, peak RSS 823-889 -> 890-892 MB,
#: the same output.
MMAP_THRESHOLD = 32 << 20


def keep_freed_memory() -> bool:
    """Ask glibc's malloc (through ``mallopt``) to keep freed memory for reuse in this process (see
    :data:`MMAP_THRESHOLD`): True when it did. Not done where the user set malloc tunables
    (``GLIBC_TUNABLES``), nor off Linux or without glibc's ``mallopt``."""
    import os

    if not sys.platform.startswith("linux") or "malloc" in os.environ.get("GLIBC_TUNABLES", ""):
        return False
    try:
        import ctypes

        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError, TypeError):
        return False
    m_trim_threshold, m_mmap_threshold = -1, -3  # malloc.h
    return bool(mallopt(m_mmap_threshold, MMAP_THRESHOLD)) and bool(mallopt(m_trim_threshold, (1 << 31) - 1))


def main(argv: list[str] | None = None) -> int:
    import os

    if "numpy" not in sys.modules:  # read by numpy when it is first imported, not later
        os.environ.setdefault(HUGEPAGE_ENV, "0")
    args = build_parser().parse_args(argv)
    if args.command == "diagnose":
        keep_freed_memory()
    key = args.command if args.command != "repro" else f"repro {args.repro_command}"
    module, func = HANDLERS[key].split(":")
    try:
        handler = getattr(importlib.import_module(module), func)
        rc = int(handler(args) or 0)
        if argv is None and key == "diagnose" and not getattr(args, "scheduler", None):
            _exit_now(rc)  # the command line's process: nothing left to tear down
        return rc
    except DenpexError as e:
        print(f"denpex-nb: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("denpex-nb: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # `denpex-nb ... | head` closed the pipe: not an error. Point stdout at devnull so the
        # interpreter's final flush does not raise again.
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def _exit_now(rc: int) -> None:
    """End the process at once once ``diagnose`` has written its output: the interpreter's teardown
    frees every object of the loaded incident one by one (0.08 s of CPU after 2,000 tiny files,
    0.3 s after 50,000), and a finished diagnose holds nothing that needs closing (its files are
    closed, its process pool joined, no cluster client: with ``--scheduler`` it exits normally).
    Returns (the caller exits normally) when the output cannot be flushed."""
    import os

    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BrokenPipeError:  # `denpex-nb diagnose ... | head` closed the pipe: not an error (as in main)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        os._exit(0)
    except (OSError, ValueError):  # a full disk, a closed stream: the ordinary exit reports it
        return
    os._exit(rc)
