"""Flight Recorder dumps (pickle and JSON) -> events, progress; plus the gloo ``pg_config`` repair.

Safety: a dump is a pickle, and unpickling can run arbitrary code. :class:`RestrictedUnpickler`
refuses every global lookup (``GLOBAL``/``STACK_GLOBAL``/``INST``/``OBJ``, hence ``REDUCE`` has no
callable to call) and every persistent id, so only plain containers and scalars come out; anything
else raises :class:`~denpex_nb.errors.UnsafePickleError` before a single call is made. Plain data
can still hurt (a length or memo index that makes the C unpickler allocate gigabytes, a tuple
nested 10^6 deep that overflows the C stack when hashed, shared sub-lists that expand a 1 KB file
to 10^9 values), so before the unpickler sees a byte, :func:`check_pickle` walks every opcode and
refuses past the bounds (:data:`MAX_DEPTH`, memo indices, :data:`EXPANSION_FACTOR`): the same
rules the compiled decoder (:mod:`.pickle_nodes`) applies. A refused dump is a load_error for
that file (:class:`DumpRefused`); the other files load.

Decoders: a dump is read by the compiled decoder (:mod:`.fr_columns`, numba) or by the restricted
unpickler (:func:`parse_dump_bytes` + :func:`dump_to_columns`); both only *extract* the entries'
declared fields (:mod:`.fr_fields`, where every field and rule of the mapping is written once) and
give the same frame. ``DENPEX_FR_DECODER`` (:data:`DECODER_MODES`) picks: ``auto`` uses the compiled
one only when a load's pickles total :data:`COMPILED_MIN_BYTES` or more, as decided by
:meth:`FlightRecorderReader.prepare` once per load (a small incident never imports numba).

Speed: the diagnose bar is 1024 dumps x 2000 entries, so events are built column-wise (one array
per column, strings and shapes interned), never a dict per entry.

Mapping: see :mod:`.fr_fields` and docs/formats.md §10.1. Extra columns: ``retired``, ``is_p2p``,
``record_id``, ``collective_seq_id``, ``p2p_seq_id``, ``timeout_ms``.
"""

from __future__ import annotations

import gc
import io
import json
import os
import pickle
import re
import threading
import warnings
from typing import Any

import numpy as np
import pandas as pd

from ..errors import InputError, UnsafePickleError
from .base import FileContext, FileReader, Output, register_file_reader
from .fr_fields import as_int, event_columns, progress_rows, python_entry_arrays, ranks_of

_FR_NAME = re.compile(r"(?:nccl|comm_lib|fr)_trace_rank_?\d+|^trace_\d+$", re.I)


# --- bounds on untrusted pickles (both paths) ------------------------------------------------------

#: containers nest at most this deep (a real dump nests 5: dump > entries > entry > sizes > dims);
#: hashing or comparing a value recurses once per level in C, so a 10^6-deep tuple crashes Python
MAX_DEPTH = 64
#: a dump may expand (values counted once per reference, shared values included) to at most
#: ``max(EXPANSION_FACTOR * file bytes, MIN_EXPANSION)`` values: a plain dump expands to fewer
#: values than it has bytes (every value costs an opcode), so 16x is far from any real dump and
#: still bounds what a walk over the values costs ("billion laughs" pickles share one sub-list)
EXPANSION_FACTOR = 16
MIN_EXPANSION = 4 << 20

# statuses of the pickle scanners (pickle_nodes uses the same numbers)
OK, E_OPCODE, E_TRUNCATED, E_STACK, E_MEMO, E_NO_STOP, E_CAPACITY = range(7)
E_DEPTH, E_EXPANSION, E_MEMO_INDEX, E_MUTATED, E_CYCLE = range(7, 12)
E_UTF8, E_UNHASHABLE = 12, 13  # only the compiled decoder reports these (it then declines)
PICKLE_ERRORS = {
    E_UTF8: "a string that is not UTF-8",
    E_UNHASHABLE: "a dict key that cannot be hashed",
    E_OPCODE: "an opcode outside plain data",
    E_TRUNCATED: "truncated",
    E_STACK: "malformed stack",
    E_MEMO: "memo reference to nothing",
    E_NO_STOP: "no STOP opcode",
    E_CAPACITY: "more values than the first guess",
    E_DEPTH: f"values nested deeper than {MAX_DEPTH} levels (MAX_DEPTH)",
    E_EXPANSION: f"shared values expand past max({EXPANSION_FACTOR} x file bytes, {MIN_EXPANSION}) "
    "values (EXPANSION_FACTOR, MIN_EXPANSION)",
    E_MEMO_INDEX: "a memo index beyond the entries created so far",
    E_MUTATED: "a container changed after it was placed inside another one",
    E_CYCLE: "a value that contains itself",
}
#: statuses that refuse a dump outright, whichever path finds them
REFUSALS = frozenset({E_DEPTH, E_EXPANSION, E_MEMO_INDEX, E_MUTATED, E_CYCLE})

# value kinds of :func:`scan_opcodes`
_V_SCALAR, _V_LIST, _V_DICT, _V_TUPLE, _V_SET, _V_OTHER = range(6)


def expansion_cap(nbytes: int) -> int:
    """The most values a dump of ``nbytes`` bytes may expand to (see :data:`EXPANSION_FACTOR`)."""
    return max(EXPANSION_FACTOR * int(nbytes), MIN_EXPANSION)


class DumpRefused(InputError):
    """A pickle past one of the bounds above (nesting, memo indices, shared-value expansion)."""


def scan_opcodes(buf, n, max_expand, vkind, vdepth, vesize, vsealed, stack, marks, memo):
    """Walk every opcode of a pickle (protocols 0-5) without building anything: ``(status, byte)``.

    What the unpickler will build is modelled value by value (kind, nesting depth, expanded size,
    sealed once inside another container), with the C unpickler's stack and mark rules, and the
    bounds are checked as it goes: lengths against the bytes left, memo indices against the slots
    filled so far, depth against :data:`MAX_DEPTH`, expansion against ``max_expand``. Opcodes that
    need code (globals, ``REDUCE`` ...) are modelled as opaque values: the restricted unpickler
    refuses them itself when it gets there. Plain Python over ``bytes`` and lists, or compiled by
    numba over numpy arrays (:data:`pickle_nodes.scan_compiled`): the same source either way, so it
    uses no helper functions, no objects, and no integer that can overflow 64 bits.
    """
    cap = len(vkind)
    nv = 0
    sp = 0
    mp = 0
    memo_len = 0
    pos = 0
    at = 0
    status = E_NO_STOP
    while pos < n:
        op = buf[pos]
        at = pos
        pos += 1
        push_new = -1  # kind of a new value to push
        push_old = -1  # an existing value to push (memo get, DUP)
        tgt = -1  # a container that receives stack[lo:sp] ...
        make = -1  # ... or the kind of a new container built from them, pushed instead
        lo = 0
        w = 0  # fixed argument width / width of a length prefix
        if op == 0x68 or op == 0x6A or op == 0x67:  # BINGET, LONG_BINGET, GET
            idx = 0
            if op == 0x67:
                q = pos
                while q < n and buf[q] != 10:
                    q += 1
                if q >= n:
                    status = E_TRUNCATED
                    break
                if q == pos or q - pos > 18:
                    status = E_MEMO if q - pos > 18 else E_STACK
                    break
                for i in range(pos, q):
                    c = buf[i]
                    if c < 48 or c > 57:
                        status = E_STACK
                        break
                    idx = idx * 10 + (c - 48)
                if status == E_STACK:
                    break
                pos = q + 1
            else:
                w = 1 if op == 0x68 else 4
                if w > n - pos:
                    status = E_TRUNCATED
                    break
                for i in range(w):
                    idx |= buf[pos + i] << (8 * i)
                pos += w
            if idx >= memo_len:
                status = E_MEMO
                break
            push_old = memo[idx]
        elif op == 0x71 or op == 0x72 or op == 0x94 or op == 0x70:  # BINPUT, LONG_BINPUT, MEMOIZE, PUT
            idx = 0
            if op == 0x94:
                idx = memo_len
            elif op == 0x70:
                q = pos
                while q < n and buf[q] != 10:
                    q += 1
                if q >= n:
                    status = E_TRUNCATED
                    break
                if q == pos or q - pos > 18:
                    status = E_MEMO_INDEX if q - pos > 18 else E_STACK
                    break
                for i in range(pos, q):
                    c = buf[i]
                    if c < 48 or c > 57:
                        status = E_STACK
                        break
                    idx = idx * 10 + (c - 48)
                if status == E_STACK:
                    break
                pos = q + 1
            else:
                w = 1 if op == 0x71 else 4
                if w > n - pos:
                    status = E_TRUNCATED
                    break
                for i in range(w):
                    idx |= buf[pos + i] << (8 * i)
                pos += w
            if sp == 0 or (mp > 0 and marks[mp - 1] == sp):
                status = E_STACK
                break
            if idx > memo_len:
                status = E_MEMO_INDEX
                break
            memo[idx] = stack[sp - 1]
            if idx == memo_len:
                memo_len += 1
        elif op == 0x28:  # MARK
            if mp >= cap:
                status = E_CAPACITY
                break
            marks[mp] = sp
            mp += 1
        elif op == 0x61 or op == 0x73:  # APPEND, SETITEM
            k = 1 if op == 0x61 else 2
            lo = sp - k
            if lo - 1 < (marks[mp - 1] if mp > 0 else 0):
                status = E_STACK
                break
            tgt = stack[lo - 1]
            if vkind[tgt] != (_V_LIST if op == 0x61 else _V_DICT):
                status = E_STACK
                break
        elif op == 0x65 or op == 0x75 or op == 0x90:  # APPENDS, SETITEMS, ADDITEMS
            if mp == 0:
                status = E_STACK
                break
            mp -= 1
            lo = marks[mp]
            if lo - 1 < (marks[mp - 1] if mp > 0 else 0) or (op == 0x75 and (sp - lo) % 2 == 1):
                status = E_STACK
                break
            tgt = stack[lo - 1]
            if vkind[tgt] != (_V_LIST if op == 0x65 else (_V_DICT if op == 0x75 else _V_SET)):
                status = E_STACK
                break
        elif op == 0x6C or op == 0x64 or op == 0x74 or op == 0x91:  # LIST, DICT, TUPLE, FROZENSET
            if mp == 0:
                status = E_STACK
                break
            mp -= 1
            lo = marks[mp]
            if op == 0x64 and (sp - lo) % 2 == 1:
                status = E_STACK
                break
            make = _V_LIST if op == 0x6C else (_V_DICT if op == 0x64 else (_V_TUPLE if op == 0x74 else _V_SET))
        elif op == 0x85 or op == 0x86 or op == 0x87:  # TUPLE1..3
            lo = sp - (op - 0x84)
            if lo < (marks[mp - 1] if mp > 0 else 0):
                status = E_STACK
                break
            make = _V_TUPLE
        elif op == 0x5D:  # EMPTY_LIST
            push_new = _V_LIST
        elif op == 0x7D:  # EMPTY_DICT
            push_new = _V_DICT
        elif op == 0x29:  # EMPTY_TUPLE
            push_new = _V_TUPLE
        elif op == 0x8F:  # EMPTY_SET
            push_new = _V_SET
        elif op == 0x4E or op == 0x88 or op == 0x89:  # NONE, NEWTRUE, NEWFALSE
            push_new = _V_SCALAR
        elif op == 0x4B or op == 0x4D or op == 0x4A or op == 0x47:  # BININT1, BININT2, BININT, BINFLOAT
            w = 1 if op == 0x4B else (2 if op == 0x4D else (4 if op == 0x4A else 8))
            if w > n - pos:
                status = E_TRUNCATED
                break
            pos += w
            push_new = _V_SCALAR
        elif op == 0x82 or op == 0x83 or op == 0x84:  # EXT1, EXT2, EXT4 (refused by the unpickler)
            w = 1 if op == 0x82 else (2 if op == 0x83 else 4)
            if w > n - pos:
                status = E_TRUNCATED
                break
            pos += w
            push_new = _V_OTHER
        elif (
            op == 0x58
            or op == 0x8C
            or op == 0x8D
            or op == 0x8A
            or op == 0x8B
            or op == 0x54
            or op == 0x55
            or op == 0x42
            or op == 0x43
            or op == 0x8E
            or op == 0x96
        ):
            # BINUNICODE, SHORT_BINUNICODE, BINUNICODE8, LONG1, LONG4, BINSTRING, SHORT_BINSTRING,
            # BINBYTES, SHORT_BINBYTES, BINBYTES8, BYTEARRAY8: a length, then that many bytes
            if op == 0x8C or op == 0x8A or op == 0x55 or op == 0x43:
                w = 1
            elif op == 0x8D or op == 0x8E or op == 0x96:
                w = 8
            else:
                w = 4
            if w > n - pos:
                status = E_TRUNCATED
                break
            length = 0
            for i in range(w):
                length |= buf[pos + i] << (8 * i)
            pos += w
            if length < 0 or length > n - pos:  # compare with what is left: pos + length can overflow
                status = E_TRUNCATED
                break
            pos += length
            push_new = _V_SCALAR
        elif (
            op == 0x49 or op == 0x4C or op == 0x46 or op == 0x53 or op == 0x56 or op == 0x50 or op == 0x63 or op == 0x69
        ):
            # INT, LONG, FLOAT, STRING, UNICODE, PERSID: one line; GLOBAL, INST: two lines
            lines = 2 if (op == 0x63 or op == 0x69) else 1
            for _ in range(lines):
                while pos < n and buf[pos] != 10:
                    pos += 1
                if pos >= n:
                    status = E_TRUNCATED
                    break
                pos += 1
            if status == E_TRUNCATED:
                break
            if op == 0x69:  # INST: the mark's items are its arguments
                if mp == 0:
                    status = E_STACK
                    break
                mp -= 1
                sp = marks[mp]
            push_new = _V_OTHER if (op == 0x50 or op == 0x63 or op == 0x69) else _V_SCALAR
        elif op == 0x30:  # POP: a value, or a mark right on top
            if mp > 0 and marks[mp - 1] == sp:
                mp -= 1
            elif sp <= (marks[mp - 1] if mp > 0 else 0):
                status = E_STACK
                break
            else:
                sp -= 1
        elif op == 0x31:  # POP_MARK
            if mp == 0:
                status = E_STACK
                break
            mp -= 1
            sp = marks[mp]
        elif op == 0x32:  # DUP
            if sp <= (marks[mp - 1] if mp > 0 else 0):
                status = E_STACK
                break
            push_old = stack[sp - 1]
        elif (
            op == 0x52 or op == 0x93 or op == 0x81 or op == 0x92 or op == 0x62 or op == 0x51 or op == 0x98 or op == 0x97
        ):
            # REDUCE, STACK_GLOBAL, NEWOBJ, NEWOBJ_EX, BUILD, BINPERSID, READONLY_BUFFER, NEXT_BUFFER:
            # they need a callable, a global or an out-of-band buffer, which the unpickler refuses
            k = (
                2
                if (op == 0x52 or op == 0x93 or op == 0x81 or op == 0x62)
                else (3 if op == 0x92 else (1 if (op == 0x51 or op == 0x98) else 0))
            )
            if sp - k < (marks[mp - 1] if mp > 0 else 0):
                status = E_STACK
                break
            if op == 0x62:  # BUILD: the state goes, the object stays
                sp -= 1
            elif op != 0x98:
                sp -= k
                push_new = _V_OTHER
        elif op == 0x6F:  # OBJ: class and arguments since the mark
            if mp == 0:
                status = E_STACK
                break
            mp -= 1
            if sp - marks[mp] < 1:
                status = E_STACK
                break
            sp = marks[mp]
            push_new = _V_OTHER
        elif op == 0x80:  # PROTO
            if 1 > n - pos:
                status = E_TRUNCATED
                break
            pos += 1
        elif op == 0x95:  # FRAME: its length must fit in what is left
            if 8 > n - pos:
                status = E_TRUNCATED
                break
            length = 0
            for i in range(8):
                length |= buf[pos + i] << (8 * i)
            pos += 8
            if length < 0 or length > n - pos:
                status = E_TRUNCATED
                break
        elif op == 0x2E:  # STOP
            if sp <= (marks[mp - 1] if mp > 0 else 0):
                status = E_STACK
            else:
                status = OK
            break
        else:
            status = E_OPCODE
            break
        # --- the common tail: build, link, push ------------------------------------------------
        if make >= 0:
            if nv >= cap:
                status = E_CAPACITY
                break
            tgt = nv
            vkind[nv] = make
            vdepth[nv] = 1
            vesize[nv] = 1
            vsealed[nv] = 0
            nv += 1
        if tgt >= 0:
            if sp > lo:
                if vsealed[tgt]:
                    status = E_MUTATED
                    break
                d = vdepth[tgt]
                x = vesize[tgt]
                for i in range(lo, sp):
                    c = stack[i]
                    if c == tgt:
                        status = E_CYCLE
                        break
                    vsealed[c] = 1
                    if vdepth[c] + 1 > d:
                        d = vdepth[c] + 1
                    x += vesize[c]
                if status == E_CYCLE:
                    break
                vdepth[tgt] = d if d <= MAX_DEPTH else MAX_DEPTH + 1
                vesize[tgt] = x
                if d > MAX_DEPTH:
                    status = E_DEPTH
                    break
                if x > max_expand:
                    status = E_EXPANSION
                    break
            sp = lo
            if make >= 0:
                stack[sp] = tgt
                sp += 1
        if push_new >= 0:
            if nv >= cap or sp >= cap:
                status = E_CAPACITY
                break
            vkind[nv] = push_new
            vdepth[nv] = 0 if (push_new == _V_SCALAR or push_new == _V_OTHER) else 1
            vesize[nv] = 1
            vsealed[nv] = 0
            stack[sp] = nv
            sp += 1
            nv += 1
        elif push_old >= 0:
            if sp >= cap:
                status = E_CAPACITY
                break
            stack[sp] = push_old
            sp += 1
    return status, at


_SCAN_BROKEN = False
_SCAN_LOCAL = threading.local()


#: a single pickle this big is scanned compiled in ``auto`` mode whatever the load's plan (numba's
#: load, ~1 s, is less than plain Python's scan of it: ~0.5 s per MB on this machine)
SCAN_COMPILED_MIN_BYTES = 1 << 20


def _scanner(nbytes: int = 0):
    """The compiled scanner when the decoder choice allows numba here (:func:`scanner_compiled`, or
    ``auto`` and a pickle of :data:`SCAN_COMPILED_MIN_BYTES` or more), else None (plain Python)."""
    big = nbytes >= SCAN_COMPILED_MIN_BYTES and numba_found() and decoder_mode() == "auto"
    if _SCAN_BROKEN or not (scanner_compiled() or big):
        return None
    from . import pickle_nodes

    if not pickle_nodes.AVAILABLE:
        return None
    pickle_nodes.jit_kernels()  # imports numba (once): the scanner has no C build
    return pickle_nodes.scan_compiled


def scan_pickle(data: bytes, compiled: bool | None = None) -> tuple[int, int]:
    """``(status, byte)`` of :func:`scan_opcodes` over ``data``: compiled when numba works (``compiled=None``
    or True), else plain Python (``compiled=False``, or ``DENPEX_FR_DECODER=python``)."""
    global _SCAN_BROKEN
    n = len(data)
    cap = n + 2  # every value, stack slot, mark and memo slot costs an opcode byte
    max_expand = expansion_cap(n)
    fn = _scanner(n) if compiled is not False else None
    if fn is not None:
        try:
            arrays = getattr(_SCAN_LOCAL, "arrays", None)
            if arrays is None or len(arrays[0]) < cap:  # kept per thread: fresh pages cost (see Workspace)
                arrays = _SCAN_LOCAL.arrays = tuple(
                    np.empty(cap, dt) for dt in (np.int8, np.int8, np.int64, np.int8, np.int32, np.int32, np.int32)
                )
            got = fn(np.frombuffer(data, dtype=np.uint8), n, max_expand, *(a[:cap] for a in arrays))
            return int(got[0]), int(got[1])
        except MemoryError:
            raise
        except Exception as e:  # numba itself failing: plain Python from now on, in this process
            _SCAN_BROKEN = True
            warnings.warn(
                f"the compiled pickle scanner failed ({type(e).__name__}: {e}); checking dumps in "
                f"plain Python instead (set {DECODER_ENV}=python to skip it)",
                RuntimeWarning,
                stacklevel=2,
            )
    z = [0] * cap
    return scan_opcodes(bytes(data), n, max_expand, z, list(z), list(z), list(z), list(z), list(z), list(z))


def refusal(status: int, at: int) -> Exception:
    """The exception for a scanner status: :class:`DumpRefused` past a bound, else the unpickler's
    own kind of error (``pickle data was truncated`` as the C unpickler says it)."""
    if status in REFUSALS:
        return DumpRefused(
            f"refused: {PICKLE_ERRORS[status]} at byte {at}",
            fix="this is no dump torch wrote; do not load dumps from untrusted sources",
        )
    if status in (E_TRUNCATED, E_NO_STOP):
        return pickle.UnpicklingError("pickle data was truncated")
    return pickle.UnpicklingError(f"{PICKLE_ERRORS.get(status, f'status {status}')} at byte {at}")


def check_pickle(data: bytes, compiled: bool | None = None) -> None:
    """Raise unless ``data`` is within the bounds (see :func:`scan_opcodes`); the unpickler gets only
    pickles that passed, so it never allocates by a length or an index it was handed."""
    status, at = scan_pickle(data, compiled)
    if status != OK:
        raise refusal(status, at)


class RestrictedUnpickler(pickle.Unpickler):
    """Unpickle plain data only: every attempt to look up a global is refused, never executed."""

    def find_class(self, module: str, name: str):  # noqa: D401
        raise UnsafePickleError(
            f"the pickle asks for {module}.{name}; only plain data is allowed",
            fix="do not load dumps from untrusted sources",
        )

    def persistent_load(self, pid):
        raise UnsafePickleError("the pickle uses persistent ids; only plain data is allowed")


def safe_loads(data: bytes, compiled: bool | None = None) -> Any:
    """``pickle.loads`` restricted to containers and scalars (raises UnsafePickleError), after
    :func:`check_pickle` (raises :class:`DumpRefused` past a bound, UnpicklingError on garbage)."""
    check_pickle(data, compiled)
    # A BufferedReader gives the C unpickler ``peek``: it then parses from its buffer instead of
    # calling ``read`` per opcode (3x faster on a 2000-entry dump).
    return RestrictedUnpickler(io.BufferedReader(io.BytesIO(data), buffer_size=len(data) + 1)).load()


def parse_dump_bytes(data: bytes) -> tuple[dict, str]:
    """Decode a dump's bytes: (dump dict, "fr_pickle" | "fr_json"). Raises on corrupt input."""
    stripped = data.lstrip()
    if stripped[:1] == b"{":
        dump = json.loads(data.decode("utf-8"))
        kind = "fr_json"
    else:
        dump = safe_loads(data)
        kind = "fr_pickle"
    if not isinstance(dump, dict) or not ({"entries", "pg_config", "pg_status", "version"} & set(dump)):
        raise ValueError("not a Flight Recorder dump (no entries / pg_config / version)")
    return dump, kind


def read_dump(path: str | os.PathLike) -> dict:
    """Load one dump file as a dict (restricted unpickler; JSON accepted)."""
    with open(path, "rb") as f:
        data = f.read()
    try:
        return parse_dump_bytes(data)[0]
    except UnsafePickleError as e:
        raise UnsafePickleError(e.problem, fix=e.fix, where=str(path)) from None
    except Exception as e:
        raise InputError(
            f"corrupt or truncated Flight Recorder dump: {type(e).__name__}: {e}", where=str(path)
        ) from None


def dump_to_frames(dump: dict, *, rank: int | None, file: str, source: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(events, progress) frames of one dump."""
    from .assemble import build_frame

    events, progress = dump_to_columns(dump, rank=rank, file=file, source=source)
    return build_frame("events", [events]), build_frame("progress", [progress])


def dump_to_columns(dump: dict, *, rank: int | None, file: str, source: str) -> tuple[dict, list[dict]]:
    """(events column batch, progress rows) of one unpickled or JSON dump: the entries are typed
    by :func:`.fr_fields.python_entry_arrays` and mapped by :func:`.fr_fields.event_columns`, the
    same mapping the compiled decoder uses."""
    arrays = python_entry_arrays(dump.get("entries"))
    events = event_columns(arrays, rank=rank, file=file, source=source, pg_config=dump.get("pg_config"))
    return events, progress_rows(dump.get("pg_status"), rank=rank, file=file, source=source)


# --- which decoder reads the pickles ------------------------------------------------------------

#: ``DENPEX_FR_DECODER``: ``auto`` (the default, also when unset or unknown) uses the compiled
#: decoder only when a load's pickled dumps total :data:`COMPILED_MIN_BYTES` or more (it costs
#: ~1 s to import numba and load its cache: a small incident is read faster without it);
#: ``compiled`` always uses it (when numba is installed); ``unpickle`` never does (the restricted
#: unpickler reads every dump; its bounds scanner still runs compiled); ``python`` keeps numba out
#: entirely. The frames are the same whichever reads them.
DECODER_ENV = "DENPEX_FR_DECODER"
DECODER_MODES = ("auto", "compiled", "unpickle", "python")
#: ``auto``'s threshold, measured (fresh ``denpex-nb diagnose --json``, 2000-entry dumps of
#: ~0.37 MB each, see benchmarks/bench_fr_decoder_choice.py): the compiled decoder pays for its load
#: from about this much pickled input on
COMPILED_MIN_BYTES = 4 << 20
_NUMBA_FOUND: bool | None = None
_COMPILED_BROKEN = False  # numba itself failed in this process (never set by one dump)
_COMPILED_READY = False  # fr_columns.warm() succeeded in this process
_PLAN: str | None = None  # auto's choice for the current load ("compiled" / "python"), by prepare()
#: the same choice by size alone, for the unpickler path's bounds scanner (numba only: with the C
#: kernels a small load must not wait for numba, a big one must not scan declined dumps in Python)
_SCAN_PLAN: str | None = None


def decoder_mode() -> str:
    """``DENPEX_FR_DECODER`` as one of :data:`DECODER_MODES` (unset or unknown: ``auto``)."""
    mode = os.environ.get(DECODER_ENV, "").strip().lower()
    return mode if mode in DECODER_MODES else "auto"


def numba_found() -> bool:
    """numba is installed (``find_spec``, not import: importing numba takes ~0.5 s)."""
    global _NUMBA_FOUND
    if _NUMBA_FOUND is None:
        import importlib.util

        _NUMBA_FOUND = importlib.util.find_spec("numba") is not None
    return _NUMBA_FOUND


def native_kernels() -> bool:
    """The compiled decoder runs as C (the ``frdecode`` extension built at install, see
    :func:`.pickle_nodes.backend`): it then costs nothing to load, so ``auto`` always uses it."""
    from . import pickle_nodes

    return pickle_nodes.backend() == "native"


def compiled_decoder_enabled() -> bool:
    """True when the compiled decoder exists (C kernels built, or numba installed) and
    ``DENPEX_FR_DECODER`` allows it (``compiled``, or ``auto``: see :func:`use_compiled`)."""
    return (native_kernels() or numba_found()) and decoder_mode() in ("auto", "compiled")


def use_compiled(nbytes: int) -> bool:
    """Should a pickle of ``nbytes`` go through the compiled decoder? ``compiled``: yes; ``auto``:
    yes once it is loaded in this process (it then costs nothing more), else what
    :meth:`FlightRecorderReader.prepare` chose for this load, else (a reader called without it,
    e.g. on a Dask worker) when this dump alone reaches :data:`COMPILED_MIN_BYTES`."""
    if _COMPILED_BROKEN or not compiled_decoder_enabled():
        return False
    if decoder_mode() == "compiled" or _COMPILED_READY or native_kernels():
        return True
    if _PLAN is not None:
        return _PLAN == "compiled"
    return nbytes >= COMPILED_MIN_BYTES


def scanner_compiled() -> bool:
    """Does the bounds scanner of the unpickler path run compiled? With numba installed: in modes
    ``compiled`` and ``unpickle``, and in ``auto`` when the compiled decoder is loaded or chosen;
    never in ``python`` (nor in ``auto`` for a small incident, which must not wait for numba)."""
    if not numba_found():
        return False
    mode = decoder_mode()
    if mode == "auto":  # numba already loaded, or a load big enough to pay for loading it
        return (_COMPILED_READY and not native_kernels()) or _SCAN_PLAN == "compiled"
    return mode != "python"


def load_compiled() -> bool:
    """Load the compiled decoder in this process (once): False when numba fails (then it stays off)."""
    global _COMPILED_READY
    if _COMPILED_READY:
        return True
    if _COMPILED_BROKEN:
        return False
    try:
        from . import fr_columns
    except Exception as e:  # numba cannot even be imported
        compiled_failed(e)
        return False
    _COMPILED_READY = fr_columns.warm()
    return _COMPILED_READY


def compiled_failed(e: BaseException) -> None:
    """numba itself failed (import, compile, cache, or a known-good dump): the compiled decoder is
    off for the rest of this process, with one warning."""
    global _COMPILED_BROKEN
    if not _COMPILED_BROKEN:
        _COMPILED_BROKEN = True
        warnings.warn(
            f"the compiled Flight Recorder decoder failed ({type(e).__name__}: {e}); reading dumps "
            f"with the unpickler instead (set {DECODER_ENV}=unpickle to skip it)",
            RuntimeWarning,
            stacklevel=3,
        )


def _compiled_columns(data: bytes, ctx: FileContext):
    """The compiled path (:mod:`.fr_columns`) when chosen (:func:`use_compiled`) and it accepts the
    dump, else None.

    A dump past a bound raises :class:`DumpRefused` (a load_error for that file). Any other failure
    on one dump only makes the compiled path decline *that* dump (the unpickler path then reads it
    or says why not); the compiled path stays on for the others. Only numba itself failing
    (:func:`.fr_columns.warm` on a known-good dump, or an error raised by numba) switches it off."""
    if data[:1] != b"\x80" or not use_compiled(len(data)) or not load_compiled():
        return None
    from . import fr_columns

    try:
        return fr_columns.fast_dump_columns(data, rank=ctx.rank_hint, file=ctx.file, source="fr_pickle")
    except DumpRefused:
        raise
    except Exception as e:  # this dump only: decline it, unless numba itself raised
        if type(e).__module__.split(".", 1)[0] in ("numba", "llvmlite"):
            compiled_failed(e)
        return None


def _is_pickle(head: bytes) -> bool:
    return head[:1] == b"\x80" and len(head) > 1 and 2 <= head[1] <= 5


def _pickle_sizes(specs):
    """Sizes of the inputs that start like a pickle (two bytes read from each plain file, or the bytes
    read when it was found, ``FileSpec.magic``; compressed files and archive members are not opened
    here)."""
    for s in specs:
        head = b""
        if getattr(s, "data", None) is not None:
            head = s.data[:2]
        elif getattr(s, "magic", None) is not None and not s.compression and not s.member:
            head = s.magic[:2]
        elif s.path and not s.compression and not s.member:
            try:
                with open(s.path, "rb") as f:
                    head = f.read(2)
            except OSError:
                continue
        if _is_pickle(head):
            yield len(s.data) if getattr(s, "data", None) is not None else s.size


class FlightRecorderReader(FileReader):
    """Flight Recorder pickle dumps. The rank comes from the file name."""

    name = "fr_pickle"
    line_oriented = False

    def sniff(self, head: bytes, path: str) -> bool:
        return _is_pickle(head)

    def prepare(self, specs) -> None:
        """Called once per load with all its inputs, before any is read and before a process pool
        forks (see :func:`.parallel.run_all`): in ``auto`` mode, choose the decoder for this load
        by the total size of its pickles (:data:`COMPILED_MIN_BYTES`); when the compiled decoder
        is chosen, load it here, once, so forked workers inherit it instead of each loading it."""
        global _PLAN, _SCAN_PLAN
        if self.name != "fr_pickle" or not compiled_decoder_enabled():
            return
        total, seen = 0, False
        free = native_kernels()  # the C kernels cost nothing to load: any size goes compiled
        for size in _pickle_sizes(specs):
            seen = True
            total += size
            if total >= COMPILED_MIN_BYTES or ((decoder_mode() == "compiled" or _COMPILED_READY) and not free):
                break
        _SCAN_PLAN = "compiled" if total >= COMPILED_MIN_BYTES else "python"
        _PLAN = "compiled" if free else _SCAN_PLAN
        if seen and use_compiled(total):
            load_compiled()

    def read(self, data: bytes, ctx: FileContext, out: Output) -> int:
        # A dump is tens of thousands of fresh containers and no reference cycles: the cyclic GC
        # would rescan everything alive (all earlier dumps' rows) many times over for nothing.
        got = _compiled_columns(data, ctx) if self.name == "fr_pickle" else None
        if got is not None:
            events, progress = got
        else:
            enabled = gc.isenabled()
            gc.disable()
            try:
                dump, kind = parse_dump_bytes(data)
                events, progress = dump_to_columns(dump, rank=ctx.rank_hint, file=ctx.file, source=kind)
                del dump
            finally:
                if enabled:
                    gc.enable()
        out.frames.setdefault("events", []).append(events)  # a column batch, see assemble.build_frame
        out.progress.extend(progress)
        if ctx.rank_hint is not None:
            out.ranks.append({"rank": ctx.rank_hint})
        return 0


class FlightRecorderJsonReader(FlightRecorderReader):
    """Flight Recorder JSON dumps (``_dump_fr_trace_json``): strings in pg_status, 0 for missing times."""

    name = "fr_json"

    def sniff(self, head: bytes, path: str) -> bool:
        s = head.lstrip()[:4096]
        if s[:1] != b"{" or b'"event"' in s[:200]:
            return False
        return any(
            k in s for k in (b'"pg_config"', b'"entries"', b'"comm_lib_version"', b'"nccl_version"', b'"pg_status"')
        )


register_file_reader(FlightRecorderReader())
register_file_reader(FlightRecorderJsonReader())


# --- gloo pg_config repair -------------------------------------------------------------------


#: a world size past this is not listed rank by rank (a file named ``..._rank_2000000000`` would
#: otherwise become a list of two billion ranks)
MAX_LISTED_WORLD = 1 << 16


def repair_pg_config(dump: dict, world_size: int | None = None) -> dict:
    """Rebuild a gloo dump's ``pg_config`` (keyed ``''``) from its entries' ``process_group``.

    The stock analyzer (``torchfrtrace``) looks groups up by name and crashes on the ``''`` key
    (``KeyError: ('0', 0)``). Each group seen in ``entries`` gets ``{name, desc, ranks}`` where
    ``ranks`` is the original list when it had one, else ``range(world_size)``. Returns a new dict;
    dumps with a proper ``pg_config`` come back unchanged (copied).
    """
    fixed = dict(dump)
    cfg = dump.get("pg_config") or {}
    if isinstance(cfg, dict) and cfg and "" not in cfg:
        return fixed
    orig_ranks = []
    if isinstance(cfg, dict):
        for c in cfg.values():
            orig_ranks = orig_ranks or ranks_of(c)
    if not orig_ranks and world_size and world_size <= MAX_LISTED_WORLD:
        orig_ranks = list(range(world_size))
    groups: dict[str, str] = {}
    for e in dump.get("entries") or []:
        g = e.get("process_group") if isinstance(e, dict) else None
        if isinstance(g, (list, tuple)) and g:
            groups.setdefault(str(g[0]), str(g[1]) if len(g) > 1 and g[1] is not None else "")
    if not groups:
        groups = {"0": "default_pg"}
    fixed["pg_config"] = {name: {"name": name, "desc": desc, "ranks": str(orig_ranks)} for name, desc in groups.items()}
    return fixed


def _rank_from_name(name: str) -> int | None:
    from .sources import rank_hints

    return rank_hints(name).get("rank_hint")


def write_repaired_dumps(src_dir: str | os.PathLike, dst_dir: str | os.PathLike) -> list[str]:
    """Copy every dump in ``src_dir`` to ``dst_dir`` as a pickle with ``pg_config`` repaired.

    JSON dumps are converted (``pg_status`` strings become ints), so ``torchfrtrace dst_dir``
    can read them. The world size is the number of ranks whose dumps are present (or the largest
    rank + 1). Files that are not dumps are skipped. Returns the written paths.
    """
    src_dir, dst_dir = os.fspath(src_dir), os.fspath(dst_dir)
    os.makedirs(dst_dir, exist_ok=True)
    dumps: dict[str, dict] = {}
    for name in sorted(os.listdir(src_dir)):
        path = os.path.join(src_dir, name)
        if not os.path.isfile(path):
            continue
        try:
            dumps[name] = read_dump(path)
        except (InputError, UnsafePickleError):
            continue
    ranks = [r for r in (_rank_from_name(n) for n in dumps) if r is not None]
    world = max(len(dumps), (max(ranks) + 1) if ranks else 0) or None
    written = []
    for name, dump in dumps.items():
        fixed = repair_pg_config(dump, world)
        status = fixed.get("pg_status")
        if isinstance(status, dict):
            fixed["pg_status"] = {
                k: {kk: (as_int(vv) if as_int(vv) is not None else vv) for kk, vv in v.items()}
                if isinstance(v, dict)
                else v
                for k, v in status.items()
            }
        for e in fixed.get("entries") or []:
            if isinstance(e, dict) and isinstance(e.get("process_group"), list):
                e["process_group"] = tuple(e["process_group"])
        out = os.path.join(dst_dir, name)
        tmp = out + ".tmp"
        with open(tmp, "wb") as f:
            pickle.dump(fixed, f, protocol=2)
        os.replace(tmp, out)
        written.append(out)
    return written
