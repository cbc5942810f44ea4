"""Flight Recorder entries -> event columns straight from a decoded node table (numba).

:mod:`.pickle_nodes` turns a dump into flat arrays; :func:`_entry_columns` (compiled) walks the
``entries`` list once and fills one numpy array per declared key (:data:`.fr_fields.ENTRY_FIELDS`:
its key table and row counts come from there), interning shapes and strings as it goes, so a
2000-entry dump becomes ~15 arrays, a table of its few distinct shapes and its few distinct texts,
each decoded once. That is the extraction step only: the result is a
:class:`.fr_fields.EntryArrays`, and :func:`.fr_fields.event_columns` maps it to columns, the same
function the unpickler path (:func:`.flight_recorder.dump_to_columns`) uses.

Anything the compiled walker does not expect (an entry that is not a dict, a float where an int
belongs, a big integer, a hash collision between two shapes) makes :func:`fast_dump_columns`
return ``None``, and the caller takes the ordinary path: the fast path may decline, never guess.
A dump past the decoder's bounds (nesting, memo, expansion: see :mod:`.pickle_nodes`) is refused,
not declined. Every walk here is iterative and visits each value at most once per reference, so
its cost is bounded by the expanded size the decoder already capped.

Loading it costs ~1-2 s per process (numba's import and its on-disk cache), so it is used only
where that pays (``DENPEX_FR_DECODER``, :data:`.flight_recorder.COMPILED_MIN_BYTES`).
"""

from __future__ import annotations

import threading

import numpy as np

from . import fr_fields as ff
from . import pickle_nodes as pn
from .flight_recorder import MIN_EXPANSION, REFUSALS, compiled_failed, dump_to_columns, refusal
from .pickle_nodes import K_BOOL, K_DICT, K_INT, K_LIST, K_NONE, K_STR, K_TUPLE, njit

#: the walker's key table, generated from :data:`.fr_fields.ENTRY_FIELDS` (kinds in their order:
#: ints, bools, strings, process_group, input_dtypes, input_sizes, output_sizes). The counts are
#: passed to the compiled walker as arguments, never read as globals: numba freezes globals into
#: its on-disk cache, which a change to fr_fields.py would not invalidate.
KEYS = ff.KEYS
_KEY_BYTES = np.frombuffer("".join(KEYS).encode(), dtype=np.uint8)
_KEY_LEN = np.array([len(k) for k in KEYS], dtype=np.int64)
_KEY_START = np.concatenate([[0], np.cumsum(_KEY_LEN)[:-1]]).astype(np.int64)
_N_INT, _N_BOOL, _N_STR = len(ff.INT_KEYS), len(ff.BOOL_KEYS), len(ff.STR_KEYS)

OK, DECLINE = 0, 1
_NUMEL_LIMIT = np.int64(1) << np.int64(62)


@njit(cache=True, nogil=True)
def _key_id(buf, val, size, node, key_bytes, key_start, key_len):
    start = val[node]
    length = size[node]
    for k in range(key_len.size):
        if key_len[k] != length:
            continue
        same = True
        for i in range(length):
            if buf[start + i] != key_bytes[key_start[k] + i]:
                same = False
                break
        if same:
            return k
    return -1


@njit(cache=True, nogil=True)
def _slot(table_hash, table_val, h):
    """Open addressing (linear probing) in a power-of-two table: the slot holding hash ``h``, or
    the empty slot (``table_val == -1``) where it belongs. Plain arrays: several times cheaper
    per lookup than a numba typed dict."""
    mask = table_hash.size - 1
    x = h ^ (h >> np.int64(29))
    x = x * np.int64(-4658895280553007687)
    i = (x ^ (x >> np.int64(32))) & mask
    while table_val[i] != -1 and table_hash[i] != h:
        i = (i + 1) & mask
    return i


@njit(cache=True, nogil=True)
def _canonical_string(buf, val, size, node, canon, canon_stamp, gen, str_hash, str_val, dense_nodes, n_dense):
    """The dense id (0, 1, 2 ... in first-seen order) of string ``node``'s text, -1 on a hash
    collision between two different texts. Pickles written by Python repeat equal strings built at
    run time (a profiling name per entry); this makes them one value, so the Python side decodes
    a handful of texts, not 2000, and turns ids into categorical codes with one ``take``."""
    if canon_stamp[node] == gen:
        return canon[node]
    start = val[node]
    length = size[node]
    h = np.int64(length) * np.int64(1000003)
    for i in range(length):
        h = (h ^ np.int64(buf[start + i])) * np.int64(1099511628211)
    slot = _slot(str_hash, str_val, h)
    if str_val[slot] != -1:
        c = str_val[slot]
        first = dense_nodes[c]
        if size[first] != length:
            return -1
        other = val[first]
        for i in range(length):
            if buf[other + i] != buf[start + i]:
                return -1
    else:
        c = n_dense[0]
        n_dense[0] += 1
        dense_nodes[c] = node
        str_hash[slot] = h
        str_val[slot] = c
    canon[node] = c
    canon_stamp[node] = gen
    return c


@njit(cache=True, nogil=True)
def _shape_hash(kind, val, size, first_edge, edge_node, edge_next, node):
    """(kinds ok, hash, numel) of a list of dim lists; numel as ``Σ prod(dims)`` with an overflow guard."""
    h = np.int64(size[node]) * np.int64(1000003)
    numel = np.int64(0)
    te = first_edge[node] if size[node] > 0 else -1
    while te >= 0:
        tn = edge_node[te]
        te = edge_next[te]
        if kind[tn] != K_LIST and kind[tn] != K_TUPLE:
            return False, h, numel
        h = (h ^ np.int64(size[tn])) * np.int64(1099511628211)
        p = np.int64(1)
        de = first_edge[tn] if size[tn] > 0 else -1
        while de >= 0:
            dn = edge_node[de]
            de = edge_next[de]
            if kind[dn] != K_INT:
                return False, h, numel
            d = val[dn]
            h = (h ^ d) * np.int64(1099511628211)
            if d != 0 and (p > _NUMEL_LIMIT // abs(d) or p < -_NUMEL_LIMIT // abs(d)):
                return False, h, numel
            p *= d
        numel += p
        if abs(numel) > _NUMEL_LIMIT:
            return False, h, numel
    return True, h, numel


@njit(cache=True, nogil=True)
def _same_shape(val, size, first_edge, edge_node, edge_next, node, sid, dims, t_start, t_ndim, s_start, s_count):
    """Does list-of-dim-lists ``node`` equal interned shape ``sid``, dim for dim?"""
    if s_count[sid] != size[node]:
        return False
    ti = s_start[sid]
    te = first_edge[node] if size[node] > 0 else -1
    while te >= 0:
        tn = edge_node[te]
        te = edge_next[te]
        if t_ndim[ti] != size[tn]:
            return False
        k = t_start[ti]
        de = first_edge[tn] if size[tn] > 0 else -1
        while de >= 0:
            if dims[k] != val[edge_node[de]]:
                return False
            k += 1
            de = edge_next[de]
        ti += 1
    return True


@njit(cache=True, nogil=True)
def _store_shape(val, size, first_edge, edge_node, edge_next, node, dims, t_start, t_ndim, n_dims, n_tensors):
    """Append ``node``'s tensors to the shape table: (room was enough, n_dims, n_tensors)."""
    cap = dims.size
    te = first_edge[node] if size[node] > 0 else -1
    while te >= 0:
        tn = edge_node[te]
        te = edge_next[te]
        if n_dims + size[tn] > cap:
            return False, n_dims, n_tensors
        t_start[n_tensors] = n_dims
        t_ndim[n_tensors] = size[tn]
        de = first_edge[tn] if size[tn] > 0 else -1
        while de >= 0:
            dims[n_dims] = val[edge_node[de]]
            n_dims += 1
            de = edge_next[de]
        n_tensors += 1
    return True, n_dims, n_tensors


@njit(cache=True, nogil=True)
def _entry_columns(
    buf,
    kind,
    val,
    size,
    first_edge,
    edge_node,
    edge_next,
    entries,
    key_bytes,
    key_start,
    key_len,
    gen,
    key_cache,
    key_stamp,
    canon,
    canon_stamp,
    dims,
    t_start,
    t_ndim,
    s_start,
    s_count,
    s_numel,
    dense_nodes,
    str_hash,
    str_val,
    shape_hash,
    shape_val,
    n_int,
    n_bool,
    n_str,
):
    # key ids: [0, n_int) ints, then n_bool bools, n_str strings, process_group, input_dtypes,
    # input_sizes, output_sizes; string rows: the n_str keys, then group name, desc, first dtype
    k_pg = n_int + n_bool + n_str
    k_dtypes = k_pg + 1
    k_in = k_pg + 2
    s_pg0 = n_str
    s_pg1 = n_str + 1
    s_dtype = n_str + 2
    n = size[entries]
    ints = np.zeros((n_int, n), np.int64)
    int_ok = np.zeros((n_int, n), np.bool_)
    bools = np.full((n_bool, n), -1, np.int8)
    strs = np.full((n_str + 3, n), -1, np.int32)
    shapes = np.full((2, n), -1, np.int64)
    cap = dims.size
    n_dims = 0
    n_tensors = 0
    n_shapes = 0
    str_val[:] = -1  # hash tables: text hash -> first string node, shape hash -> shape id
    shape_val[:] = -1
    n_dense = np.zeros(1, np.int64)
    status = OK
    e = first_edge[entries] if n > 0 else -1
    row = 0
    while e >= 0 and status == OK:
        ent = edge_node[e]
        e = edge_next[e]
        if kind[ent] != K_DICT:
            status = DECLINE
            break
        pe = first_edge[ent] if size[ent] > 0 else -1
        while pe >= 0:
            kn = edge_node[pe]
            pe = edge_next[pe]
            vn = edge_node[pe]
            pe = edge_next[pe]
            if kind[kn] != K_STR:  # key must be a string
                status = DECLINE
                break
            if key_stamp[kn] == gen:  # caches are valid for this call's stamp only: no reset
                kid = key_cache[kn]
            else:
                kid = _key_id(buf, val, size, kn, key_bytes, key_start, key_len)
                key_cache[kn] = kid
                key_stamp[kn] = gen
            if kid < 0:
                continue
            vk = kind[vn]
            if kid < n_int:
                if vk == K_INT:
                    ints[kid, row] = val[vn]
                    int_ok[kid, row] = True
                elif vk == K_NONE:
                    int_ok[kid, row] = False
                else:
                    status = DECLINE
                    break
            elif kid < n_int + n_bool:
                if vk == K_BOOL:
                    bools[kid - n_int, row] = val[vn]
                elif vk == K_NONE:
                    bools[kid - n_int, row] = -1
                else:
                    status = DECLINE
                    break
            elif kid < k_pg:
                if vk == K_STR:
                    c = _canonical_string(
                        buf, val, size, vn, canon, canon_stamp, gen, str_hash, str_val, dense_nodes, n_dense
                    )
                    if c < 0:
                        status = DECLINE
                        break
                    strs[kid - n_int - n_bool, row] = c
                elif vk == K_NONE:
                    strs[kid - n_int - n_bool, row] = -1
                else:
                    status = DECLINE
                    break
            elif kid == k_pg:  # process_group: (name, desc)
                strs[s_pg0, row] = -1
                strs[s_pg1, row] = -1
                if (vk == K_LIST or vk == K_TUPLE) and size[vn] >= 1:
                    g = first_edge[vn]
                    a = edge_node[g]
                    if kind[a] != K_STR:
                        status = DECLINE
                        break
                    a = _canonical_string(
                        buf, val, size, a, canon, canon_stamp, gen, str_hash, str_val, dense_nodes, n_dense
                    )
                    if a < 0:
                        status = DECLINE
                        break
                    strs[s_pg0, row] = a
                    if size[vn] >= 2:
                        b = edge_node[edge_next[g]]
                        if kind[b] == K_STR:
                            b = _canonical_string(
                                buf, val, size, b, canon, canon_stamp, gen, str_hash, str_val, dense_nodes, n_dense
                            )
                            if b < 0:
                                status = DECLINE
                                break
                            strs[s_pg1, row] = b
                        elif kind[b] != K_NONE:
                            status = DECLINE
                            break
                elif vk != K_NONE and not ((vk == K_LIST or vk == K_TUPLE) and size[vn] == 0):
                    status = DECLINE
                    break
            elif kid == k_dtypes:  # input_dtypes: first one
                strs[s_dtype, row] = -1
                if (vk == K_LIST or vk == K_TUPLE) and size[vn] >= 1:
                    a = edge_node[first_edge[vn]]
                    if kind[a] != K_STR:
                        status = DECLINE
                        break
                    a = _canonical_string(
                        buf, val, size, a, canon, canon_stamp, gen, str_hash, str_val, dense_nodes, n_dense
                    )
                    if a < 0:
                        status = DECLINE
                        break
                    strs[s_dtype, row] = a
                elif vk != K_NONE and not (vk == K_LIST or vk == K_TUPLE):
                    status = DECLINE
                    break
            else:  # input_sizes / output_sizes -> interned shape id
                which = kid - k_in
                if vk == K_NONE:
                    shapes[which, row] = -1
                    continue
                if vk != K_LIST and vk != K_TUPLE:
                    status = DECLINE
                    break
                ok, h, numel = _shape_hash(kind, val, size, first_edge, edge_node, edge_next, vn)
                if not ok:
                    status = DECLINE
                    break
                slot = _slot(shape_hash, shape_val, h)
                sid = shape_val[slot]
                if sid >= 0:
                    if not _same_shape(
                        val, size, first_edge, edge_node, edge_next, vn, sid, dims, t_start, t_ndim, s_start, s_count
                    ):
                        status = DECLINE  # a hash collision: decline rather than guess
                        break
                else:
                    sid = n_shapes
                    if n_shapes >= cap or n_tensors + size[vn] > cap:
                        status = DECLINE
                        break
                    s_start[sid] = n_tensors
                    s_count[sid] = size[vn]
                    s_numel[sid] = numel
                    ok, n_dims, n_tensors = _store_shape(
                        val, size, first_edge, edge_node, edge_next, vn, dims, t_start, t_ndim, n_dims, n_tensors
                    )
                    if not ok:
                        status = DECLINE
                        break
                    shape_hash[slot] = h
                    shape_val[slot] = sid
                    n_shapes += 1
                shapes[which, row] = sid
        row += 1
    return (
        status,
        ints,
        int_ok,
        bools,
        strs,
        shapes,
        dims[:n_dims],
        t_start[:n_tensors],
        t_ndim[:n_tensors],
        s_start[:n_shapes],
        s_count[:n_shapes],
        s_numel[:n_shapes],
        dense_nodes[: n_dense[0]],
    )


class Scratch:
    """Per-thread working arrays of :func:`_entry_columns` (string and key caches, the shape
    table, two hash tables), kept between dumps for the reason :class:`.pickle_nodes.Workspace`
    gives. The caches are not cleared between calls: an entry counts only when its stamp is the
    current call's number."""

    def __init__(self):
        self.capacity = -1
        self.slots = -1
        self.gen = 0

    def arrays(self, n_nodes: int, n_entries: int) -> tuple:
        if n_nodes + 16 > self.capacity:
            cap = self.capacity = max(n_nodes + 16, 2 * self.capacity)
            self._caches = (
                np.empty(cap, np.int16),
                np.zeros(cap, np.int32),
                np.empty(cap, np.int64),
                np.zeros(cap, np.int32),
            )
            self._shapes = tuple(np.empty(cap, np.int64) for _ in range(7))  # + dense string nodes
            self.gen = 0
        # hash tables at most half full: <= N_STR_ROWS strings and 2 shapes are interned per entry
        str_slots = 1 << int(2 * (ff.N_STR_ROWS * n_entries + 8)).bit_length()
        shape_slots = 1 << int(2 * (2 * n_entries + 8)).bit_length()
        if str_slots > self.slots:
            self.slots = str_slots
            self._tables = tuple(np.empty(str_slots, np.int64) for _ in range(4))
        self.gen += 1
        sh, sv, ph, pv = self._tables
        return (
            (np.int32(self.gen),)
            + self._caches
            + self._shapes
            + (sh[:str_slots], sv[:str_slots], ph[:shape_slots], pv[:shape_slots])
        )


def entry_arrays(nodes: pn.Nodes, entries_node: int, scratch: Scratch | None = None):
    """Run the compiled walker over one ``entries`` list node; ``None`` when it declines."""
    scratch = scratch or Scratch()
    if pn.backend() == "native":
        return _native_entry_arrays(nodes, entries_node, scratch)
    pn.jit_kernels()
    out = _entry_columns(
        nodes.buf,
        nodes.kind,
        nodes.val,
        nodes.size,
        nodes.first_edge,
        nodes.edge_node,
        nodes.edge_next,
        np.int64(entries_node),
        _KEY_BYTES,
        _KEY_START,
        _KEY_LEN,
        *scratch.arrays(len(nodes.kind), int(nodes.size[entries_node])),
        np.int64(_N_INT),
        np.int64(_N_BOOL),
        np.int64(_N_STR),
    )
    if out[0] != OK:
        return None
    # the shape table lives in the scratch arrays: copy the few rows in use before they are reused
    return out[1:6] + tuple(a.copy() for a in out[6:])


def _native_entry_arrays(nodes: pn.Nodes, entries_node: int, scratch: Scratch):
    """:func:`entry_arrays` with the C kernel (``pickle_nodes.native``): the same arrays. The C
    function fills outputs it is given, so they are made here as :func:`_entry_columns` makes them."""
    n = int(nodes.size[entries_node])
    ints = np.zeros((_N_INT, n), np.int64)
    int_ok = np.zeros((_N_INT, n), np.bool_)
    bools = np.full((_N_BOOL, n), -1, np.int8)
    strs = np.full((_N_STR + 3, n), -1, np.int32)
    shapes = np.full((2, n), -1, np.int64)
    work = scratch.arrays(len(nodes.kind), n)
    status, n_dims, n_tensors, n_shapes, n_dense = pn.native.entry_columns(
        nodes.buf,
        nodes.kind,
        nodes.val,
        nodes.size,
        nodes.first_edge,
        nodes.edge_node,
        nodes.edge_next,
        int(entries_node),
        _KEY_BYTES,
        _KEY_START,
        _KEY_LEN,
        int(work[0]),
        *work[1:],
        _N_INT,
        _N_BOOL,
        _N_STR,
        ints,
        int_ok,
        bools,
        strs,
        shapes,
    )
    if status != OK:
        return None
    dims, t_start, t_ndim, s_start, s_count, s_numel, dense_nodes = work[5:12]
    return (ints, int_ok, bools, strs, shapes) + (
        dims[:n_dims].copy(),
        t_start[:n_tensors].copy(),
        t_ndim[:n_tensors].copy(),
        s_start[:n_shapes].copy(),
        s_count[:n_shapes].copy(),
        s_numel[:n_shapes].copy(),
        dense_nodes[:n_dense].copy(),
    )


def shape_tuples(dims, t_start, t_ndim, s_start, s_count) -> list[tuple]:
    """The interned shapes as tuples of tuples (one per distinct shape, not per entry)."""
    d = dims.tolist()
    out = []
    for s0, c in zip(s_start.tolist(), s_count.tolist()):
        out.append(
            tuple(tuple(d[t0 : t0 + nd]) for t0, nd in zip(t_start[s0 : s0 + c].tolist(), t_ndim[s0 : s0 + c].tolist()))
        )
    return out


def _warm_up() -> None:
    data = b"\x80\x02}q\x00X\x07\x00\x00\x00entriesq\x01]q\x02}q\x03X\x05\x00\x00\x00pg_idq\x04K\x00sas."
    nodes = pn.decode(data)
    if isinstance(nodes, tuple):
        raise RuntimeError(f"the compiled decoder fails on a known-good dump: {pn.message(*nodes)}")
    entries = nodes.children(nodes.root)[1]
    if entry_arrays(nodes, entries) is None:
        raise RuntimeError("the compiled entry walker declines a known-good dump")
    if pn.backend() != "numba":  # the C kernels: the scanner (numba only) is not loaded for them
        return
    status, _ = pn.scan_compiled(
        np.frombuffer(data, dtype=np.uint8),
        len(data),
        MIN_EXPANSION,
        *(np.empty(len(data) + 2, dt) for dt in (np.int8, np.int8, np.int64, np.int8, np.int32, np.int32, np.int32)),
    )
    if status != pn.OK:
        raise RuntimeError("the compiled pickle scanner refuses a known-good dump")


def warm() -> bool:
    """Load (or compile, the first time after install) the compiled functions in this process, so
    a process pool forked afterwards inherits them instead of each worker loading them again.

    This is also the check that numba itself works: when loading, compiling or running them on a
    known-good dump fails, the compiled path is switched off for this process (with a warning, see
    :func:`.flight_recorder.compiled_failed`) and False comes back; dumps then go through the
    unpickler path. A failure on one particular dump later never does that."""
    kernels = pn.backend()
    if kernels is None:
        return False
    try:
        if kernels == "numba":
            pn.jit_kernels()
        _warm_up()
    except Exception as e:
        compiled_failed(e)
        return False
    return True


_LOCAL = threading.local()  # one decode workspace per thread (Dask may run readers in threads)


def fast_dump_columns(data: bytes, *, rank: int | None, file: str, source: str):
    """(events column batch, progress rows) of one pickled dump, or ``None`` when the compiled path
    declines (not plain data, unexpected kinds): the caller then unpickles as usual. A dump past
    one of the decoder's bounds (:data:`.pickle_nodes.REFUSALS`) raises
    :class:`~.flight_recorder.DumpRefused` instead: the unpickler path refuses those too.

    Only the extraction is done here (node table -> :class:`.fr_fields.EntryArrays`); the columns
    come from :func:`.fr_fields.event_columns`, as on the unpickler path."""
    if not hasattr(_LOCAL, "workspace"):
        _LOCAL.workspace, _LOCAL.scratch = pn.Workspace(), Scratch()
    nodes = pn.decode(data, _LOCAL.workspace)  # valid until this thread's next decode: used only here
    if isinstance(nodes, tuple):
        if nodes[0] in REFUSALS:  # past a bound: refused here, as the unpickler path would
            raise refusal(*nodes)
        return None
    if nodes.kind[nodes.root] != K_DICT:
        return None
    head: dict = {}
    entries_node = None
    try:
        for k, v in nodes.items(nodes.root):
            if nodes.kind[k] != K_STR:
                return None
            key = nodes.text(k)
            if key == "entries":
                entries_node = v
            head[key] = nodes.to_python(v) if key in ("pg_config", "pg_status") else None
    except (ValueError, TypeError):  # a float or an unhashable key where a small value was expected
        return None
    if not ({"entries", "pg_config", "pg_status", "version"} & set(head)):
        return None  # not a dump: let the ordinary path say so
    if (
        entries_node is None
        or nodes.kind[entries_node] == K_NONE
        or (nodes.kind[entries_node] in (K_LIST, K_TUPLE) and nodes.size[entries_node] == 0)
    ):
        return dump_to_columns({**head, "entries": []}, rank=rank, file=file, source=source)
    if nodes.kind[entries_node] not in (K_LIST, K_TUPLE):
        return None
    got = entry_arrays(nodes, entries_node, _LOCAL.scratch)
    if got is None:
        return None
    ints, int_ok, bools, strs, shape_ids, dims, t_start, t_ndim, s_start, s_count, s_numel, dense = got
    arrays = ff.EntryArrays(
        ints,
        int_ok,
        bools,
        strs,
        [nodes.text(x) for x in dense.tolist()],
        shape_ids,
        shape_tuples(dims, t_start, t_ndim, s_start, s_count),
        s_numel,
        np.ones(len(s_numel), dtype=bool),
    )
    events = ff.event_columns(arrays, rank=rank, file=file, source=source, pg_config=head.get("pg_config"))
    return events, ff.progress_rows(head.get("pg_status"), rank=rank, file=file, source=source)
