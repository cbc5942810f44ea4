"""A pickle decoded into a flat node table, compiled with numba: no Python object per value.

Why: a Flight Recorder dump of 2000 entries unpickles into ~100 000 Python objects (a dict per
entry, a list per shape, an int per field), and for 1024 dumps building and freeing those objects
costs more than everything else denpex does with them. :func:`decode` walks the opcode stream once
and records every value as a row of numpy arrays instead:

* ``kind[i]``: one of the ``K_*`` constants below; ``val[i]``: the integer, bool, or for strings
  the byte offset of the UTF-8 text in the buffer (``size[i]`` its length);
* containers (list, tuple, dict) own a chain of *edges* (``first_edge[i]`` -> ``edge_next``), each
  pointing at a child node (``edge_node``); a dict's children alternate key, value. A value the
  pickle shares through its memo (``BINGET``) is one node with several parents, as in Python.

Safety: only data opcodes are understood (containers, ints, floats, bools, None, strings, memo,
framing). Any other opcode (``GLOBAL``, ``STACK_GLOBAL``, ``REDUCE``, ``BUILD``, persistent ids,
bytes ...) stops the decoder with :data:`E_OPCODE` before anything is built from it; callers then
fall back to :class:`~denpex_nb.ingest.flight_recorder.RestrictedUnpickler`, which refuses globals.
Nothing is ever executed.

Without numba installed :data:`AVAILABLE` is False and callers use the ordinary unpickler (the
functions here would still run as plain Python, far too slowly to be worth it).
"""
from __future__ import annotations

import numpy as np

try:                                    # numba is the optional "fast" extra
    from numba import njit
    AVAILABLE = True
except ImportError:                     # pragma: no cover - exercised where numba is absent
    AVAILABLE = False

    def njit(*args, **kwargs):
        if args and callable(args[0]):
            return args[0]
        return lambda f: f

# node kinds
K_NONE, K_BOOL, K_INT, K_BIGINT, K_FLOAT, K_STR, K_LIST, K_TUPLE, K_DICT = range(9)
CONTAINERS = (K_LIST, K_TUPLE, K_DICT)

# decoder status
OK, E_OPCODE, E_TRUNCATED, E_STACK, E_MEMO, E_NO_STOP, E_CAPACITY = range(7)
ERRORS = {E_OPCODE: "an opcode outside plain data", E_TRUNCATED: "truncated", E_STACK: "malformed stack",
          E_MEMO: "memo reference to nothing", E_NO_STOP: "no STOP opcode",
          E_CAPACITY: "more values than the first guess"}


@njit(cache=True, nogil=True)
def _le(buf, pos, k):
    """Unsigned little-endian integer of ``k`` (<= 8) bytes at ``pos``."""
    v = np.int64(0)
    for i in range(k):
        v |= np.int64(buf[pos + i]) << np.int64(8 * i)
    return v


@njit(cache=True, nogil=True)
def _memo_arg(buf, pos, width):
    """A memo index: one byte (BINGET/BINPUT, the hot case, read directly) or four."""
    return np.int64(buf[pos]) if width == 1 else _le(buf, pos, 4)


@njit(cache=True, nogil=True)
def _link(container, stack, lo, hi, size, first_edge, last_edge, edge_node, edge_next, ne):
    """Append ``stack[lo:hi]`` to ``container``'s children; returns the new edge count."""
    for i in range(lo, hi):
        edge_node[ne] = stack[i]
        edge_next[ne] = -1
        if size[container] == 0:
            first_edge[container] = ne
        else:
            edge_next[last_edge[container]] = ne
        last_edge[container] = ne
        size[container] += 1
        ne += 1
    return ne


@njit(cache=True, nogil=True)
def _decode(buf, kind, val, size, first_edge, last_edge, edge_node, edge_next, stack, marks, memo):
    n = buf.size
    cap = kind.size                      # nodes, edges, stack, marks and memo all have this room
    memo_hi = -1                         # memo[:memo_hi + 1] is initialised (filled as it grows, not up front)
    nn = 0       # nodes
    ne = 0       # edges
    sp = 0       # stack depth
    mp = 0       # mark depth
    memo_len = 0
    pos = 0
    status = E_NO_STOP
    root = -1
    while pos < n:
        op = buf[pos]
        at = pos
        pos += 1
        new_kind = -1
        new_val = np.int64(0)
        if op == 0x68 or op == 0x6A:       # BINGET, LONG_BINGET
            w = 1 if op == 0x68 else 4
            if pos + w > n:
                status = E_TRUNCATED
                break
            idx = _memo_arg(buf, pos, w)
            pos += w
            if idx >= cap or sp >= cap:
                status = E_CAPACITY if cap < n + 2 else E_MEMO
                break
            if idx > memo_hi or memo[idx] < 0:
                status = E_MEMO
                break
            stack[sp] = memo[idx]
            sp += 1
        elif op == 0x71 or op == 0x72 or op == 0x94:   # BINPUT, LONG_BINPUT, MEMOIZE
            if op == 0x94:
                idx = np.int64(memo_len)
            else:
                w = 1 if op == 0x71 else 4
                if pos + w > n:
                    status = E_TRUNCATED
                    break
                idx = _memo_arg(buf, pos, w)
                pos += w
            if sp == 0 or (mp > 0 and marks[mp - 1] == sp):
                status = E_STACK
                break
            if idx >= cap:
                status = E_CAPACITY if cap < n + 2 else E_MEMO
                break
            while memo_hi < idx:
                memo_hi += 1
                memo[memo_hi] = -1
            if memo[idx] < 0:
                memo_len += 1
            memo[idx] = stack[sp - 1]
        elif op == 0x5D:                     # EMPTY_LIST
            new_kind = K_LIST
        elif op == 0x73 or op == 0x61:       # SETITEM, APPEND
            k = 2 if op == 0x73 else 1
            want = K_DICT if op == 0x73 else K_LIST
            if sp < k + 1 or kind[stack[sp - k - 1]] != want or (mp > 0 and marks[mp - 1] > sp - k - 1):
                status = E_STACK
                break
            if ne + k > cap:
                status = E_CAPACITY
                break
            ne = _link(stack[sp - k - 1], stack, sp - k, sp, size, first_edge, last_edge, edge_node, edge_next, ne)
            sp -= k
        elif op == 0x4D:                     # BININT2
            if pos + 2 > n:
                status = E_TRUNCATED
                break
            new_kind, new_val = K_INT, _le(buf, pos, 2)
            pos += 2
        elif op == 0x4B:                     # BININT1
            if pos + 1 > n:
                status = E_TRUNCATED
                break
            new_kind, new_val = K_INT, np.int64(buf[pos])
            pos += 1
        elif op == 0x8A:                     # LONG1: signed little-endian, length byte first
            if pos + 1 > n:
                status = E_TRUNCATED
                break
            k = np.int64(buf[pos])
            pos += 1
            if pos + k > n:
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
        elif op == 0x28:                     # MARK
            if mp >= cap:
                status = E_CAPACITY
                break
            marks[mp] = sp
            mp += 1
        elif op == 0x58 or op == 0x8C or op == 0x8D:   # BINUNICODE, SHORT_BINUNICODE, BINUNICODE8
            w = 4 if op == 0x58 else (1 if op == 0x8C else 8)
            if pos + w > n:
                status = E_TRUNCATED
                break
            length = _le(buf, pos, w)
            pos += w
            if length < 0 or pos + length > n:
                status = E_TRUNCATED
                break
            if nn >= cap:
                status = E_CAPACITY
                break
            new_kind, new_val = K_STR, np.int64(pos)
            size[nn] = length
            pos += length
        elif op == 0x7D:                     # EMPTY_DICT
            new_kind = K_DICT
        elif op == 0x75 or op == 0x65:       # SETITEMS, APPENDS: items since the mark go to the container below it
            if mp == 0:
                status = E_STACK
                break
            mp -= 1
            m = marks[mp]
            want = K_DICT if op == 0x75 else K_LIST
            if m < 1 or kind[stack[m - 1]] != want or (op == 0x75 and (sp - m) % 2 == 1):
                status = E_STACK
                break
            if ne + (sp - m) > cap:
                status = E_CAPACITY
                break
            ne = _link(stack[m - 1], stack, m, sp, size, first_edge, last_edge, edge_node, edge_next, ne)
            sp = m
        elif op == 0x88 or op == 0x89:       # NEWTRUE, NEWFALSE
            new_kind, new_val = K_BOOL, np.int64(1 if op == 0x88 else 0)
        elif op == 0x4A:                     # BININT (signed 32-bit)
            if pos + 4 > n:
                status = E_TRUNCATED
                break
            v = _le(buf, pos, 4)
            if v >= 2147483648:
                v -= 4294967296
            new_kind, new_val = K_INT, v
            pos += 4
        elif op == 0x4E:                     # NONE
            new_kind = K_NONE
        elif op == 0x74 or op == 0x85 or op == 0x86 or op == 0x87:   # TUPLE, TUPLE1..3
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
            size[t] = 0
            nn += 1
            ne = _link(t, stack, m, sp, size, first_edge, last_edge, edge_node, edge_next, ne)
            sp = m
            stack[sp] = t
            sp += 1
        elif op == 0x29:                     # EMPTY_TUPLE
            new_kind = K_TUPLE
        elif op == 0x47:                     # BINFLOAT (value not needed by any caller)
            if pos + 8 > n:
                status = E_TRUNCATED
                break
            new_kind = K_FLOAT
            pos += 8
        elif op == 0x80:                     # PROTO
            pos += 1
        elif op == 0x95:                     # FRAME
            pos += 8
        elif op == 0x2E:                     # STOP
            if sp != 1 or mp != 0:
                status = E_STACK
            else:
                status = OK
                root = stack[0]
            break
        else:
            status = E_OPCODE
            root = at                        # where, for the message
            break
        if pos > n:
            status = E_TRUNCATED
            break
        if new_kind >= 0:
            if nn >= cap or sp >= cap:
                status = E_CAPACITY
                break
            kind[nn] = new_kind
            val[nn] = new_val
            if new_kind != K_STR:
                size[nn] = 0
            stack[sp] = nn
            sp += 1
            nn += 1
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
        return bytes(self.buf[start:start + int(self.size[node])]).decode("utf-8", "surrogatepass")

    def items(self, node: int) -> list[tuple[int, int]]:
        """(key node, value node) pairs of a dict node."""
        ch = self.children(node)
        return list(zip(ch[0::2], ch[1::2]))

    def to_python(self, node: int, _path: frozenset = frozenset()):
        """The value as Python objects, as ``pickle.loads`` would build it (for small subtrees:
        the parts of a dump other than its entries). Big integers, floats and values that contain
        themselves (a pickle can build a list holding itself) are not kept: :class:`ValueError`;
        no FR field outside the entries uses them."""
        k = int(self.kind[node])
        if k == K_NONE:
            return None
        if k == K_BOOL:
            return bool(self.val[node])
        if k == K_INT:
            return int(self.val[node])
        if k == K_STR:
            return self.text(node)
        if node in _path:
            raise ValueError("a value that contains itself")
        inner = _path | {node}
        if k == K_LIST:
            return [self.to_python(c, inner) for c in self.children(node)]
        if k == K_TUPLE:
            return tuple(self.to_python(c, inner) for c in self.children(node))
        if k == K_DICT:
            return {self.to_python(a, inner): self.to_python(b, inner) for a, b in self.items(node)}
        raise ValueError("value kind not kept by the node decoder")


class Workspace:
    """Arrays :func:`_decode` writes into, kept between dumps and grown when one needs more.

    Why: in a VM a first touch of fresh memory (a page fault) costs microseconds, and a table
    allocated per dump faults in megabytes each time; reusing one workspace makes decoding
    ~2x faster. A :class:`Nodes` decoded into a workspace is only valid until the workspace's
    next decode; :func:`decode` without one allocates fresh arrays and is always safe."""

    _SPEC = (("kind", np.int8), ("val", np.int64), ("size", np.int32), ("first_edge", np.int32),
             ("last_edge", np.int32), ("edge_node", np.int32), ("edge_next", np.int32), ("stack", np.int32),
             ("marks", np.int32), ("memo", np.int32))

    def __init__(self, capacity: int = 0):
        self.capacity = -1
        self.ensure(capacity)

    def ensure(self, capacity: int) -> None:
        if capacity > self.capacity:
            self.capacity = capacity
            self.arrays = tuple(np.empty(capacity, dtype=dt) for _, dt in self._SPEC)


def decode(data: bytes, workspace: Workspace | None = None) -> Nodes | tuple[int, int]:
    """Decode a pickle: a :class:`Nodes` table, or ``(status, position)`` when the decoder stops
    (an opcode outside plain data, truncation ...): the caller then uses the ordinary unpickler."""
    buf = np.frombuffer(data, dtype=np.uint8)
    ws = workspace or Workspace()
    # a first guess of the table size (FR dumps hold ~1 value and ~2 edges per 9 bytes); the rare
    # pickle denser than that is decoded again with the bound that always holds (every value and
    # every edge costs at least one opcode byte)
    for capacity in (len(data) // 2 + 1024, len(data) + 2):
        ws.ensure(capacity)
        status, root, nn, ne = _decode(buf, *ws.arrays)
        if status != E_CAPACITY:
            break
    if status != OK:
        return int(status), int(root)
    kind, val, size, first_edge, _, edge_node, edge_next = ws.arrays[:7]
    return Nodes(buf, int(root), kind[:nn], val[:nn], size[:nn], first_edge[:nn], edge_node[:ne], edge_next[:ne])
