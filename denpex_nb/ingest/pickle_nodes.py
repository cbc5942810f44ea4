"""A pickle decoded into a flat node table, compiled with numba: no Python object per value.

Why: a Flight Recorder dump of 2000 entries unpickles into ~100 000 Python objects (a dict per
entry, a list per shape, an int per field), and for 1024 dumps building and freeing those objects
costs more than everything else denpex does with them. :func:`decode` walks the opcode stream once
and records every value as a row of numpy arrays instead:

* ``kind[i]``: one of the ``K_*`` constants below; ``val[i]``: the integer, bool, or for strings
  the byte offset of the UTF-8 text in the buffer (``size[i]`` its length; the text is checked to
  be UTF-8 as the unpickler would decode it), for tuples 1 when they hold a list or dict (so they
  cannot be a dict key: the decoder declines such a key, as the unpickler fails on it);
* containers (list, tuple, dict) own a chain of *edges* (``first_edge[i]`` -> ``edge_next``), each
  pointing at a child node (``edge_node``); a dict's children alternate key, value. A value the
  pickle shares through its memo (``BINGET``) is one node with several parents, as in Python.

Safety: only data opcodes are understood (containers, ints, floats, bools, None, strings, memo,
framing). Any other opcode (``GLOBAL``, ``STACK_GLOBAL``, ``REDUCE``, ``BUILD``, persistent ids,
bytes ...) stops the decoder with :data:`E_OPCODE` before anything is built from it; callers then
fall back to :class:`~denpex_nb.ingest.flight_recorder.RestrictedUnpickler`, which refuses globals.
Nothing is ever executed.

Bounds (the input is untrusted; the same rules guard the unpickler path, see
:func:`~denpex_nb.ingest.flight_recorder.check_pickle`): every length is compared with the bytes
left *before* it is used (never ``pos + length``, which can overflow); values nest at most
:data:`MAX_DEPTH` containers deep; a memo index may name an existing slot or the next one, never
beyond (no table grows by index); a container may not change once it sits inside another one (only
a pickle that builds a value containing itself does that), so the *expanded* size (nodes counted
once per reference, shared values included) is exact as it grows and is capped at
:func:`expansion_cap` of the file size. A dump past a bound is *refused* (:data:`REFUSALS`), not
declined: the unpickler path would refuse it too.
Kernels (:func:`backend`): the functions marked ``@njit`` here and in :mod:`.fr_columns` are
the reference source. They run as C when the package was built with its extension
(``frdecode``, a line-by-line port built by ``setup.py`` at install: nothing to compile at run
time, numba never imported), else compiled by numba on first use (``cache=True``: numba's cache
beside the source, or in ``NUMBA_CACHE_DIR`` / ``~/.cache/numba`` where that is not writable).
``DENPEX_FR_KERNELS=numba`` picks numba even where the C kernels are built (for comparison).
Marking a kernel imports nothing: :func:`jit_kernels` wraps them all with numba, once, only when
the numba backend is used. With neither :func:`backend` is None and callers use the ordinary
unpickler (the functions here would still run as plain Python, far too slowly to be worth it).
"""

from __future__ import annotations

import importlib.util
import os
import threading

import numpy as np

#: numba (the optional "fast" extra) is installed: ``find_spec``, since importing it costs ~0.5 s
AVAILABLE = importlib.util.find_spec("numba") is not None
KERNELS_ENV = "DENPEX_FR_KERNELS"

try:  # the C kernels, built with the package where a compiler was found
    from . import frdecode as native
except ImportError:  # pragma: no cover - exercised where the extension was not built
    native = None

_KERNELS: list[tuple[dict, str, object]] = []  # (module globals, name, plain function)
_JIT_LOCK = threading.Lock()
_JITTED = False


def njit(*args, **kwargs):
    """Mark a numba kernel (``cache=True, nogil=True`` for all): registered for :func:`jit_kernels`,
    returned unchanged until then, so importing this module never imports numba."""

    def mark(f):
        _KERNELS.append((f.__globals__, f.__name__, f))
        return f

    if args and callable(args[0]):
        return mark(args[0])
    return mark


def jit_kernels() -> None:
    """Replace every marked kernel (in its module) with its numba dispatcher, once per process.
    All are wrapped before any is called, so kernels that call each other find dispatchers."""
    global _JITTED
    with _JIT_LOCK:
        if _JITTED:
            return
        import numba

        for g, name, f in _KERNELS:
            g[name] = numba.njit(cache=True, nogil=True)(f)
        _JITTED = True


def backend() -> str | None:
    """Which kernels decode: ``"native"`` (the C extension), ``"numba"``, or None (neither)."""
    choice = os.environ.get(KERNELS_ENV, "").strip().lower()
    if native is not None and NATIVE_OK and choice != "numba":
        return "native"
    return "numba" if AVAILABLE else None


# node kinds
K_NONE, K_BOOL, K_INT, K_BIGINT, K_FLOAT, K_STR, K_LIST, K_TUPLE, K_DICT = range(9)
CONTAINERS = (K_LIST, K_TUPLE, K_DICT)

# decoder status, and the bounds: shared with the unpickler path's scanner (one definition)
from .flight_recorder import (  # noqa: E402
    E_CAPACITY,
    E_CYCLE,
    E_DEPTH,
    E_EXPANSION,
    E_MEMO,
    E_MEMO_INDEX,
    E_MUTATED,
    E_NO_STOP,
    E_OPCODE,
    E_STACK,
    E_TRUNCATED,
    E_UNHASHABLE,
    E_UTF8,
    MAX_DEPTH,
    OK,
    expansion_cap,
    scan_opcodes,
)
from .flight_recorder import PICKLE_ERRORS as ERRORS  # noqa: E402

#: the unpickler path's scanner (:func:`.flight_recorder.scan_opcodes`) compiled: a separate walker from
#: :func:`_decode` (every opcode, no table), so the two paths check each other in the fuzz tests
scan_compiled = scan_opcodes
_KERNELS.append((globals(), "scan_compiled", scan_opcodes))

#: the C kernels agree with this module on every status, bound and kind number (else unused)
NATIVE_OK = native is not None and native.CONSTANTS == (
    (OK, E_OPCODE, E_TRUNCATED, E_STACK, E_MEMO, E_NO_STOP, E_CAPACITY)
    + (E_DEPTH, E_EXPANSION, E_MEMO_INDEX, E_MUTATED, E_CYCLE, E_UTF8, E_UNHASHABLE),
    MAX_DEPTH,
    (K_NONE, K_BOOL, K_INT, K_BIGINT, K_FLOAT, K_STR, K_LIST, K_TUPLE, K_DICT),
    1,
)


@njit(cache=True, nogil=True)
def _le(buf, pos, k):
    """Unsigned little-endian integer of ``k`` (<= 8) bytes at ``pos``."""
    v = np.int64(0)
    for i in range(k):
        v |= np.int64(buf[pos + i]) << np.int64(8 * i)
    return v


@njit(cache=True, nogil=True)
def _utf8_ok(buf, i, end):
    """Does ``buf[i:end]`` decode as UTF-8 the way the unpickler decodes it (``surrogatepass``:
    encoded surrogates pass, overlong forms and code points past U+10FFFF do not)?"""
    while i < end:
        c = buf[i]
        if c < 0x80:
            i += 1
            continue
        if c < 0xC2 or c > 0xF4:
            return False
        k = 1 if c < 0xE0 else (2 if c < 0xF0 else 3)
        if k > end - i - 1:
            return False
        b1 = buf[i + 1]
        if (
            b1 < 0x80
            or b1 > 0xBF
            or (c == 0xE0 and b1 < 0xA0)
            or (c == 0xF0 and b1 < 0x90)
            or (c == 0xF4 and b1 > 0x8F)
        ):
            return False
        for j in range(2, k + 1):
            if buf[i + j] < 0x80 or buf[i + j] > 0xBF:
                return False
        i += k + 1
    return True


@njit(cache=True, nogil=True)
def _memo_arg(buf, pos, width):
    """A memo index: one byte (BINGET/BINPUT, the hot case, read directly) or four."""
    return np.int64(buf[pos]) if width == 1 else _le(buf, pos, 4)


@njit(cache=True, nogil=True)
def _hashable(kind, val, node):
    """Can the unpickler use this value as a dict key? (lists and dicts not; a tuple when all it holds can)"""
    k = kind[node]
    return not (k == K_LIST or k == K_DICT or (k == K_TUPLE and val[node] == 1))


@njit(cache=True, nogil=True)
def _link(
    container, stack, lo, hi, size, first_edge, last_edge, edge_node, edge_next, ne, depth, esize, sealed, max_expand
):
    """Append ``stack[lo:hi]`` to ``container``'s children: (new edge count, status). Children are
    sealed (they may not change any more), so the container's depth and expanded size stay exact."""
    if hi <= lo:
        return ne, OK
    if sealed[container]:
        return ne, E_MUTATED
    d = np.int64(depth[container])
    x = esize[container]
    for i in range(lo, hi):
        c = stack[i]
        if c == container:
            return ne, E_CYCLE
        sealed[c] = True
        if depth[c] + 1 > d:
            d = np.int64(depth[c]) + 1
        x += esize[c]
        edge_node[ne] = c
        edge_next[ne] = -1
        if size[container] == 0:
            first_edge[container] = ne
        else:
            edge_next[last_edge[container]] = ne
        last_edge[container] = ne
        size[container] += 1
        ne += 1
    depth[container] = min(d, MAX_DEPTH + 1)
    esize[container] = x
    if d > MAX_DEPTH:
        return ne, E_DEPTH
    if x > max_expand:
        return ne, E_EXPANSION
    return ne, OK


@njit(cache=True, nogil=True)
def _decode(
    buf,
    max_expand,
    kind,
    val,
    size,
    first_edge,
    last_edge,
    edge_node,
    edge_next,
    stack,
    marks,
    memo,
    depth,
    esize,
    sealed,
):
    n = buf.size
    cap = kind.size  # nodes, edges, stack, marks and memo all have this room
    nn = 0  # nodes
    ne = 0  # edges
    sp = 0  # stack depth
    mp = 0  # mark depth
    memo_len = 0  # memo[:memo_len] is filled: an index may only reach memo_len
    pos = 0
    status = E_NO_STOP
    root = -1
    at = 0
    while pos < n:
        op = buf[pos]
        at = pos
        pos += 1
        new_kind = -1
        new_val = np.int64(0)
        if op == 0x68 or op == 0x6A:  # BINGET, LONG_BINGET
            w = 1 if op == 0x68 else 4
            if w > n - pos:
                status = E_TRUNCATED
                break
            idx = _memo_arg(buf, pos, w)
            pos += w
            if idx >= memo_len:
                status = E_MEMO
                break
            if sp >= cap:
                status = E_CAPACITY
                break
            stack[sp] = memo[idx]
            sp += 1
        elif op == 0x71 or op == 0x72 or op == 0x94:  # BINPUT, LONG_BINPUT, MEMOIZE
            if op == 0x94:
                idx = np.int64(memo_len)
            else:
                w = 1 if op == 0x71 else 4
                if w > n - pos:
                    status = E_TRUNCATED
                    break
                idx = _memo_arg(buf, pos, w)
                pos += w
            if sp == 0 or (mp > 0 and marks[mp - 1] == sp):
                status = E_STACK
                break
            if idx > memo_len:
                status = E_MEMO_INDEX
                break
            if idx >= cap:
                status = E_CAPACITY
                break
            memo[idx] = stack[sp - 1]
            if idx == memo_len:
                memo_len += 1
        elif op == 0x5D:  # EMPTY_LIST
            new_kind = K_LIST
        elif op == 0x73 or op == 0x61:  # SETITEM, APPEND
            k = 2 if op == 0x73 else 1
            want = K_DICT if op == 0x73 else K_LIST
            if sp < k + 1 or kind[stack[sp - k - 1]] != want or (mp > 0 and marks[mp - 1] > sp - k - 1):
                status = E_STACK
                break
            if ne + k > cap:
                status = E_CAPACITY
                break
            if op == 0x73 and not _hashable(kind, val, stack[sp - 2]):
                status = E_UNHASHABLE
                break
            ne, st = _link(
                stack[sp - k - 1],
                stack,
                sp - k,
                sp,
                size,
                first_edge,
                last_edge,
                edge_node,
                edge_next,
                ne,
                depth,
                esize,
                sealed,
                max_expand,
            )
            if st != OK:
                status = st
                break
            sp -= k
        elif op == 0x4D:  # BININT2
            if 2 > n - pos:
                status = E_TRUNCATED
                break
            new_kind, new_val = K_INT, _le(buf, pos, 2)
            pos += 2
        elif op == 0x4B:  # BININT1
            if 1 > n - pos:
                status = E_TRUNCATED
                break
            new_kind, new_val = K_INT, np.int64(buf[pos])
            pos += 1
        elif op == 0x8A:  # LONG1: signed little-endian, length byte first
            if 1 > n - pos:
                status = E_TRUNCATED
                break
            k = np.int64(buf[pos])
            pos += 1
            if k > n - pos:
                status = E_TRUNCATED
                break
            if k > 8:
                new_kind = K_BIGINT
            else:
                v = _le(buf, pos, k)
                if 0 < k < 8 and buf[pos + k - 1] >= 128:
                    v -= np.int64(1) << np.int64(8 * k)
                new_kind, new_val = K_INT, v
            pos += k
        elif op == 0x28:  # MARK
            if mp >= cap:
                status = E_CAPACITY
                break
            marks[mp] = sp
            mp += 1
        elif op == 0x58 or op == 0x8C or op == 0x8D:  # BINUNICODE, SHORT_BINUNICODE, BINUNICODE8
            w = 4 if op == 0x58 else (1 if op == 0x8C else 8)
            if w > n - pos:
                status = E_TRUNCATED
                break
            length = _le(buf, pos, w)
            pos += w
            if length < 0 or length > n - pos:  # compare with what is left: pos + length can overflow
                status = E_TRUNCATED
                break
            if not _utf8_ok(buf, pos, pos + length):  # the unpickler refuses what is not UTF-8
                status = E_UTF8
                break
            if nn >= cap:
                status = E_CAPACITY
                break
            new_kind, new_val = K_STR, np.int64(pos)
            size[nn] = length
            pos += length
        elif op == 0x7D:  # EMPTY_DICT
            new_kind = K_DICT
        elif op == 0x75 or op == 0x65:  # SETITEMS, APPENDS: items since the mark go to the container below it
            if mp == 0:
                status = E_STACK
                break
            mp -= 1
            m = marks[mp]
            want = K_DICT if op == 0x75 else K_LIST
            if (
                m < 1
                or kind[stack[m - 1]] != want
                or (op == 0x75 and (sp - m) % 2 == 1)
                or (mp > 0 and marks[mp - 1] > m - 1)
            ):
                status = E_STACK
                break
            if ne + (sp - m) > cap:
                status = E_CAPACITY
                break
            if op == 0x75:
                for i in range(m, sp, 2):
                    if not _hashable(kind, val, stack[i]):
                        status = E_UNHASHABLE
                        break
                if status == E_UNHASHABLE:
                    break
            ne, st = _link(
                stack[m - 1],
                stack,
                m,
                sp,
                size,
                first_edge,
                last_edge,
                edge_node,
                edge_next,
                ne,
                depth,
                esize,
                sealed,
                max_expand,
            )
            if st != OK:
                status = st
                break
            sp = m
        elif op == 0x88 or op == 0x89:  # NEWTRUE, NEWFALSE
            new_kind, new_val = K_BOOL, np.int64(1 if op == 0x88 else 0)
        elif op == 0x4A:  # BININT (signed 32-bit)
            if 4 > n - pos:
                status = E_TRUNCATED
                break
            v = _le(buf, pos, 4)
            if v >= 2147483648:
                v -= 4294967296
            new_kind, new_val = K_INT, v
            pos += 4
        elif op == 0x4E:  # NONE
            new_kind = K_NONE
        elif op == 0x74 or op == 0x85 or op == 0x86 or op == 0x87:  # TUPLE, TUPLE1..3
            if op == 0x74:
                if mp == 0:
                    status = E_STACK
                    break
                mp -= 1
                m = marks[mp]
            else:
                m = sp - (op - 0x84)
            if m < 0 or (mp > 0 and marks[mp - 1] > m):
                status = E_STACK
                break
            if nn >= cap or ne + (sp - m) > cap:
                status = E_CAPACITY
                break
            t = nn
            kind[t] = K_TUPLE
            val[t] = 0  # 1: holds something unhashable (a tuple is hashed as a dict key)
            for i in range(m, sp):
                if not _hashable(kind, val, stack[i]):
                    val[t] = 1
            size[t] = 0
            depth[t] = 1
            esize[t] = 1
            sealed[t] = False
            nn += 1
            ne, st = _link(
                t, stack, m, sp, size, first_edge, last_edge, edge_node, edge_next, ne, depth, esize, sealed, max_expand
            )
            if st != OK:
                status = st
                break
            sp = m
            stack[sp] = t
            sp += 1
        elif op == 0x29:  # EMPTY_TUPLE
            new_kind = K_TUPLE
        elif op == 0x47:  # BINFLOAT (value not needed by any caller)
            if 8 > n - pos:
                status = E_TRUNCATED
                break
            new_kind = K_FLOAT
            pos += 8
        elif op == 0x80:  # PROTO
            if 1 > n - pos:
                status = E_TRUNCATED
                break
            if buf[pos] > 5:  # the unpickler refuses protocols it does not know
                status = E_OPCODE
                break
            pos += 1
        elif op == 0x95:  # FRAME: its length must fit in what is left
            if 8 > n - pos:
                status = E_TRUNCATED
                break
            length = _le(buf, pos, 8)
            pos += 8
            if length < 0 or length > n - pos:
                status = E_TRUNCATED
                break
        elif op == 0x2E:  # STOP
            if sp != 1 or mp != 0:
                status = E_STACK
            else:
                status = OK
                root = stack[0]
            break
        else:
            status = E_OPCODE
            break
        if new_kind >= 0:
            if nn >= cap or sp >= cap:
                status = E_CAPACITY
                break
            kind[nn] = new_kind
            val[nn] = new_val
            if new_kind != K_STR:
                size[nn] = 0
            depth[nn] = 1 if (new_kind == K_LIST or new_kind == K_TUPLE or new_kind == K_DICT) else 0
            esize[nn] = 1
            sealed[nn] = False
            stack[sp] = nn
            sp += 1
            nn += 1
    if status != OK:
        root = at  # where it stopped, for the message
    return status, root, nn, ne


class Nodes:
    """The decoded table of one pickle (see the module docstring)."""

    __slots__ = ("buf", "root", "kind", "val", "size", "first_edge", "edge_node", "edge_next")

    def __init__(self, buf, root, kind, val, size, first_edge, edge_node, edge_next):
        self.buf, self.root, self.kind, self.val, self.size = buf, root, kind, val, size
        self.first_edge, self.edge_node, self.edge_next = first_edge, edge_node, edge_next

    def children(self, node: int) -> list[int]:
        """Child node ids of a container, in order (for a dict: key, value, key, value ...)."""
        out = []
        if int(self.size[node]) == 0:
            return out
        e = int(self.first_edge[node])
        while e >= 0:
            out.append(int(self.edge_node[e]))
            e = int(self.edge_next[e])
        return out

    def text(self, node: int) -> str:
        start = int(self.val[node])
        return bytes(self.buf[start : start + int(self.size[node])]).decode("utf-8", "surrogatepass")

    def items(self, node: int) -> list[tuple[int, int]]:
        """(key node, value node) pairs of a dict node."""
        ch = self.children(node)
        return list(zip(ch[0::2], ch[1::2]))

    def to_python(self, node: int, _memo: dict | None = None):
        """The value as Python objects, as ``pickle.loads`` would build it (for small subtrees:
        the parts of a dump other than its entries). A value shared in the pickle is one object
        here too (built once, so a pickle of shared sub-lists costs its distinct values, not its
        expansion). Big integers and floats are not kept: :class:`ValueError`; no FR field
        outside the entries uses them. Recursion is bounded: :func:`decode` refuses values nested
        deeper than :data:`MAX_DEPTH` and values that contain themselves."""
        memo = {} if _memo is None else _memo
        got = memo.get(node)
        if got is not None:
            return got[0]
        k = int(self.kind[node])
        if k == K_NONE:
            out = None
        elif k == K_BOOL:
            out = bool(self.val[node])
        elif k == K_INT:
            out = int(self.val[node])
        elif k == K_STR:
            out = self.text(node)
        elif k == K_LIST:
            out = [self.to_python(c, memo) for c in self.children(node)]
        elif k == K_TUPLE:
            out = tuple(self.to_python(c, memo) for c in self.children(node))
        elif k == K_DICT:
            out = {self.to_python(a, memo): self.to_python(b, memo) for a, b in self.items(node)}
        else:
            raise ValueError("value kind not kept by the node decoder")
        memo[node] = (out,)
        return out


class Workspace:
    """Arrays :func:`_decode` writes into, kept between dumps and grown when one needs more.

    Why: in a VM a first touch of fresh memory (a page fault) costs microseconds, and a table
    allocated per dump faults in megabytes each time; reusing one workspace makes decoding
    ~2x faster. A :class:`Nodes` decoded into a workspace is only valid until the workspace's
    next decode; :func:`decode` without one allocates fresh arrays and is always safe."""

    _SPEC = (
        ("kind", np.int8),
        ("val", np.int64),
        ("size", np.int32),
        ("first_edge", np.int32),
        ("last_edge", np.int32),
        ("edge_node", np.int32),
        ("edge_next", np.int32),
        ("stack", np.int32),
        ("marks", np.int32),
        ("memo", np.int32),
        ("depth", np.int8),
        ("esize", np.int64),
        ("sealed", np.bool_),
    )

    def __init__(self, capacity: int = 0):
        self.capacity = -1
        self.ensure(capacity)

    def ensure(self, capacity: int) -> None:
        if capacity > self.capacity:
            self.capacity = capacity
            self.arrays = tuple(np.empty(capacity, dtype=dt) for _, dt in self._SPEC)


def decode(data: bytes, workspace: Workspace | None = None) -> Nodes | tuple[int, int]:
    """Decode a pickle: a :class:`Nodes` table, or ``(status, position)`` when the decoder stops
    (an opcode outside plain data, truncation ...: the caller then uses the ordinary unpickler; or
    a bound in :data:`REFUSALS`: the caller refuses the dump)."""
    buf = np.frombuffer(data, dtype=np.uint8)
    ws = workspace or Workspace()
    max_expand = np.int64(expansion_cap(len(data)))
    # a first guess of the table size (FR dumps hold ~1 value and ~2 edges per 9 bytes); the rare
    # pickle denser than that is decoded again with the bound that always holds (every value,
    # every edge, every memo slot costs at least one opcode byte)
    kernel = native.decode if backend() == "native" else None
    if kernel is None:
        jit_kernels()
        kernel = _decode
    for capacity in (len(data) // 2 + 1024, len(data) + 2):
        ws.ensure(capacity)
        status, root, nn, ne = kernel(buf, max_expand, *ws.arrays)
        if status != E_CAPACITY:
            break
    if status != OK:
        return int(status), int(root)
    kind, val, size, first_edge, _, edge_node, edge_next = ws.arrays[:7]
    return Nodes(buf, int(root), kind[:nn], val[:nn], size[:nn], first_edge[:nn], edge_node[:ne], edge_next[:ne])


def message(status: int, position: int) -> str:
    """One line saying why a pickle was declined or refused."""
    return f"{ERRORS.get(status, f'status {status}')} at byte {position}"
