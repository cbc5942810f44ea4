"""Keyhole views of a recorded run: the partial, mangled evidence a user really ends up holding.

A recorded run folder (``data/recorded/<backend>/<scenario>/<variant>-<mode>-w<N>/``) holds
everything: ``combined.log`` (``[default<R>]:`` prefixes), ``attempt_0/<R>/stdout.log|stderr.log``,
``fr/comm_lib_trace_rank_<R>`` (Flight Recorder dumps), ``trace/denpex_trace_rank<R>.jsonl`` (our
tracer) and ``manifest.json`` (the launcher's record, with ``expected``: what the scenario planted).
A user rarely holds all of that. This module builds, from one run folder, the *views* a user really
has, so that the diagnosis of each view can be checked against the run's planted answer with one
acceptance rule (:func:`judge`), in the tests (``tests/analysis/test_keyhole.py``) and in the
benchmark (``benchmarks/bench_keyhole.py``).

A view is described by a :class:`Recipe` (a small frozen dataclass whose ``name`` round-trips
through :meth:`Recipe.parse`, so every failing view can be rebuilt from its name) and rendered by
:func:`render` into a ``dict`` of relative path -> bytes. Everything here is a pure function of
(run folder, recipe); randomness (cut points, interleavings, rank subsets) is drawn by
:func:`recipes` from a seeded ``random.Random`` and then written *into* the recipe, so rendering
never draws. Recipe fields compose, applied in this order:

1. ``sources`` - which kinds of files the user has: ``combined`` (combined.log), ``perrank`` (the
   per-rank stdout/stderr files), ``fr`` (Flight Recorder dumps), ``trace`` (tracer JSONL),
   ``manifest`` (the launcher's record, written WITHOUT its ``expected`` key; the stand-in for
   torchrun's ChildFailedError table). Named sets: :data:`SOURCE_SETS`.
2. ``ranks`` - only these ranks' files; ``combined.log`` filtered to lines whose ``[default<R>]:``
   prefix names one of them (as ``grep '^\\[default1\\]'`` does; unprefixed lines are dropped).
   The manifest (which lists all ranks) is dropped from a rank-subset view.
3. ``merge`` - each rank's stdout and stderr merged into one ``rank<R>.log``, interleaved line by
   line at random (seeded by the value; each stream keeps its own order), as a pod log or a shared
   terminal gives them.
4. ``prefix`` - a wrapper on every text-log line (:data:`PREFIXES`): ``grep`` (``grep -H`` over
   the log files into one ``grep.txt``: ``combined.log:...``, ``rank1.log:...``), ``kubectl``
   (``kubectl logs --timestamps``: ``2024-05-01T12:00:00.123456789Z ...``), ``compose`` (``docker
   compose logs``: all files interleaved into one ``compose.log``, ``worker-1  | ...``), ``syslog``
   (``May  1 12:00:00 node1 python[1234]: ...``), ``applog`` (an application logger wrapper,
   ``[RANK 1] 2025-01-01 12:00:00 [ERROR] trainer: ...``, *inside* torchrun's ``[default<R>]:``),
   ``ansi-line`` (an ANSI colour around each line), ``ansi-token`` (ANSI colours around the rank
   prefixes, error words and numbers).
5. ``cut`` - ``head@F`` keeps the first ``round(F*n)`` lines of each text log, ``tail@F`` drops
   them and keeps the rest; ``~M`` makes the cut mid-line (``head@F~M`` also keeps the first
   ``M`` share of the next line's characters, unterminated; ``tail@F~M`` starts ``M`` of the way
   into the first kept line).
6. ``wrap`` - every text-log line hard-wrapped at 80 or 120 columns (a terminal copy).

Tracer JSONL, Flight Recorder dumps and the manifest are never decorated, cut or wrapped: a user
either has those files or does not.

Usage (also the reproducer the benchmark prints for a failing view)::

    from tests.keyhole import Recipe, render, diagnose_view, judge, load_manifest
    run = "data/recorded/gloo/rank-crash/broken-plain-w2"
    files = render(run, Recipe.parse("src=combined;prefix=kubectl"))
    d = diagnose_view(files)
    print(d.summary(), judge(d, load_manifest(run), files))
"""

from __future__ import annotations

import json
import pickle
import random
import re
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RECORDED = ROOT / "data" / "recorded"

SOURCES = ("combined", "perrank", "fr", "trace", "manifest")  # canonical order
SOURCE_SETS: dict[str, tuple[str, ...]] = {
    "tracer": ("trace",),
    "fr": ("fr",),
    "logs-combined": ("combined",),
    "logs-perrank": ("perrank",),
    "logs": ("combined", "perrank"),
    "logs+fr": ("combined", "perrank", "fr"),
    "logs+tracer": ("combined", "perrank", "trace"),
    "everything": SOURCES,
    "everything-no-manifest": ("combined", "perrank", "fr", "trace"),
}
PREFIXES = ("grep", "kubectl", "compose", "syslog", "applog", "ansi-line", "ansi-token")
WRAPS = (80, 120)

_DEFAULT = re.compile(r"^\[default(\d+)\]:")
_PERRANK = re.compile(r"^attempt_\d+/(\d+)/(stdout|stderr)\.log$")
_FR = re.compile(r"^fr/.*rank_(\d+)$")
_TRACE = re.compile(r"^trace/.*rank(\d+)\.jsonl$")
_RANKLOG = re.compile(r"^rank(\d+)\.log$")


# --- recipes ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Recipe:
    """What a user holds of one run (see the module docstring for each field's meaning)."""

    sources: tuple[str, ...] = SOURCES
    ranks: tuple[int, ...] | None = None
    merge: int | None = None
    prefix: str | None = None
    cut: str | None = None  # "head@0.400", "tail@0.400~0.50"
    wrap: int | None = None

    def __post_init__(self):
        object.__setattr__(self, "sources", tuple(s for s in SOURCES if s in set(self.sources)))
        if self.ranks is not None:
            object.__setattr__(self, "ranks", tuple(sorted(set(int(r) for r in self.ranks))))
        unknown = set(self.sources) - set(SOURCES)
        if unknown or not self.sources:
            raise ValueError(f"bad sources {self.sources}")
        if self.prefix is not None and self.prefix not in PREFIXES:
            raise ValueError(f"unknown prefix {self.prefix!r}")
        if self.cut is not None:
            _parse_cut(self.cut)

    @property
    def name(self) -> str:
        parts = ["src=" + "+".join(self.sources)]
        if self.ranks is not None:
            parts.append("ranks=" + ",".join(map(str, self.ranks)))
        if self.merge is not None:
            parts.append(f"merge={self.merge}")
        if self.prefix:
            parts.append(f"prefix={self.prefix}")
        if self.cut:
            parts.append(f"cut={self.cut}")
        if self.wrap:
            parts.append(f"wrap={self.wrap}")
        return ";".join(parts)

    @property
    def family(self) -> str:
        """The name without its random parameters (cut points, seeds, which ranks): for grouping."""
        parts = ["src=" + "+".join(self.sources)]
        if self.ranks is not None:
            parts.append(f"ranks=<{len(self.ranks)}>")
        if self.merge is not None:
            parts.append("merged")
        if self.prefix:
            parts.append(f"prefix={self.prefix}")
        if self.cut:
            kind, _, mid = _parse_cut(self.cut)
            parts.append(f"cut={kind}" + ("-midline" if mid is not None else ""))
        if self.wrap:
            parts.append(f"wrap={self.wrap}")
        return ";".join(parts)

    @classmethod
    def parse(cls, name: str) -> Recipe:
        kw: dict = {}
        for part in filter(None, name.split(";")):
            key, _, val = part.partition("=")
            if key == "src":
                kw["sources"] = tuple(val.split("+"))
            elif key == "ranks":
                kw["ranks"] = tuple(int(r) for r in val.split(",") if r != "")
            elif key == "merge":
                kw["merge"] = int(val)
            elif key == "prefix":
                kw["prefix"] = val
            elif key == "cut":
                kw["cut"] = val
            elif key == "wrap":
                kw["wrap"] = int(val)
            else:
                raise ValueError(f"unknown recipe part {part!r}")
        return cls(**kw)


def _parse_cut(cut: str) -> tuple[str, float, float | None]:
    m = re.fullmatch(r"(head|tail)@([01](?:\.\d+)?)(?:~([01](?:\.\d+)?))?", cut)
    if not m:
        raise ValueError(f"bad cut {cut!r}")
    return m.group(1), float(m.group(2)), (float(m.group(3)) if m.group(3) is not None else None)


def cut_spec(kind: str, frac: float, mid: float | None = None) -> str:
    return f"{kind}@{frac:.3f}" + (f"~{mid:.2f}" if mid is not None else "")


# --- the run's files --------------------------------------------------------------------------


@lru_cache(maxsize=8)
def _run(run_dir: str) -> tuple[dict[str, bytes], dict]:
    base = Path(run_dir)
    files = {p.relative_to(base).as_posix(): p.read_bytes() for p in sorted(base.rglob("*")) if p.is_file()}
    manifest = json.loads(files["manifest.json"])
    return files, manifest


def load_manifest(run_dir) -> dict:
    return _run(str(Path(run_dir).resolve()))[1]


def recorded_runs(root: Path = RECORDED) -> list[Path]:
    return sorted(p.parent for p in Path(root).rglob("manifest.json"))


def run_id(run_dir) -> str:
    p = Path(run_dir).resolve()
    try:
        return p.relative_to(RECORDED).as_posix()
    except ValueError:
        return p.as_posix()


def world_size(run_dir) -> int:
    return int(load_manifest(run_dir)["world_size"])


def _kind(path: str) -> tuple[str | None, int | None]:
    """(source kind, rank) of one file of a run folder."""
    if path == "combined.log":
        return "combined", None
    if path == "manifest.json":
        return "manifest", None
    for kind, rx in (("perrank", _PERRANK), ("fr", _FR), ("trace", _TRACE)):
        m = rx.match(path)
        if m:
            return kind, int(m.group(1))
    return None, None


# --- text helpers ------------------------------------------------------------------------------


def _lines(data: bytes) -> tuple[list[str], bool]:
    """Lines (without their newline) and whether the text ended with a newline."""
    text = data.decode("utf-8", "surrogateescape")
    if not text:
        return [], False
    ends = text.endswith("\n")
    body = text[:-1] if ends else text
    return body.split("\n"), ends


def _join(lines: list[str], ends: bool = True) -> bytes:
    if not lines:
        return b""
    return ("\n".join(lines) + ("\n" if ends else "")).encode("utf-8", "surrogateescape")


def _interleave(streams: list[list[str]], rng: random.Random) -> list[tuple[int, str]]:
    """Merge line lists at random, each keeping its own order; returns (stream index, line)."""
    pos = [0] * len(streams)
    out: list[tuple[int, str]] = []
    while True:
        live = [i for i, s in enumerate(streams) if pos[i] < len(s)]
        if not live:
            return out
        i = rng.choice(live)
        out.append((i, streams[i][pos[i]]))
        pos[i] += 1


@dataclass
class _Log:
    """One text log of a view being built."""

    path: str
    rank: int | None  # None: combined.log (ranks in its prefixes)
    stream: str  # combined | stdout | stderr | merged
    lines: list[str] = field(default_factory=list)
    ends: bool = True


# --- rendering ---------------------------------------------------------------------------------


def render(run_dir, recipe: Recipe) -> dict[str, bytes]:
    """The files (relative path -> bytes) a user holding ``recipe`` of this run has."""
    files, manifest = _run(str(Path(run_dir).resolve()))
    keep = set(recipe.sources)
    ranks = None if recipe.ranks is None else set(recipe.ranks)
    pids = {r.get("rank"): r.get("pid") for r in manifest.get("ranks") or [] if isinstance(r, dict)}

    out: dict[str, bytes] = {}
    logs: list[_Log] = []
    perrank: dict[int, dict[str, _Log]] = {}
    for path, data in files.items():
        kind, rank = _kind(path)
        if kind is None or kind not in keep:
            continue
        if kind == "manifest":
            if ranks is None:
                m = {k: v for k, v in json.loads(data).items() if k != "expected"}
                out[path] = json.dumps(m, indent=2).encode()
            continue
        if ranks is not None and rank is not None and rank not in ranks:
            continue
        if kind in ("fr", "trace"):
            out[path] = data
            continue
        lines, ends = _lines(data)
        if kind == "combined":
            if ranks is not None:
                lines = [ln for ln in lines if (m := _DEFAULT.match(ln)) and int(m.group(1)) in ranks]
            logs.append(_Log(path, None, "combined", lines, ends))
        else:
            stream = _PERRANK.match(path).group(2)
            perrank.setdefault(rank, {})[stream] = _Log(path, rank, stream, lines, ends)

    merge = recipe.merge
    if merge is None and recipe.prefix == "compose":
        merge = 0  # a container's log is stdout+stderr already
    for rank in sorted(perrank):
        streams = perrank[rank]
        if merge is None:
            logs.extend(streams[s] for s in ("stdout", "stderr") if s in streams)
            continue
        order = [streams[s] for s in ("stdout", "stderr") if s in streams]
        mixed = _interleave([s.lines for s in order], random.Random(f"{merge}:{rank}"))
        logs.append(_Log(f"rank{rank}.log", rank, "merged", [ln for _, ln in mixed]))

    logs = _prefix(logs, recipe.prefix, pids, merge or 0)
    if recipe.cut:
        for lg in logs:
            lg.lines, lg.ends = _cut(lg.lines, lg.ends, recipe.cut)
    if recipe.wrap:
        for lg in logs:
            lg.lines = [chunk for ln in lg.lines for chunk in _wrap(ln, recipe.wrap)]
    for lg in logs:
        if lg.lines:
            out[lg.path] = _join(lg.lines, lg.ends)
    return dict(sorted(out.items()))


def _wrap(line: str, width: int) -> list[str]:
    if len(line) <= width:
        return [line]
    return [line[i : i + width] for i in range(0, len(line), width)]


def _cut(lines: list[str], ends: bool, cut: str) -> tuple[list[str], bool]:
    kind, frac, mid = _parse_cut(cut)
    k = round(frac * len(lines))
    if kind == "head":
        head = lines[:k]
        if mid is not None and k < len(lines):
            part = lines[k][: round(mid * len(lines[k]))]
            return (head + [part], False) if part else (head, True)
        return head, (ends if k >= len(lines) else True)
    tail = lines[k:]
    if mid is not None and tail:
        first = tail[0][round(mid * len(tail[0])) :]
        tail = ([first] if first else []) + tail[1:]
    return tail, ends


_TS0 = 1714564800.0  # 2024-05-01T12:00:00Z


def _iso(i: int) -> str:
    import datetime as _dt

    t = _TS0 + i * 0.0137
    sec = int(t)
    frac = int(round((t - sec) * 1e9)) % 1_000_000_000
    return _dt.datetime.fromtimestamp(sec, _dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S") + f".{frac:09d}Z"


def _syslog_ts(i: int) -> str:
    import datetime as _dt

    d = _dt.datetime.fromtimestamp(_TS0 + i // 7, _dt.timezone.utc)
    return f"{d:%b} {d.day:2d} {d:%H:%M:%S}"


_ANSI_TOKEN = re.compile(r"\[(?:default|rank)\d+\]:|\b\w*(?:Error|Exception)\b|Traceback|\b\d+\b")


def _ansi_token(line: str) -> str:
    def col(m: re.Match) -> str:
        t = m.group(0)
        code = "36" if t.startswith("[") else ("1;31" if t[:1].isalpha() else "33")
        return f"\x1b[{code}m{t}\x1b[0m"

    return _ANSI_TOKEN.sub(col, line)


def _prefix(logs: list[_Log], style: str | None, pids: dict, seed: int) -> list[_Log]:
    if style is None or not logs:
        return logs
    if style == "grep":
        lines = [f"{lg.path}:{ln}" for lg in logs for ln in lg.lines]
        return [_Log("grep.txt", None, "combined", lines)]
    if style == "compose":
        names = ["trainer-1" if lg.rank is None else f"worker-{lg.rank}" for lg in logs]
        width = max(map(len, names))
        mixed = _interleave([lg.lines for lg in logs], random.Random(f"compose:{seed}"))
        return [_Log("compose.log", None, "combined", [f"{names[i]:<{width}}  | {ln}" for i, ln in mixed])]
    n = 0
    for lg in logs:
        new = []
        for ln in lg.lines:
            if style == "kubectl":
                ln = f"{_iso(n)} {ln}"
            elif style == "syslog":
                pid = 4242 if lg.rank is None else (pids.get(lg.rank) or 1000 + lg.rank)
                ln = f"{_syslog_ts(n)} node1 python[{pid}]: {ln}"
            elif style == "applog":
                m = _DEFAULT.match(ln)
                rank = lg.rank if lg.rank is not None else (int(m.group(1)) if m else None)
                if rank is not None:
                    level = "ERROR" if lg.stream == "stderr" else "INFO"
                    head, body = (ln[: m.end()], ln[m.end() :]) if m else ("", ln)
                    t = _syslog_ts(n).split()[-1]
                    ln = f"{head}[RANK {rank}] 2025-01-01 {t} [{level}] trainer: {body}"
            elif style == "ansi-line":
                code = 31 + ((lg.rank if lg.rank is not None else n) % 6)
                ln = f"\x1b[{code}m{ln}\x1b[0m"
            elif style == "ansi-token":
                ln = _ansi_token(ln)
            new.append(ln)
            n += 1
        lg.lines = new
    return logs


# --- the views of a run ------------------------------------------------------------------------


def _rand_cut(rng: random.Random, kind: str | None = None, midline: bool | None = None) -> str:
    kind = kind or rng.choice(("head", "tail"))
    midline = rng.random() < 0.5 if midline is None else midline
    return cut_spec(kind, rng.uniform(0.05, 0.95), rng.uniform(0.1, 0.9) if midline else None)


def recipes(run_dir, seed: int = 0, n_random: int = 12) -> list[Recipe]:
    """All views the harness takes of one run (deterministic for a given seed)."""
    w = world_size(run_dir)
    rng = random.Random(f"{seed}:{run_id(run_dir)}")
    all_ranks = list(range(w))
    out: list[Recipe] = [Recipe(sources=s) for s in SOURCE_SETS.values()]
    nm = SOURCE_SETS["everything-no-manifest"]
    logs = SOURCE_SETS["logs"]
    for r in all_ranks:  # one rank's files
        out += [
            Recipe(sources=nm, ranks=(r,)),
            Recipe(sources=logs, ranks=(r,)),
            Recipe(sources=("perrank",), ranks=(r,), merge=seed),
        ]
    if w > 2:  # a random subset of ranks
        for _ in range(2):
            sub = tuple(rng.sample(all_ranks, rng.randint(2, w - 1)))
            out += [Recipe(sources=nm, ranks=sub), Recipe(sources=("combined",), ranks=sub)]
    arrangements = [dict(sources=("combined",)), dict(sources=("perrank",), merge=seed)]
    for arr in arrangements:
        for kind in ("head", "tail"):  # cuts, at a line and mid-line
            for mid in (False, True):
                out.append(Recipe(**arr, cut=_rand_cut(rng, kind, mid)))
        out += [Recipe(**arr, wrap=wd) for wd in WRAPS]
        out += [Recipe(**arr, prefix=p) for p in PREFIXES]
    out += [
        Recipe(sources=("perrank",), merge=seed + 1),
        Recipe(sources=("perrank", "fr"), merge=seed),
        Recipe(sources=("perrank", "trace"), merge=seed),
    ]
    text_sets = ["logs-combined", "logs-perrank", "logs", "logs+fr", "logs+tracer", "everything-no-manifest"]
    for _ in range(n_random):  # random compositions
        src = SOURCE_SETS[rng.choice(text_sets)]
        ranks = None if rng.random() < 0.5 else tuple(rng.sample(all_ranks, rng.randint(1, w - 1)))
        out.append(
            Recipe(
                sources=src,
                ranks=ranks,
                merge=rng.choice((None, rng.randint(0, 99))),
                prefix=rng.choice((None,) + PREFIXES),
                cut=rng.choice((None, _rand_cut(rng))),
                wrap=rng.choice((None,) + WRAPS),
            )
        )
    seen, uniq = set(), []
    for r in out:
        if r.name not in seen:
            seen.add(r.name)
            uniq.append(r)
    return uniq


def views(run_dir, seed: int = 0, n_random: int = 12) -> Iterator[tuple[str, dict[str, bytes]]]:
    """(recipe name, files) for every non-empty view of one run."""
    for rec in recipes(run_dir, seed, n_random):
        files = render(run_dir, rec)
        if files:
            yield rec.name, files


def write_view(files: dict[str, bytes], dest) -> list[Path]:
    dest = Path(dest)
    paths = []
    for rel, data in files.items():
        p = dest / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
        paths.append(p)
    return paths


def diagnose_view(files: dict[str, bytes]):
    """Write the view to a temp dir and diagnose it as a user would (``dx.load(folder)``)."""
    import denpex_nb as dx

    with tempfile.TemporaryDirectory(prefix="keyhole-") as tmp:
        write_view(files, tmp)
        return dx.diagnose(dx.load(tmp, progress=False))


# --- what a view still shows ---------------------------------------------------------------------


def view_ranks(files: dict[str, bytes]) -> set[int]:
    """Ranks the view has evidence about: from file paths, line prefixes and ``rank N`` mentions.

    A rank counts when the view holds a file of it (``attempt_0/<R>/``, ``rank<R>.log``,
    ``..._rank_<R>``, ``..._rank<R>.jsonl``), a line with its ``[default<R>]:`` / ``[rank<R>]:``
    prefix, a ``"rank": R`` tracer record, or a message naming it (``Ranks 1, 3 failed to pass
    monitoredBarrier``): a culprit named from a peer's report is evidence, not invention.
    """
    ranks: set[int] = set()
    for path, data in files.items():
        kind, rank = _kind(path)
        if rank is not None:
            ranks.add(rank)
        if m := _RANKLOG.match(path):
            ranks.add(int(m.group(1)))
        if kind in ("fr", "manifest"):
            continue
        text = _strip_ansi(data.decode("utf-8", "replace"))
        ranks.update(int(x) for x in re.findall(r"\[(?:default|rank)(\d+)\]:", text))
        for grp in re.findall(r"\b[Rr]anks?[ _:=]*((?:\d+\s*,\s*)*\d+)\b", text):  # "Rank 1", "Ranks 1, 3"
            ranks.update(int(x) for x in re.findall(r"\d+", grp))
        ranks.update(int(x) for x in re.findall(r'"rank":\s*(\d+)', text))
        ranks.update(int(x) for x in re.findall(r"\[RANK (\d+)\]", text))
    return ranks


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _strip_ansi(text: str) -> str:
    return _ANSI.sub("", text)


#: Markers of a failure in a text log. Deliberately broad (conservative: when in doubt, the view
#: still shows a failure, and a ``no-failure`` verdict on it is a false all-clear).
FAILURE_MARKERS = re.compile(
    r"Traceback|Error|error|Exception|timed out|[Tt]imeout|exit ?code|exitcode|SIG(?:ABRT|SEGV|KILL|TERM|BUS)|"
    r"[Ff]ailed|[Ff]ailure|[Mm]ismatch|terminate called|what\(\):|enforce fail|reset by peer|closed by peer|"
    r"Abort|abort|[Ff]atal|[Kk]illed|monitoredBarrier|Expected to have finished reduction"
)
#: A marker match is benign when these appear within :data:`BENIGN_WINDOW` characters of it. They
#: are the only marker hits in runs that did NOT fail (checked on every view of every fixed
#: variant, see test_keyhole): the scenario name in the ``ready:`` line ("rank 0/2 pid 1 ready:
#: allgather-shape-mismatch (fixed) on gloo, device cpu") and the TCPStore shutdown notice
#: ``uv_loop_close failed with:-16 errn:EBUSY desc:resource busy or locked``. A context window
#: rather than an exact pattern, so that a cut or a wrap through the benign text leaves it benign.
BENIGN = re.compile(
    r"ready: |\((?:broken|fixed)\)|\((?:broke|fixe|brok|fix|bro|fi|br|f)?$|^(?:ixed|ed|d|roken|oken|ken|en|n)?\)|"
    r" on gloo| on nccl|device c|EBUSY|uv_loop|loop_clo|resource busy|errn:"
)
BENIGN_WINDOW = 40


def _text_evidence(text: str) -> str | None:
    """The first non-benign failure marker in a text (ANSI removed, hard wraps undone), or None."""
    joined = _strip_ansi(text).replace("\r", "").replace("\n", "")  # undo wraps (and glue lines)
    for m in FAILURE_MARKERS.finditer(joined):
        lo, hi = max(0, m.start() - BENIGN_WINDOW), m.end() + BENIGN_WINDOW
        if BENIGN.search(joined[lo : m.start()]) or BENIGN.search(joined[m.end() : hi]):
            continue
        return f"{m.group(0)!r} in {joined[max(0, m.start() - 60) : m.end() + 60]!r}"
    return None


#: a view's words for a connection its peer closed or reset (gloo, c10d, sockets): the other side went
#: away first
PEER_GONE = re.compile(r"(?:closed|reset) by (?:the )?(?:remote )?peer")
#: failure markers that state more than a process that went away: a timeout, a mismatch, a failed
#: check of the collectives. A view showing one of them shows a cause, not only a peer gone. A word
#: inside a file name is no statement (a traceback frame of ``scenarios/op_mismatch.py``)
CAUSE_MARKERS = re.compile(
    r"[Tt]imed out|[Tt]imeout|(?<![_/-])(?:[Mm]ismatch|[Dd]esync)(?![\w-]*\.py)|doesn't match|does not match"
    r"|\b\d+ vs \d+\b|data size|enforce fail|monitoredBarrier|Expected to have finished reduction"
)


def _text_has(text: str, pattern: re.Pattern) -> bool:
    """Does the text (ANSI removed, hard wraps undone) hold a non-benign match of ``pattern``?"""
    joined = _strip_ansi(text).replace("\r", "").replace("\n", "")
    for m in pattern.finditer(joined):
        lo, hi = max(0, m.start() - BENIGN_WINDOW), m.end() + BENIGN_WINDOW
        if not (BENIGN.search(joined[lo : m.start()]) or BENIGN.search(joined[m.end() : hi])):
            return True
    return False


def _trace_disagreement(traces: dict[str, bytes]) -> str | None:
    """Tracer files of two ranks that disagree: on a collective's op, shapes or dtypes at one (pg, seq),
    or on the last collective each issued (one rank stopped elsewhere). None when they agree."""
    seen: dict[tuple, tuple] = {}
    last: dict[str, dict] = {}
    for path, data in sorted(traces.items()):
        for ln in data.decode("utf-8", "replace").splitlines():
            try:
                rec = json.loads(ln)
            except ValueError:
                continue
            if not isinstance(rec, dict) or rec.get("event") != "issue":
                continue
            key = (rec.get("pg"), rec.get("seq"))
            sig = (rec.get("op"), repr(rec.get("in_shapes")), repr(rec.get("dtypes")))
            if key in seen and seen[key][0] != sig and seen[key][1] != path:
                return f"{path}: seq {key[1]} {sig} vs {seen[key][0]}"
            seen.setdefault(key, (sig, path))
            last.setdefault(path, {})[rec.get("pg")] = rec.get("seq")
    by_pg: dict = {}
    for ends in last.values():
        for pg, seq in ends.items():
            by_pg.setdefault(pg, set()).add(seq)
    moved = sorted(str(pg) for pg, seqs in by_pg.items() if len(seqs) > 1)
    return f"tracer files end at different places in pg {moved[0]}" if moved else None


def shows_only_a_peer_gone(files: dict[str, bytes]) -> bool:
    """Does the view show that a peer went away (a connection it closed or reset) and nothing that says
    why: no text stating a cause (:data:`CAUSE_MARKERS`), no two Flight Recorder dumps or tracer files
    disagreeing on a collective or on where their ranks stopped? Then ``rank-crash`` is what the view
    establishes: the peer went away first, for a reason in its own log, which the view does not hold."""
    gone = False
    traces: dict[str, bytes] = {}
    fr: dict[str, bytes] = {}
    for path, data in files.items():
        kind, _ = _kind(path)
        if kind == "manifest":
            continue
        if kind == "fr":
            fr[path] = data
            continue
        text = data.decode("utf-8", "replace")
        if kind == "trace":
            traces[path] = data
        if _text_has(text, CAUSE_MARKERS):
            return False
        gone = gone or _text_has(text, PEER_GONE)
    return gone and _trace_disagreement(traces) is None and not _fr_disagreement(fr)


def failure_evidence(files: dict[str, bytes]) -> list[str]:
    """What in the view still shows that the run failed ([] = nothing; see :data:`FAILURE_MARKERS`).

    * text logs: any :data:`FAILURE_MARKERS` match outside :data:`BENIGN` text;
    * tracer JSONL: an ``"event":"error"`` record, or a file whose last record is an ``issue``
      (a collective issued and never finished: the rank died or hung in it);
    * manifest: a non-zero exit code or a signal;
    * Flight Recorder dumps: two dumps disagreeing on the op, input sizes or dtypes of the same
      (process group, collective_seq_id). gloo's dumps carry no useful state (every entry reads
      ``scheduled``), so a lone dump, or dumps that only differ in length, count as no evidence.
    """
    found: list[str] = []
    fr: dict[str, bytes] = {}
    for path, data in files.items():
        kind, _ = _kind(path)
        if kind == "fr":
            fr[path] = data
            continue
        if kind == "manifest":
            m = json.loads(data)
            if any(c not in (0, None) for c in m.get("exit_codes") or []) or any(m.get("signals") or []):
                found.append(f"{path}: non-zero exit")
            continue
        if kind == "trace":
            recs = [ln for ln in data.decode("utf-8", "replace").splitlines() if ln.strip()]
            if any('"event":"error"' in ln for ln in recs):
                found.append(f"{path}: error record")
            elif recs and '"event":"issue"' in recs[-1]:
                found.append(f"{path}: last collective never finished")
            continue
        hit = _text_evidence(data.decode("utf-8", "replace"))
        if hit:
            found.append(f"{path}: {hit}")
    return found + _fr_disagreement(fr)


def _fr_disagreement(fr: dict[str, bytes]) -> list[str]:
    """Flight Recorder dumps that disagree on the op, input sizes or dtypes of one (process group,
    collective_seq_id): one line per dump that does ([] for fewer than two dumps)."""
    found: list[str] = []
    if len(fr) > 1:
        seen: dict[tuple, tuple] = {}  # (pg_id, p2p, seq) -> (signature, first dump)
        for path, data in sorted(fr.items()):
            try:
                dump = pickle.loads(data)  # our own recorded dumps: trusted input
            except Exception:
                continue
            mine = {}
            for e in dump.get("entries") or []:
                key = (e.get("pg_id"), bool(e.get("is_p2p")), e.get("collective_seq_id"))
                mine.setdefault(key, (e.get("profiling_name"), repr(e.get("input_sizes")), repr(e.get("input_dtypes"))))
            for key, sig in mine.items():
                if key in seen and seen[key][0] != sig:
                    found.append(f"{path}: seq {key[2]} {sig} vs {seen[key][0]} in {seen[key][1]}")
                    break
                seen.setdefault(key, (sig, path))
    return found


# --- the acceptance rule -------------------------------------------------------------------------

ABSTENTIONS = ("timeout-undetermined", "no-evidence")


#: Verdicts less specific than the planted class that the evidence can honestly support, as the
#: catalog declares them (``CatalogEntry.broader``): on gloo a dtype mismatch shows in plain logs
#: only as a byte-count mismatch ('16 vs 8'); a crash seen only in FR dumps or tracer files is a
#: rank that stopped issuing collectives (rank-desync); SyncBatchNorm's hang is one rank in
#: all_gather while the others are elsewhere (op-mismatch or rank-desync).
def _less_specific() -> dict:
    from denpex_nb.analysis import catalog

    return {e.id: tuple(e.broader) for e in catalog.all() if e.broader}


LESS_SPECIFIC = _less_specific()
#: Outcomes that are failures of the diagnosis.
FAILURES = ("different-class", "false-all-clear", "invented-culprit")


@dataclass(frozen=True)
class Judgement:
    """The outcome of :func:`judge` for one view."""

    outcome: str  # exact | abstain | less-specific | peer-gone | honest-all-clear | different-class | false-all-clear
    invented: tuple[int, ...] = ()  # culprits the view may not name
    evidence: tuple[str, ...] = ()  # what still shows a failure (broken runs)

    @property
    def ok(self) -> bool:
        return self.outcome not in FAILURES and not self.invented

    @property
    def failure(self) -> str | None:
        """The failure kind (``different-class`` > ``false-all-clear`` > ``invented-culprit``), or None."""
        if self.outcome in FAILURES:
            return self.outcome
        return "invented-culprit" if self.invented else None

    def __str__(self) -> str:
        s = self.outcome + (f", invented culprits {list(self.invented)}" if self.invented else "")
        return s + (f"; evidence: {self.evidence[0]}" if self.evidence else "")


def judge(diagnosis, manifest: dict, files: dict[str, bytes]) -> Judgement:
    """THE acceptance rule for one view (used by the tests and the benchmark alike).

    With ``expected = manifest["expected"]``, planted class ``C`` and planted culprits ``P``:

    * fixed variant (``C == "no-failure"``): the verdict must be ``no-failure`` (``exact``) or
      ``no-evidence`` (``abstain``); anything else is ``different-class`` (a false alarm);
    * broken variant: ``C`` is ``exact``; ``timeout-undetermined`` / ``no-evidence`` are
      ``abstain`` (honest, less specific); ``rank-crash`` is accepted only when the scenario IS
      rank-crash (then it equals ``C``); :data:`LESS_SPECIFIC` verdicts are ``less-specific``
      (accepted); ``rank-crash`` below ``high`` confidence is ``peer-gone`` (accepted) when the view
      shows a peer that closed or reset a connection and nothing that says why
      (:func:`shows_only_a_peer_gone`): in every recorded run where a survivor reads "closed by
      peer" that peer did go away first (it aborted on the mismatch it detected, timed out and
      exited, or returned early past the collective), so a crash of the peer is what such a view
      establishes, and the planted cause is in lines the view does not hold; ``no-failure`` is
      ``false-all-clear`` when :func:`failure_evidence` still finds
      a failure in the view, else ``honest-all-clear`` (every trace of the failure was cut away);
      any other verdict is ``different-class``;
    * culprits: every rank in ``d.culprit_ranks`` must be in ``P`` AND in :func:`view_ranks` (the
      view holds that rank's files or a message naming it); anything else is an invented culprit.
      ``[]`` (undetermined) is always fine.

    A view passes (``Judgement.ok``) when the outcome is not one of :data:`FAILURES` and no culprit
    is invented.
    """
    exp = manifest["expected"]
    planted = exp["class"]
    culprits = {int(r) for r in (diagnosis.culprit_ranks or [])}
    allowed = set(int(r) for r in exp.get("culprit_ranks") or []) & view_ranks(files)
    invented = tuple(sorted(culprits - allowed))
    verdict = diagnosis.verdict
    evidence: tuple[str, ...] = ()
    if planted == "no-failure":
        outcome = {"no-failure": "exact", "no-evidence": "abstain"}.get(verdict, "different-class")
    elif verdict == planted or (verdict == "rank-crash" and manifest.get("scenario") == "rank-crash"):
        outcome = "exact"
    elif verdict in ABSTENTIONS:
        outcome = "abstain"
    elif verdict in LESS_SPECIFIC.get(planted, ()):
        outcome = "less-specific"
    elif verdict == "rank-crash" and diagnosis.confidence != "high" and shows_only_a_peer_gone(files):
        outcome = "peer-gone"
    elif verdict == "no-failure":
        evidence = tuple(failure_evidence(files))
        outcome = "false-all-clear" if evidence else "honest-all-clear"
    else:
        outcome = "different-class"
    return Judgement(outcome, invented, evidence)


def check_view(run_dir, recipe: Recipe | str):
    """Render, diagnose and judge one view: (files, diagnosis, judgement); None files if empty."""
    rec = Recipe.parse(recipe) if isinstance(recipe, str) else recipe
    files = render(run_dir, rec)
    if not files:
        return files, None, None
    d = diagnose_view(files)
    return files, d, judge(d, load_manifest(run_dir), files)


def reproducer(run_dir, recipe: Recipe | str) -> str:
    """A one-line shell command (run from the repo root) that writes the view to a temp folder,
    diagnoses it with ``dx.load(folder)`` and prints the folder, the summary and the judgement."""
    name = recipe if isinstance(recipe, str) else recipe.name
    return (
        'python -c "from tests.keyhole import *; import denpex_nb as dx, tempfile; '
        f"run='data/recorded/{run_id(run_dir)}'; f=render(run, Recipe.parse('{name}')); "
        "p=tempfile.mkdtemp(prefix='view-'); write_view(f, p); d=dx.diagnose(dx.load(p, progress=False)); "
        'print(p); print(d.summary()); print(judge(d, load_manifest(run), f))"'
    )


__all__ = [
    "Recipe",
    "SOURCE_SETS",
    "PREFIXES",
    "WRAPS",
    "render",
    "recipes",
    "views",
    "write_view",
    "diagnose_view",
    "view_ranks",
    "failure_evidence",
    "shows_only_a_peer_gone",
    "judge",
    "Judgement",
    "check_view",
    "reproducer",
    "recorded_runs",
    "load_manifest",
    "run_id",
    "world_size",
    "cut_spec",
]
