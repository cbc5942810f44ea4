"""Differential fuzz of the Flight Recorder pickle readers: compiled decoder vs restricted unpickler.

    python benchmarks/bench_fuzz_pickles.py                          # 100 000 cases, 2 workers
    python benchmarks/bench_fuzz_pickles.py --cases 300 --seed 7 --workers 1 --no-write   # the test's subset

Every case is a byte string built from a seed and its index (so any case can be rebuilt): random
bytes, byte flips / truncations / splices / insertions of recorded dumps (data/recorded/gloo/*/*/fr)
and synthetic dumps (testing.frcompare.write_synthetic_dumps), length-field and memo-index
inflation, deep nesting, shared-reference bombs, random plain-data objects and random FR dumps
pickled with protocols 0-5 (FR dumps 2-5, with shared entries and shapes), and random opcode
programs (stack, mark and memo opcodes of every protocol, a harmless global now and then).

Per case, in a worker process:

* the compiled path (``fr_columns.fast_dump_columns``): frame, declined, or refused (DumpRefused);
* the restricted unpickler path (``parse_dump_bytes`` + ``dump_to_columns``): frame or refused;
* they must agree: a compiled frame equals the unpickler's frame (events and progress); a compiled
  refusal is an unpickler refusal too; a decline may go either way;
* the bounds scanner compiled and in plain Python give the same status (cases <= 64 KB);
* where the package's C kernels are built and numba is installed, both builds of the decoder give
  the same status, node table and entries arrays (``testing.frkernels``, cases <= 64 KB);
* ``denpex_nb.load(file, format="fr_pickle")``: a DenpexError (nothing loaded: the load_error
  itself) is fine, any other exception escaped; a MemoryError anywhere fails the bar;
* time per case (all of the above) and the worker's peak RSS (``resource.getrusage``) after it.

Workers are subprocesses running chunks of cases; before each case a worker writes its index to a
progress file, so a worker that dies (a segfault: the bug class of issue #10) or hangs is counted
as a crash, its case is saved under ``benchmarks/results/fuzz_crashes/``, and the chunk resumes
after it. Workers run with their address space capped (RLIMIT_AS 3 GB) so a runaway allocation
fails as a MemoryError rather than taking the machine. Never is a fuzzed case given to
``pickle.loads``: only to the restricted unpickler, which refuses every global.

Prints a table per case kind and totals; writes benchmarks/results/bench_fuzz_pickles.json.
Bars: crashes 0, escaped exceptions 0, disagreements 0, slowest case < 5 s, peak RSS < 1.5 GB.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import pickle
import platform
import random
import struct
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

import _fuzz_harness as harness  # noqa: E402

KINDS = (
    "random_bytes",
    "flip",
    "truncate",
    "splice",
    "insert_delete",
    "length_inflate",
    "memo_inflate",
    "deep",
    "bomb",
    "plain_object",
    "fr_random",
    "synthetic",
    "opcode_program",
)
WEIGHTS = (4, 14, 8, 6, 6, 8, 8, 6, 6, 8, 12, 4, 10)
BARS = {"crashes": 0, "escaped": 0, "disagreements": 0, "slowest_case_s": 5.0, "peak_rss_mb": 1536}
RLIMIT_AS = 3 << 30


# --- corpus ----------------------------------------------------------------------------------------


def build_corpus(folder: Path) -> None:
    """Recorded dumps + a few synthetic ones, as files in ``folder`` (done once by the parent)."""
    from denpex_nb.testing.frcompare import PLANTS, write_synthetic_dumps

    folder.mkdir(parents=True, exist_ok=True)
    for i, path in enumerate(sorted(glob.glob(str(ROOT / "data" / "recorded" / "gloo" / "*" / "*" / "fr" / "*")))):
        (folder / f"rec_{i:04d}").write_bytes(Path(path).read_bytes())
    for plant in PLANTS:
        with tempfile.TemporaryDirectory() as tmp:
            planted = write_synthetic_dumps(tmp, 2, 30, plant, plant_rank=1, gloo_pg_config=plant == "op")
            for f in planted.files:
                (folder / f"syn_{plant}_{Path(f).name}").write_bytes(Path(f).read_bytes())


def load_corpus(folder: Path) -> tuple[list[bytes], list[bytes]]:
    files = sorted(folder.iterdir())
    return (
        [f.read_bytes() for f in files if f.name.startswith("rec_")],
        [f.read_bytes() for f in files if f.name.startswith("syn_")],
    )


# --- case generators -------------------------------------------------------------------------------


def _s(text: str) -> bytes:
    b = text.encode()
    return b"X" + struct.pack("<I", len(b)) + b


def _opcode_positions(data: bytes):
    """(opcode name, position) of each opcode pickletools can read before it stops."""
    import pickletools

    out = []
    try:
        for op, _arg, pos in pickletools.genops(data):
            out.append((op.name, pos))
    except Exception:
        pass
    return out


_LEN_OPS = {
    "BINUNICODE": 4,
    "SHORT_BINUNICODE": 1,
    "BINUNICODE8": 8,
    "LONG1": 1,
    "LONG4": 4,
    "BINSTRING": 4,
    "SHORT_BINSTRING": 1,
    "BINBYTES": 4,
    "SHORT_BINBYTES": 1,
    "BINBYTES8": 8,
    "BYTEARRAY8": 8,
    "FRAME": 8,
}
_MEMO_OPS = {"BINPUT": 1, "LONG_BINPUT": 4, "BINGET": 1, "LONG_BINGET": 4}


def _random_value(rng: random.Random, depth: int = 0):
    r = rng.random()
    if depth > 4 or r < 0.45:
        return rng.choice(
            [
                None,
                True,
                False,
                rng.randint(-300, 300),
                rng.randint(-(2**70), 2**70),
                rng.random(),
                "".join(rng.choice("ab:->0123 \u00e9\U0001f600") for _ in range(rng.randint(0, 12))),
                bytes(rng.randint(0, 255) for _ in range(rng.randint(0, 6))),
                2**31,
                -(2**31) - 1,
            ]
        )
    n = rng.randint(0, 5)
    kind = rng.randrange(6)
    items = [_random_value(rng, depth + 1) for _ in range(n)]
    if kind == 0:
        return items
    if kind == 1:
        return tuple(items)
    if kind == 2:
        out = {}
        for v in items:
            out[rng.choice(["a", "b", "ranks", "entries", 1, 2, (1, "x"), None])] = v
        return out
    hashable = [v for v in items if isinstance(v, (int, str, bytes, type(None), float))]
    if kind == 3:
        return set(hashable)
    if kind == 4:
        return frozenset(hashable)
    shared = items or [1]
    return [shared, shared, (shared,)]


_FIELD_VALUES = {
    "record_id": lambda r: r.choice([0, 1, r.randint(0, 10**6), None, 2**62, -1]),
    "pg_id": lambda r: r.choice([0, 1, None, 7]),
    "collective_seq_id": lambda r: r.choice([r.randint(0, 2000), None, 1.5 if r.random() < 0.05 else 3]),
    "p2p_seq_id": lambda r: r.choice([0, r.randint(0, 50), None]),
    "time_created_ns": lambda r: r.choice([0, 1764454060123456789, None, r.randint(0, 2**63 - 1)]),
    "timeout_ms": lambda r: r.choice([600000, None, 0]),
    "retired": lambda r: r.choice([True, False, None]),
    "is_p2p": lambda r: r.choice([True, False, None]),
    "profiling_name": lambda r: r.choice(
        [
            "nccl:all_reduce",
            "nccl:send 0->1",
            "gloo:recv 2->0",
            "nccl:broadcast",
            "nccl:_ALLGATHER_BASE",
            None,
            "",
            "weird",
            5 if r.random() < 0.05 else "x",
        ]
    ),
    "state": lambda r: r.choice(["scheduled", "started", "completed", None, "odd"]),
    "process_group": lambda r: r.choice(
        [("0", "default_pg"), ("1", None), ["2", ""], None, (), ("0",), (1, "x") if r.random() < 0.1 else ("3", "sub")]
    ),
    "input_dtypes": lambda r: r.choice([["Float"], ["BFloat16", "Float"], [], None, ["torch.int64"]]),
    "input_sizes": lambda r: r.choice(
        [
            [[4, 2]],
            [[r.randint(0, 9) for _ in range(r.randint(0, 3))]],
            [],
            None,
            [[2**40, 2]],
            [[1, "x"]] if r.random() < 0.05 else [[3]],
        ]
    ),
    "output_sizes": lambda r: r.choice([[[4, 2]], [[8, 2]], [], None, [[0]]]),
}


def _fr_random(rng: random.Random) -> bytes:
    """A random FR dump: random fields, entries and shapes shared (pickle memo) now and then."""
    shared_sizes = [[rng.randint(1, 9), rng.randint(1, 9)]]
    entries = []
    for _ in range(rng.randint(0, 12)):
        e = {k: f(rng) for k, f in _FIELD_VALUES.items() if rng.random() < 0.9}
        if rng.random() < 0.3:
            e["input_sizes"] = e["output_sizes"] = shared_sizes
        if rng.random() < 0.1:
            e["frames"] = [{"name": "f", "filename": "x.py", "line": 1}]
        entries.append(e)
    if entries and rng.random() < 0.2:
        entries = entries + [entries[0]] * rng.randint(1, 20)  # one entry object, many times
    if rng.random() < 0.05:
        entries.append("not a dict")
    dump = {"version": "2.10", "entries": entries}
    if rng.random() < 0.8:
        dump["pg_config"] = rng.choice(
            [
                {"0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1, 2]"}},
                {"": {"name": "", "desc": "", "ranks": "[0, 1]"}},
                {"0": {"ranks": [0, 1, 2, 3]}},
                {},
                None,
            ]
        )
    if rng.random() < 0.7:
        dump["pg_status"] = rng.choice(
            [
                {"0": {"last_enqueued_collective": 3, "last_started_collective": 2, "last_completed_collective": 2}},
                {"0": "x"},
                {},
            ]
        )
    return pickle.dumps(dump, protocol=rng.choice([2, 3, 4, 5]))


def _deep(rng: random.Random) -> bytes:
    depth = rng.choice([rng.randint(1, 80), rng.randint(60, 70), 10**4, 10**5, 10**6])
    style = rng.randrange(3)
    if style == 0:  # tuples: ) then TUPLE1 * depth
        value = b")" + b"\x85" * depth
    elif style == 1:  # lists: ]( ... nested through APPEND
        value = b"]" * depth + b"a" * (depth - 1)
    else:  # dicts: }K\x01 ... SETITEM
        value = b"}K\x01" * depth + b"N" + b"s" * depth
    key = rng.choice(["profiling_name", "process_group", "input_sizes", "pg_config", "state"])
    if key == "pg_config":
        return b"\x80\x02}(" + _s("version") + _s("2.10") + _s("pg_config") + value + b"u."
    return b"\x80\x02}" + _s("entries") + b"]}" + _s(key) + value + b"sas."


def _bomb(rng: random.Random) -> bytes:
    levels, fan = rng.randint(1, 12), rng.randint(2, 16)
    leaf = rng.choice([b"N", b"K\x01", _s("nccl:all_reduce"), b"](K\x04K\x02e"])
    out = b"](" + leaf * fan + b"er\x00\x00\x00\x00"
    for i in range(1, levels):
        out += b"](" + (b"j" + struct.pack("<I", i - 1)) * fan + b"e" + b"r" + struct.pack("<I", i)
    where = rng.randrange(3)
    if where == 0:  # pg_config: a list holding the last level
        return b"\x80\x02}(" + _s("version") + _s("2.10") + _s("pg_config") + b"(" + out + b"l" + _s("entries") + b"]u."
    if where == 1:  # input_sizes of one entry
        return b"\x80\x02}(" + _s("version") + _s("2.10") + _s("entries") + b"](}(" + _s("input_sizes") + out + b"ueu."
    # entries: the same entry (with shared shapes) many times
    n = rng.choice([10, 1000, 20000, 80000])
    return (
        b"\x80\x02}("
        + _s("version")
        + _s("2.10")
        + _s("entries")
        + b"](}("
        + _s("profiling_name")
        + _s("nccl:all_reduce")
        + _s("input_sizes")
        + b"](](K\x01K\x02eq\x00"
        + b"h\x00" * (n - 1)
        + b"eu"
        + b"q\x01"
        + b"h\x01" * (n - 1)
        + b"eu."
    )


_PROGRAM_OPS = [
    b"N",
    b"\x88",
    b"\x89",
    b"K\x05",
    b"M\x01\x02",
    b"J\xff\xff\xff\xff",
    b"G" + b"\x00" * 8,
    b"\x8a\x01\x07",
    b"\x8a\x09" + b"\x01" * 9,
    b"\x8b\x02\x00\x00\x00\x01\x02",
    b"U\x01a",
    b"T\x01\x00\x00\x00b",
    b"C\x02ab",
    b"B\x01\x00\x00\x00c",
    b"\x8c\x01k",
    b"X\x01\x00\x00\x00v",
    b"I12\n",
    b"I01\n",
    b"L5L\n",
    b"F1.5\n",
    b"S'x'\n",
    b"Vu\n",
    b"]",
    b"}",
    b")",
    b"\x8f",
    b"(",
    b"a",
    b"e",
    b"s",
    b"u",
    b"t",
    b"\x85",
    b"\x86",
    b"\x87",
    b"l",
    b"d",
    b"\x90",
    b"\x91",
    b"0",
    b"1",
    b"2",
    b"\x94",
    b"\x98",
]


def _opcode_program(rng: random.Random) -> bytes:
    out = [b"\x80", bytes([rng.choice([2, 3, 4, 5])])]
    memo = 0
    for _ in range(rng.randint(1, 60)):
        r = rng.random()
        if r < 0.12:
            idx = rng.choice([memo, max(0, memo - 1), rng.randint(0, memo + 2)])
            out.append(rng.choice([b"q" + bytes([idx % 256]), b"r" + struct.pack("<I", idx), b"p%d\n" % idx]))
            memo = max(memo, idx + 1)
        elif r < 0.24 and memo:
            idx = rng.randint(0, memo)
            out.append(rng.choice([b"h" + bytes([idx % 256]), b"j" + struct.pack("<I", idx), b"g%d\n" % idx]))
        elif r < 0.26:
            out.append(rng.choice([b"cbuiltins\nlen\n", b"\x8c\x08builtins\x8c\x03len\x93", b"R", b"b", b"\x81"]))
        else:
            out.append(rng.choice(_PROGRAM_OPS))
    out.append(b".")
    return b"".join(out)


def make_case(seed: int, index: int, corpus: tuple[list[bytes], list[bytes]]) -> tuple[str, bytes]:
    rng = random.Random(seed * 1_000_003 + index)
    kind = rng.choices(KINDS, weights=WEIGHTS)[0]
    recorded, synthetic = corpus
    pool = recorded + synthetic

    def base() -> bytes:
        r = rng.random()
        if r < 0.55:
            return rng.choice(recorded)
        if r < 0.75:
            return rng.choice(synthetic)
        return _fr_random(rng)

    if kind == "random_bytes":
        return kind, b"\x80" + bytes([rng.choice([2, 3, 4, 5])]) + rng.randbytes(rng.randint(0, 300))
    if kind == "flip":
        b = bytearray(base())
        for _ in range(rng.randint(1, 8)):
            i = rng.randrange(len(b))
            b[i] = rng.randrange(256) if rng.random() < 0.5 else b[i] ^ (1 << rng.randrange(8))
        return kind, bytes(b)
    if kind == "truncate":
        b = base()
        return kind, b[: rng.randrange(len(b) + 1)]
    if kind == "splice":
        a, b = rng.choice(pool), base()
        return kind, a[: rng.randrange(len(a) + 1)] + b[rng.randrange(len(b) + 1) :]
    if kind == "insert_delete":
        b = bytearray(base())
        for _ in range(rng.randint(1, 4)):
            i = rng.randrange(len(b) + 1)
            if rng.random() < 0.5:
                b[i:i] = rng.randbytes(rng.randint(1, 8))
            else:
                del b[i : i + rng.randint(1, 8)]
        return kind, bytes(b)
    if kind == "length_inflate":
        b = bytearray(base())
        spots = [(name, pos) for name, pos in _opcode_positions(bytes(b)) if name in _LEN_OPS]
        if spots:
            for name, pos in rng.sample(spots, min(len(spots), rng.randint(1, 3))):  # same-size edits
                w = _LEN_OPS[name]
                limit = (1 << (8 * w)) - 1
                left = len(b) - pos - 1 - w
                value = rng.choice(
                    [
                        left + 1,
                        left,
                        left - 1,
                        limit,
                        limit >> 1,
                        (limit >> 1) + 1,
                        rng.randint(0, limit),
                        0x7FFFFFFFFFFFFFF7 & limit,
                        2**28,
                    ]
                )
                b[pos + 1 : pos + 1 + w] = (max(0, value) & limit).to_bytes(w, "little")
        return kind, bytes(b)
    if kind == "memo_inflate":
        b = bytearray(base())
        spots = [(name, pos) for name, pos in _opcode_positions(bytes(b)) if name in _MEMO_OPS]
        if spots:
            picked = rng.sample(spots, min(len(spots), rng.randint(1, 3)))
            for name, pos in sorted(picked, key=lambda x: -x[1]):  # from the end: widening shifts what follows
                w = _MEMO_OPS[name]
                value = rng.choice([2**28, 2**32 - 1, 2**31, rng.randint(0, 300), rng.randint(0, 2**32 - 1), 0, 255])
                if w == 1 and value > 255:  # widen BINPUT/BINGET to their 4-byte forms
                    b[pos : pos + 2] = bytes([b[pos] + 1]) + struct.pack("<I", value)
                else:
                    b[pos + 1 : pos + 1 + w] = (value & ((1 << (8 * w)) - 1)).to_bytes(w, "little")
        return kind, bytes(b)
    if kind == "deep":
        return kind, _deep(rng)
    if kind == "bomb":
        return kind, _bomb(rng)
    if kind == "plain_object":
        value = _random_value(rng)
        if rng.random() < 0.5:
            value = {"version": "2.10", "pg_config": value, "entries": rng.choice([[], [value], None])}
        return kind, pickle.dumps(value, protocol=rng.choice([0, 1, 2, 3, 4, 5]))
    if kind == "fr_random":
        return kind, _fr_random(rng)
    if kind == "synthetic":
        b = bytearray(rng.choice(synthetic))
        if rng.random() < 0.5:
            i = rng.randrange(len(b))
            b[i] = rng.randrange(256)
        return kind, bytes(b)
    return kind, _opcode_program(rng)


# --- one case --------------------------------------------------------------------------------------


def _frames_equal(fast, slow) -> str | None:
    import pandas as pd

    from denpex_nb.ingest.assemble import build_frame

    try:
        a = build_frame("events", [fast[0]])
    except Exception as e:
        a = f"build_frame failed: {type(e).__name__}"
    try:
        b = build_frame("events", [slow[0]])
    except Exception as e:
        b = f"build_frame failed: {type(e).__name__}"
    if isinstance(a, str) or isinstance(b, str):
        return (
            None
            if a == b
            else f"events: compiled {a if isinstance(a, str) else 'ok'}, unpickler {b if isinstance(b, str) else 'ok'}"
        )
    try:
        pd.testing.assert_frame_equal(a, b)
    except AssertionError as e:
        return "events differ: " + str(e).splitlines()[0][:200]
    if fast[1] != slow[1]:
        return "progress rows differ"
    return None


try:  # the decoder's C kernels (built with the package) against its numba kernels, when both exist
    from denpex_nb.testing.frkernels import both_available, kernels_disagree

    _KERNELS_BOTH = both_available()
except ImportError:  # pragma: no cover
    _KERNELS_BOTH = False


def run_case(data: bytes, folder: str) -> dict:
    """Both paths, the scanners, and denpex_nb.load over one case: a dict of what happened."""
    import denpex_nb as dx
    from denpex_nb.errors import DenpexError
    from denpex_nb.ingest import flight_recorder as fr
    from denpex_nb.ingest import fr_columns

    out: dict = {"compiled": None, "unpickler": None, "problem": None, "escaped": None, "memory_error": False}
    fast = slow = None
    try:
        fast = fr_columns.fast_dump_columns(data, rank=1, file="f", source="fr_pickle")
        out["compiled"] = "declined" if fast is None else "frame"
    except fr.DumpRefused:
        out["compiled"] = "refused"
    except MemoryError:
        out["compiled"], out["memory_error"] = "declined", True
    except Exception as e:  # the loader turns this into a decline of this dump
        out["compiled"] = f"declined ({type(e).__name__})"
    try:
        dump, kind = fr.parse_dump_bytes(data)
        slow = fr.dump_to_columns(dump, rank=1, file="f", source=kind)
        out["unpickler"] = "frame"
    except MemoryError:
        out["unpickler"], out["memory_error"] = "refused", True
    except fr.UnsafePickleError:
        out["unpickler"] = "refused (unsafe)"
    except Exception:
        out["unpickler"] = "refused"
    if out["compiled"] == "frame":
        if out["unpickler"] != "frame":
            out["problem"] = "compiled frame, unpickler refused"
        else:
            out["problem"] = _frames_equal(fast, slow)
    elif out["compiled"] == "refused" and not out["unpickler"].startswith("refused"):
        out["problem"] = "compiled refused, unpickler gave a frame"
    if out["problem"] is None and len(data) <= 65536 and _KERNELS_BOTH:
        out["problem"] = kernels_disagree(data)  # the C build against the numba build
    if out["problem"] is None and len(data) <= 65536:
        a, b = fr.scan_pickle(data, compiled=True), fr.scan_pickle(data, compiled=False)
        if a[0] != b[0]:
            out["problem"] = f"scanners differ: compiled {a}, python {b}"
    path = os.path.join(folder, "comm_lib_trace_rank_1")
    with open(path, "wb") as f:
        f.write(data)
    try:
        inc = dx.load(path, format="fr_pickle", progress=False, jobs=1)
        msgs = inc.errors["message"].astype(str) if len(inc.errors) else []
        if any("MemoryError" in m for m in msgs):
            out["memory_error"] = True
    except DenpexError as e:
        if "MemoryError" in str(e):
            out["memory_error"] = True
    except Exception as e:
        out["escaped"] = f"{type(e).__name__}: {str(e)[:200]}"
    return out


def worker(seed: int, start: int, count: int, corpus_dir: str, progress_file: str) -> None:
    """Run cases [start, start + count) and print one JSON line of results."""
    import shutil
    import warnings

    warnings.simplefilter("ignore")
    corpus = load_corpus(Path(corpus_dir))
    from denpex_nb.ingest.fr_columns import warm

    warm()
    folder = tempfile.mkdtemp(prefix="fuzz_", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)

    def run_one(i: int) -> dict:
        kind, data = make_case(seed, i, corpus)
        if os.environ.get("FUZZ_SELFTEST_SEGFAULT_AT") == str(i):  # the harness's own check
            import signal

            os.kill(os.getpid(), signal.SIGSEGV)
        return dict(run_case(data, folder), kind=kind, bytes=len(data))

    try:
        harness.run_cases(start, count, progress_file, run_one, RLIMIT_AS)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


# --- the parent ------------------------------------------------------------------------------------


def campaign(cases: int, seed: int, workers: int, chunk: int, timeout: float) -> dict:
    """Every case in crash-proof workers; a case that kills or hangs its worker is saved to
    ``results/fuzz_crashes/`` and counted as a crash."""
    crash_dir = str(HERE / "results" / "fuzz_crashes")
    with tempfile.TemporaryDirectory() as tmp:
        corpus_dir = os.path.join(tmp, "corpus")
        build_corpus(Path(corpus_dir))

        def worker_args(start: int, count: int, progress: str) -> list[str]:
            return [
                sys.executable,
                str(Path(__file__).resolve()),
                "--worker",
                str(seed),
                str(start),
                str(count),
                corpus_dir,
                progress,
            ]

        def on_crash(i: int, rc, stderr: str) -> dict:
            kind, data = make_case(seed, i, load_corpus(Path(corpus_dir)))
            os.makedirs(crash_dir, exist_ok=True)
            saved = os.path.join(crash_dir, f"seed{seed}_case{i}_{kind}.pkl")
            Path(saved).write_bytes(data)
            return {"i": i, "kind": kind, "rc": rc, "saved": os.path.relpath(saved, ROOT), "stderr": stderr[-500:]}

        def one_chunk(start: int, count: int):
            return harness.run_chunk(worker_args, on_crash, start, count, timeout)

        results, crashes, wall = harness.drive(one_chunk, cases, chunk, workers)
    return summarize(results, crashes, wall, seed, workers)


def summarize(results: list[dict], crashes: list[dict], wall: float, seed: int, workers: int) -> dict:
    rows = {}
    for k in KINDS:
        rs = [r for r in results if r["kind"] == k]
        rows[k] = {
            "cases": len(rs) + sum(1 for c in crashes if c["kind"] == k),
            "both_frame": sum(r["compiled"] == "frame" for r in rs),
            "compiled_declined": sum(r["compiled"].startswith("declined") for r in rs),
            "compiled_refused": sum(r["compiled"] == "refused" for r in rs),
            "unpickler_refused": sum(r["unpickler"].startswith("refused") for r in rs),
            "crashes": sum(1 for c in crashes if c["kind"] == k),
            "escaped": sum(r["escaped"] is not None for r in rs),
            "disagreements": sum(r["problem"] is not None for r in rs),
            "memory_errors": sum(r["memory_error"] for r in rs),
            "slowest_s": max((r["s"] for r in rs), default=0.0),
            "total_s": round(sum(r["s"] for r in rs), 1),
        }
    slowest = sorted(results, key=lambda r: -r["s"])[:5]
    total = {
        "cases": len(results) + len(crashes),
        "crashes": len(crashes),
        "escaped_exceptions": sum(r["escaped"] is not None for r in results),
        "disagreements": sum(r["problem"] is not None for r in results),
        "memory_errors": sum(r["memory_error"] for r in results),
        "compiled_declined_with_exception": sum("(" in r["compiled"] for r in results),
        "slowest_case_s": max((r["s"] for r in results), default=0.0),
        "peak_rss_mb": max((r["rss_mb"] for r in results), default=0.0),
        "wall_s": round(wall, 1),
    }
    examples = {
        "disagreements": [
            {k: r[k] for k in ("i", "kind", "bytes", "compiled", "unpickler", "problem")}
            for r in results
            if r["problem"] is not None
        ][:20],
        "escaped": [{k: r[k] for k in ("i", "kind", "bytes", "escaped")} for r in results if r["escaped"]][:20],
        "declined_with_exception": sorted({r["compiled"] for r in results if "(" in r["compiled"]}),
        "slowest": [{k: r[k] for k in ("i", "kind", "bytes", "s", "compiled", "unpickler")} for r in slowest],
        "biggest_rss": [
            {k: r[k] for k in ("i", "kind", "bytes", "rss_mb")}
            for r in sorted(results, key=lambda r: -r["rss_mb"])
            if r["rss_grew"]
        ][:5],
        "crashes": crashes[:20],
    }
    ok = (
        total["crashes"] == 0
        and total["escaped_exceptions"] == 0
        and total["disagreements"] == 0
        and total["memory_errors"] == 0
        and total["slowest_case_s"] < BARS["slowest_case_s"]
        and total["peak_rss_mb"] < BARS["peak_rss_mb"]
    )
    return {
        "benchmark": "bench_fuzz_pickles",
        "seed": seed,
        "workers": workers,
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "bars": BARS,
        "bars_met": ok,
        "totals": total,
        "by_kind": rows,
        "examples": examples,
    }


def print_table(summary: dict) -> None:
    cols = [
        "cases",
        "both_frame",
        "compiled_declined",
        "compiled_refused",
        "unpickler_refused",
        "crashes",
        "escaped",
        "disagreements",
        "memory_errors",
        "slowest_s",
        "total_s",
    ]
    short = {
        "both_frame": "frame",
        "compiled_declined": "c.declined",
        "compiled_refused": "c.refused",
        "unpickler_refused": "u.refused",
        "disagreements": "disagree",
        "memory_errors": "mem.err",
    }
    print(f"{'kind':<15}" + "".join(f"{short.get(c, c):>11}" for c in cols))
    for k, row in summary["by_kind"].items():
        print(f"{k:<15}" + "".join(f"{row[c]:>11}" for c in cols))
    t = summary["totals"]
    print(
        f"\ntotal cases {t['cases']}: crashes {t['crashes']}, escaped exceptions {t['escaped_exceptions']}, "
        f"disagreements {t['disagreements']}, memory errors {t['memory_errors']}, slowest case "
        f"{t['slowest_case_s']:.3f} s, peak RSS {t['peak_rss_mb']:.0f} MB, wall {t['wall_s']} s "
        f"-> bars {'met' if summary['bars_met'] else 'MISSED'}"
    )
    for name in ("disagreements", "escaped", "crashes"):
        for ex in summary["examples"][name][:5]:
            print(f"  {name}: {ex}")


def main(argv=None) -> int:
    if argv is None and len(sys.argv) > 1 and sys.argv[1] == "--worker":
        seed, start, count, corpus_dir, progress = sys.argv[2:7]
        worker(int(seed), int(start), int(count), corpus_dir, progress)
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--chunk", type=int, default=1000)
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per chunk before it counts as a hang")
    ap.add_argument("--no-write", action="store_true", help="print the JSON summary instead of writing the results")
    args = ap.parse_args(argv)
    summary = campaign(args.cases, args.seed, args.workers, min(args.chunk, max(1, args.cases)), args.timeout)
    print_table(summary)
    if args.no_write:
        print(json.dumps(summary))
    else:
        out = HERE / "results" / "bench_fuzz_pickles.json"
        out.write_text(json.dumps(summary, indent=1) + "\n")
        print(f"wrote {out.relative_to(ROOT)}")
    return 0 if summary["bars_met"] else 1


if __name__ == "__main__":
    sys.exit(main())
