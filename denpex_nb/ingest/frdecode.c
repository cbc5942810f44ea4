/* The Flight Recorder decoder's two kernels in C, built with the package (setup.py, optional).
 *
 * Why: the same kernels written for numba (pickle_nodes._decode, fr_columns._entry_columns) are
 * compiled on first use after an install (~10 s) and cost ~1 s per process to import numba and
 * load its cache. Built here by the wheel, they cost nothing at run time. This file is a line-by-
 * line port of those two functions and their helpers: the Python sources stay the reference
 * (docstrings, rules), tests/ingest/test_fr_native.py checks that both give the same tables on
 * real, generated and hostile pickles. Integers follow numba's semantics: 64-bit wrap-around
 * (done in uint64), Python floor division where the source divides.
 *
 * Interface: every array is passed in (numpy arrays through the buffer protocol; item sizes and
 * lengths are checked here, the arrays' contents are not trusted beyond what the port reads).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* statuses and bounds: checked against flight_recorder's at import (pickle_nodes._native_ok) */
enum {
    OK = 0, E_OPCODE, E_TRUNCATED, E_STACK, E_MEMO, E_NO_STOP, E_CAPACITY,
    E_DEPTH, E_EXPANSION, E_MEMO_INDEX, E_MUTATED, E_CYCLE, E_UTF8, E_UNHASHABLE
};
#define MAX_DEPTH 64
enum { K_NONE, K_BOOL, K_INT, K_BIGINT, K_FLOAT, K_STR, K_LIST, K_TUPLE, K_DICT };
#define DECLINE 1

typedef struct {
    Py_buffer view;
    int held;
} Arr;

static int get_arr(PyObject *obj, Arr *a, Py_ssize_t itemsize, int writable, const char *name)
{
    a->held = 0;
    if (PyObject_GetBuffer(obj, &a->view, (writable ? PyBUF_WRITABLE : 0) | PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0)
        return -1;
    a->held = 1;
    if (a->view.itemsize != itemsize) {
        PyErr_Format(PyExc_ValueError, "%s: item size %zd, expected %zd", name, a->view.itemsize, itemsize);
        return -1;
    }
    return 0;
}

static Py_ssize_t len_of(Arr *a) { return a->view.len / a->view.itemsize; }

static void release(Arr *arrs, int n)
{
    for (int i = 0; i < n; i++)
        if (arrs[i].held) {
            PyBuffer_Release(&arrs[i].view);
            arrs[i].held = 0;
        }
}

static inline int64_t le(const uint8_t *buf, int64_t pos, int k)
{
    uint64_t v = 0;
    for (int i = 0; i < k; i++)
        v |= (uint64_t)buf[pos + i] << (8 * i);
    return (int64_t)v;
}

static inline int64_t wrap_mul(int64_t a, int64_t b) { return (int64_t)((uint64_t)a * (uint64_t)b); }
static inline int64_t wrap_add(int64_t a, int64_t b) { return (int64_t)((uint64_t)a + (uint64_t)b); }
static inline int64_t wrap_abs(int64_t a) { return a < 0 ? (int64_t)(0 - (uint64_t)a) : a; }

/* Python's a // b for b != 0 (numba's too) */
static inline int64_t floordiv(int64_t a, int64_t b)
{
    int64_t q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0)))
        q -= 1;
    return q;
}

static int utf8_ok(const uint8_t *buf, int64_t i, int64_t end)
{
    while (i < end) {
        uint8_t c = buf[i];
        if (c < 0x80) {
            i += 1;
            continue;
        }
        if (c < 0xC2 || c > 0xF4)
            return 0;
        int64_t k = c < 0xE0 ? 1 : (c < 0xF0 ? 2 : 3);
        if (k > end - i - 1)
            return 0;
        uint8_t b1 = buf[i + 1];
        if (b1 < 0x80 || b1 > 0xBF || (c == 0xE0 && b1 < 0xA0) || (c == 0xF0 && b1 < 0x90) || (c == 0xF4 && b1 > 0x8F))
            return 0;
        for (int64_t j = 2; j <= k; j++)
            if (buf[i + j] < 0x80 || buf[i + j] > 0xBF)
                return 0;
        i += k + 1;
    }
    return 1;
}

static inline int64_t memo_arg(const uint8_t *buf, int64_t pos, int width)
{
    return width == 1 ? (int64_t)buf[pos] : le(buf, pos, 4);
}

static inline int hashable(const int8_t *kind, const int64_t *val, int64_t node)
{
    int8_t k = kind[node];
    return !(k == K_LIST || k == K_DICT || (k == K_TUPLE && val[node] == 1));
}

typedef struct {
    int8_t *kind;
    int64_t *val;
    int32_t *size, *first_edge, *last_edge, *edge_node, *edge_next, *stack, *marks, *memo;
    int8_t *depth;
    int64_t *esize;
    uint8_t *sealed;
} Table;

/* pickle_nodes._link: (new edge count via *ne, status) */
static int link_children(Table *t, int64_t container, int64_t lo, int64_t hi, int64_t *ne, int64_t max_expand)
{
    if (hi <= lo)
        return OK;
    if (t->sealed[container])
        return E_MUTATED;
    int64_t d = t->depth[container];
    int64_t x = t->esize[container];
    for (int64_t i = lo; i < hi; i++) {
        int64_t c = t->stack[i];
        if (c == container)
            return E_CYCLE;
        t->sealed[c] = 1;
        if ((int64_t)t->depth[c] + 1 > d)
            d = (int64_t)t->depth[c] + 1;
        x = wrap_add(x, t->esize[c]);
        t->edge_node[*ne] = (int32_t)c;
        t->edge_next[*ne] = -1;
        if (t->size[container] == 0)
            t->first_edge[container] = (int32_t)*ne;
        else
            t->edge_next[t->last_edge[container]] = (int32_t)*ne;
        t->last_edge[container] = (int32_t)*ne;
        t->size[container] += 1;
        *ne += 1;
    }
    t->depth[container] = (int8_t)(d < MAX_DEPTH + 1 ? d : MAX_DEPTH + 1);
    t->esize[container] = x;
    if (d > MAX_DEPTH)
        return E_DEPTH;
    if (x > max_expand)
        return E_EXPANSION;
    return OK;
}

/* pickle_nodes._decode */
static void decode_impl(const uint8_t *buf, int64_t n, int64_t max_expand, Table *t, int64_t cap, int64_t *out_status,
                        int64_t *out_root, int64_t *out_nn, int64_t *out_ne)
{
    int8_t *kind = t->kind;
    int64_t *val = t->val;
    int32_t *size = t->size, *stack = t->stack, *marks = t->marks, *memo = t->memo;
    int64_t nn = 0, ne = 0, sp = 0, mp = 0, memo_len = 0, pos = 0, root = -1, at = 0;
    int status = E_NO_STOP;
    while (pos < n) {
        uint8_t op = buf[pos];
        at = pos;
        pos += 1;
        int new_kind = -1;
        int64_t new_val = 0;
        if (op == 0x68 || op == 0x6A) { /* BINGET, LONG_BINGET */
            int w = op == 0x68 ? 1 : 4;
            if (w > n - pos) { status = E_TRUNCATED; break; }
            int64_t idx = memo_arg(buf, pos, w);
            pos += w;
            if (idx >= memo_len) { status = E_MEMO; break; }
            if (sp >= cap) { status = E_CAPACITY; break; }
            stack[sp] = memo[idx];
            sp += 1;
        } else if (op == 0x71 || op == 0x72 || op == 0x94) { /* BINPUT, LONG_BINPUT, MEMOIZE */
            int64_t idx;
            if (op == 0x94) {
                idx = memo_len;
            } else {
                int w = op == 0x71 ? 1 : 4;
                if (w > n - pos) { status = E_TRUNCATED; break; }
                idx = memo_arg(buf, pos, w);
                pos += w;
            }
            if (sp == 0 || (mp > 0 && marks[mp - 1] == sp)) { status = E_STACK; break; }
            if (idx > memo_len) { status = E_MEMO_INDEX; break; }
            if (idx >= cap) { status = E_CAPACITY; break; }
            memo[idx] = stack[sp - 1];
            if (idx == memo_len)
                memo_len += 1;
        } else if (op == 0x5D) { /* EMPTY_LIST */
            new_kind = K_LIST;
        } else if (op == 0x73 || op == 0x61) { /* SETITEM, APPEND */
            int64_t k = op == 0x73 ? 2 : 1;
            int want = op == 0x73 ? K_DICT : K_LIST;
            if (sp < k + 1 || kind[stack[sp - k - 1]] != want || (mp > 0 && marks[mp - 1] > sp - k - 1)) {
                status = E_STACK;
                break;
            }
            if (ne + k > cap) { status = E_CAPACITY; break; }
            if (op == 0x73 && !hashable(kind, val, stack[sp - 2])) { status = E_UNHASHABLE; break; }
            int st = link_children(t, stack[sp - k - 1], sp - k, sp, &ne, max_expand);
            if (st != OK) { status = st; break; }
            sp -= k;
        } else if (op == 0x4D) { /* BININT2 */
            if (2 > n - pos) { status = E_TRUNCATED; break; }
            new_kind = K_INT;
            new_val = le(buf, pos, 2);
            pos += 2;
        } else if (op == 0x4B) { /* BININT1 */
            if (1 > n - pos) { status = E_TRUNCATED; break; }
            new_kind = K_INT;
            new_val = buf[pos];
            pos += 1;
        } else if (op == 0x8A) { /* LONG1 */
            if (1 > n - pos) { status = E_TRUNCATED; break; }
            int64_t k = buf[pos];
            pos += 1;
            if (k > n - pos) { status = E_TRUNCATED; break; }
            if (k > 8) {
                new_kind = K_BIGINT;
            } else {
                int64_t v = le(buf, pos, (int)k);
                if (0 < k && k < 8 && buf[pos + k - 1] >= 128)
                    v = (int64_t)((uint64_t)v - ((uint64_t)1 << (8 * k)));
                new_kind = K_INT;
                new_val = v;
            }
            pos += k;
        } else if (op == 0x28) { /* MARK */
            if (mp >= cap) { status = E_CAPACITY; break; }
            marks[mp] = (int32_t)sp;
            mp += 1;
        } else if (op == 0x58 || op == 0x8C || op == 0x8D) { /* BINUNICODE, SHORT_BINUNICODE, BINUNICODE8 */
            int w = op == 0x58 ? 4 : (op == 0x8C ? 1 : 8);
            if (w > n - pos) { status = E_TRUNCATED; break; }
            int64_t length = le(buf, pos, w);
            pos += w;
            if (length < 0 || length > n - pos) { status = E_TRUNCATED; break; }
            if (!utf8_ok(buf, pos, pos + length)) { status = E_UTF8; break; }
            if (nn >= cap) { status = E_CAPACITY; break; }
            new_kind = K_STR;
            new_val = pos;
            size[nn] = (int32_t)length;
            pos += length;
        } else if (op == 0x7D) { /* EMPTY_DICT */
            new_kind = K_DICT;
        } else if (op == 0x75 || op == 0x65) { /* SETITEMS, APPENDS */
            if (mp == 0) { status = E_STACK; break; }
            mp -= 1;
            int64_t m = marks[mp];
            int want = op == 0x75 ? K_DICT : K_LIST;
            if (m < 1 || kind[stack[m - 1]] != want || (op == 0x75 && (sp - m) % 2 == 1) ||
                (mp > 0 && marks[mp - 1] > m - 1)) {
                status = E_STACK;
                break;
            }
            if (ne + (sp - m) > cap) { status = E_CAPACITY; break; }
            if (op == 0x75) {
                for (int64_t i = m; i < sp; i += 2)
                    if (!hashable(kind, val, stack[i])) {
                        status = E_UNHASHABLE;
                        break;
                    }
                if (status == E_UNHASHABLE)
                    break;
            }
            int st = link_children(t, stack[m - 1], m, sp, &ne, max_expand);
            if (st != OK) { status = st; break; }
            sp = m;
        } else if (op == 0x88 || op == 0x89) { /* NEWTRUE, NEWFALSE */
            new_kind = K_BOOL;
            new_val = op == 0x88 ? 1 : 0;
        } else if (op == 0x4A) { /* BININT */
            if (4 > n - pos) { status = E_TRUNCATED; break; }
            int64_t v = le(buf, pos, 4);
            if (v >= 2147483648LL)
                v -= 4294967296LL;
            new_kind = K_INT;
            new_val = v;
            pos += 4;
        } else if (op == 0x4E) { /* NONE */
            new_kind = K_NONE;
        } else if (op == 0x74 || op == 0x85 || op == 0x86 || op == 0x87) { /* TUPLE, TUPLE1..3 */
            int64_t m;
            if (op == 0x74) {
                if (mp == 0) { status = E_STACK; break; }
                mp -= 1;
                m = marks[mp];
            } else {
                m = sp - (op - 0x84);
            }
            if (m < 0 || (mp > 0 && marks[mp - 1] > m)) { status = E_STACK; break; }
            if (nn >= cap || ne + (sp - m) > cap) { status = E_CAPACITY; break; }
            int64_t tt = nn;
            kind[tt] = K_TUPLE;
            val[tt] = 0;
            for (int64_t i = m; i < sp; i++)
                if (!hashable(kind, val, stack[i]))
                    val[tt] = 1;
            size[tt] = 0;
            t->depth[tt] = 1;
            t->esize[tt] = 1;
            t->sealed[tt] = 0;
            nn += 1;
            int st = link_children(t, tt, m, sp, &ne, max_expand);
            if (st != OK) { status = st; break; }
            sp = m;
            stack[sp] = (int32_t)tt;
            sp += 1;
        } else if (op == 0x29) { /* EMPTY_TUPLE */
            new_kind = K_TUPLE;
        } else if (op == 0x47) { /* BINFLOAT */
            if (8 > n - pos) { status = E_TRUNCATED; break; }
            new_kind = K_FLOAT;
            pos += 8;
        } else if (op == 0x80) { /* PROTO */
            if (1 > n - pos) { status = E_TRUNCATED; break; }
            if (buf[pos] > 5) { status = E_OPCODE; break; }
            pos += 1;
        } else if (op == 0x95) { /* FRAME */
            if (8 > n - pos) { status = E_TRUNCATED; break; }
            int64_t length = le(buf, pos, 8);
            pos += 8;
            if (length < 0 || length > n - pos) { status = E_TRUNCATED; break; }
        } else if (op == 0x2E) { /* STOP */
            if (sp != 1 || mp != 0) {
                status = E_STACK;
            } else {
                status = OK;
                root = stack[0];
            }
            break;
        } else {
            status = E_OPCODE;
            break;
        }
        if (new_kind >= 0) {
            if (nn >= cap || sp >= cap) { status = E_CAPACITY; break; }
            kind[nn] = (int8_t)new_kind;
            val[nn] = new_val;
            if (new_kind != K_STR)
                size[nn] = 0;
            t->depth[nn] = (new_kind == K_LIST || new_kind == K_TUPLE || new_kind == K_DICT) ? 1 : 0;
            t->esize[nn] = 1;
            t->sealed[nn] = 0;
            stack[sp] = (int32_t)nn;
            sp += 1;
            nn += 1;
        }
    }
    if (status != OK)
        root = at;
    *out_status = status;
    *out_root = root;
    *out_nn = nn;
    *out_ne = ne;
}

static PyObject *py_decode(PyObject *self, PyObject *args)
{
    PyObject *o[15];
    long long max_expand;
    if (!PyArg_ParseTuple(args, "OLOOOOOOOOOOOOO", &o[0], &max_expand, &o[1], &o[2], &o[3], &o[4], &o[5], &o[6],
                          &o[7], &o[8], &o[9], &o[10], &o[11], &o[12], &o[13]))
        return NULL;
    static const Py_ssize_t items[14] = {1, 1, 8, 4, 4, 4, 4, 4, 4, 4, 4, 1, 8, 1};
    static const char *names[14] = {"buf", "kind", "val", "size", "first_edge", "last_edge", "edge_node",
                                    "edge_next", "stack", "marks", "memo", "depth", "esize", "sealed"};
    Arr a[14];
    memset(a, 0, sizeof(a));
    for (int i = 0; i < 14; i++)
        if (get_arr(o[i], &a[i], items[i], i > 0, names[i]) < 0) {
            release(a, 14);
            return NULL;
        }
    Py_ssize_t cap = len_of(&a[1]);
    for (int i = 2; i < 14; i++)
        if (len_of(&a[i]) < cap) {
            release(a, 14);
            return PyErr_Format(PyExc_ValueError, "%s is shorter than kind", names[i]);
        }
    Table t;
    t.kind = (int8_t *)a[1].view.buf;
    t.val = (int64_t *)a[2].view.buf;
    t.size = (int32_t *)a[3].view.buf;
    t.first_edge = (int32_t *)a[4].view.buf;
    t.last_edge = (int32_t *)a[5].view.buf;
    t.edge_node = (int32_t *)a[6].view.buf;
    t.edge_next = (int32_t *)a[7].view.buf;
    t.stack = (int32_t *)a[8].view.buf;
    t.marks = (int32_t *)a[9].view.buf;
    t.memo = (int32_t *)a[10].view.buf;
    t.depth = (int8_t *)a[11].view.buf;
    t.esize = (int64_t *)a[12].view.buf;
    t.sealed = (uint8_t *)a[13].view.buf;
    int64_t status, root, nn, ne;
    const uint8_t *buf = (const uint8_t *)a[0].view.buf;
    int64_t n = len_of(&a[0]);
    Py_BEGIN_ALLOW_THREADS
    decode_impl(buf, n, max_expand, &t, cap, &status, &root, &nn, &ne);
    Py_END_ALLOW_THREADS
    release(a, 14);
    return Py_BuildValue("LLLL", (long long)status, (long long)root, (long long)nn, (long long)ne);
}

/* ---- fr_columns: the entries walker ------------------------------------------------------- */

typedef struct {
    const uint8_t *buf;
    const int8_t *kind;
    const int64_t *val;
    const int32_t *size, *first_edge, *edge_node, *edge_next;
} Nodes;

static int64_t key_id(const Nodes *N, int64_t node, const uint8_t *key_bytes, const int64_t *key_start,
                      const int64_t *key_len, int64_t n_keys)
{
    int64_t start = N->val[node];
    int64_t length = N->size[node];
    for (int64_t k = 0; k < n_keys; k++) {
        if (key_len[k] != length)
            continue;
        if (memcmp(N->buf + start, key_bytes + key_start[k], (size_t)length) == 0)
            return k;
    }
    return -1;
}

static int64_t slot(const int64_t *table_hash, const int64_t *table_val, int64_t n_slots, int64_t h)
{
    int64_t mask = n_slots - 1;
    int64_t x = h ^ (h >> 29);
    x = wrap_mul(x, -4658895280553007687LL);
    int64_t i = (x ^ (x >> 32)) & mask;
    while (table_val[i] != -1 && table_hash[i] != h)
        i = (i + 1) & mask;
    return i;
}

typedef struct {
    int64_t *canon;
    int32_t *canon_stamp;
    int32_t gen;
    int64_t *str_hash, *str_val;
    int64_t n_str_slots;
    int64_t *dense_nodes;
    int64_t n_dense;
} Strings;

static int64_t canonical_string(const Nodes *N, int64_t node, Strings *S)
{
    if (S->canon_stamp[node] == S->gen)
        return S->canon[node];
    int64_t start = N->val[node];
    int64_t length = N->size[node];
    int64_t h = wrap_mul(length, 1000003);
    for (int64_t i = 0; i < length; i++)
        h = wrap_mul(h ^ (int64_t)N->buf[start + i], 1099511628211LL);
    int64_t s = slot(S->str_hash, S->str_val, S->n_str_slots, h);
    int64_t c;
    if (S->str_val[s] != -1) {
        c = S->str_val[s];
        int64_t first = S->dense_nodes[c];
        if (N->size[first] != length)
            return -1;
        if (memcmp(N->buf + N->val[first], N->buf + start, (size_t)length) != 0)
            return -1;
    } else {
        c = S->n_dense;
        S->n_dense += 1;
        S->dense_nodes[c] = node;
        S->str_hash[s] = h;
        S->str_val[s] = c;
    }
    S->canon[node] = c;
    S->canon_stamp[node] = S->gen;
    return c;
}

#define NUMEL_LIMIT ((int64_t)1 << 62)

/* fr_columns._shape_hash: returns ok; *h, *numel */
static int shape_hash(const Nodes *N, int64_t node, int64_t *out_h, int64_t *out_numel)
{
    int64_t h = wrap_mul((int64_t)N->size[node], 1000003);
    int64_t numel = 0;
    int64_t te = N->size[node] > 0 ? N->first_edge[node] : -1;
    int ok = 1;
    while (te >= 0) {
        int64_t tn = N->edge_node[te];
        te = N->edge_next[te];
        if (N->kind[tn] != K_LIST && N->kind[tn] != K_TUPLE) { ok = 0; break; }
        h = wrap_mul(h ^ (int64_t)N->size[tn], 1099511628211LL);
        int64_t p = 1;
        int64_t de = N->size[tn] > 0 ? N->first_edge[tn] : -1;
        while (de >= 0) {
            int64_t dn = N->edge_node[de];
            de = N->edge_next[de];
            if (N->kind[dn] != K_INT) { ok = 0; break; }
            int64_t d = N->val[dn];
            h = wrap_mul(h ^ d, 1099511628211LL);
            if (d != 0) {
                int64_t ad = wrap_abs(d); /* INT64_MIN stays negative, as in numba */
                if (p > floordiv(NUMEL_LIMIT, ad) || p < floordiv(-NUMEL_LIMIT, ad)) { ok = 0; break; }
            }
            p = wrap_mul(p, d);
        }
        if (!ok)
            break;
        numel = wrap_add(numel, p);
        if (wrap_abs(numel) > NUMEL_LIMIT) { ok = 0; break; }
    }
    *out_h = h;
    *out_numel = numel;
    return ok;
}

typedef struct {
    int64_t *dims, *t_start, *t_ndim, *s_start, *s_count, *s_numel;
    int64_t cap;
} Shapes;

static int same_shape(const Nodes *N, int64_t node, int64_t sid, const Shapes *T)
{
    if (T->s_count[sid] != N->size[node])
        return 0;
    int64_t ti = T->s_start[sid];
    int64_t te = N->size[node] > 0 ? N->first_edge[node] : -1;
    while (te >= 0) {
        int64_t tn = N->edge_node[te];
        te = N->edge_next[te];
        if (T->t_ndim[ti] != N->size[tn])
            return 0;
        int64_t k = T->t_start[ti];
        int64_t de = N->size[tn] > 0 ? N->first_edge[tn] : -1;
        while (de >= 0) {
            if (T->dims[k] != N->val[N->edge_node[de]])
                return 0;
            k += 1;
            de = N->edge_next[de];
        }
        ti += 1;
    }
    return 1;
}

static int store_shape(const Nodes *N, int64_t node, Shapes *T, int64_t *n_dims, int64_t *n_tensors)
{
    int64_t te = N->size[node] > 0 ? N->first_edge[node] : -1;
    while (te >= 0) {
        int64_t tn = N->edge_node[te];
        te = N->edge_next[te];
        if (*n_dims + N->size[tn] > T->cap)
            return 0;
        T->t_start[*n_tensors] = *n_dims;
        T->t_ndim[*n_tensors] = N->size[tn];
        int64_t de = N->size[tn] > 0 ? N->first_edge[tn] : -1;
        while (de >= 0) {
            T->dims[*n_dims] = N->val[N->edge_node[de]];
            *n_dims += 1;
            de = N->edge_next[de];
        }
        *n_tensors += 1;
    }
    return 1;
}

typedef struct {
    int64_t *ints;
    uint8_t *int_ok;
    int8_t *bools;
    int32_t *strs;
    int64_t *shapes;
    int16_t *key_cache;
    int32_t *key_stamp;
    int64_t *shape_hash, *shape_val;
    int64_t n_shape_slots;
} Walk;

/* fr_columns._entry_columns; returns status, fills the counts */
static int entry_columns_impl(const Nodes *N, int64_t entries, const uint8_t *key_bytes, const int64_t *key_start,
                              const int64_t *key_len, int64_t n_keys, Walk *W, Strings *S, Shapes *T, int64_t n_int,
                              int64_t n_bool, int64_t n_str, int64_t *out_counts)
{
    int64_t k_pg = n_int + n_bool + n_str;
    int64_t k_dtypes = k_pg + 1;
    int64_t k_in = k_pg + 2;
    int64_t s_pg0 = n_str, s_pg1 = n_str + 1, s_dtype = n_str + 2;
    int64_t n = N->size[entries];
    int64_t n_dims = 0, n_tensors = 0, n_shapes = 0;
    int status = OK;
    int64_t e = n > 0 ? N->first_edge[entries] : -1;
    int64_t row = 0;
#define STR(r) W->strs[(r) * n + row]
    while (e >= 0 && status == OK) {
        int64_t ent = N->edge_node[e];
        e = N->edge_next[e];
        if (N->kind[ent] != K_DICT) { status = DECLINE; break; }
        int64_t pe = N->size[ent] > 0 ? N->first_edge[ent] : -1;
        while (pe >= 0) {
            int64_t kn = N->edge_node[pe];
            pe = N->edge_next[pe];
            if (pe < 0) { status = DECLINE; break; } /* a dict holds pairs: cannot happen */
            int64_t vn = N->edge_node[pe];
            pe = N->edge_next[pe];
            if (N->kind[kn] != K_STR) { status = DECLINE; break; }
            int64_t kid;
            if (W->key_stamp[kn] == S->gen) {
                kid = W->key_cache[kn];
            } else {
                kid = key_id(N, kn, key_bytes, key_start, key_len, n_keys);
                W->key_cache[kn] = (int16_t)kid;
                W->key_stamp[kn] = S->gen;
            }
            if (kid < 0)
                continue;
            int8_t vk = N->kind[vn];
            if (kid < n_int) {
                if (vk == K_INT) {
                    W->ints[kid * n + row] = N->val[vn];
                    W->int_ok[kid * n + row] = 1;
                } else if (vk == K_NONE) {
                    W->int_ok[kid * n + row] = 0;
                } else { status = DECLINE; break; }
            } else if (kid < n_int + n_bool) {
                if (vk == K_BOOL) {
                    W->bools[(kid - n_int) * n + row] = (int8_t)N->val[vn];
                } else if (vk == K_NONE) {
                    W->bools[(kid - n_int) * n + row] = -1;
                } else { status = DECLINE; break; }
            } else if (kid < k_pg) {
                if (vk == K_STR) {
                    int64_t c = canonical_string(N, vn, S);
                    if (c < 0) { status = DECLINE; break; }
                    STR(kid - n_int - n_bool) = (int32_t)c;
                } else if (vk == K_NONE) {
                    STR(kid - n_int - n_bool) = -1;
                } else { status = DECLINE; break; }
            } else if (kid == k_pg) {
                STR(s_pg0) = -1;
                STR(s_pg1) = -1;
                if ((vk == K_LIST || vk == K_TUPLE) && N->size[vn] >= 1) {
                    int64_t g = N->first_edge[vn];
                    int64_t a = N->edge_node[g];
                    if (N->kind[a] != K_STR) { status = DECLINE; break; }
                    a = canonical_string(N, a, S);
                    if (a < 0) { status = DECLINE; break; }
                    STR(s_pg0) = (int32_t)a;
                    if (N->size[vn] >= 2) {
                        int64_t b = N->edge_node[N->edge_next[g]];
                        if (N->kind[b] == K_STR) {
                            b = canonical_string(N, b, S);
                            if (b < 0) { status = DECLINE; break; }
                            STR(s_pg1) = (int32_t)b;
                        } else if (N->kind[b] != K_NONE) { status = DECLINE; break; }
                    }
                } else if (vk != K_NONE && !((vk == K_LIST || vk == K_TUPLE) && N->size[vn] == 0)) {
                    status = DECLINE;
                    break;
                }
            } else if (kid == k_dtypes) {
                STR(s_dtype) = -1;
                if ((vk == K_LIST || vk == K_TUPLE) && N->size[vn] >= 1) {
                    int64_t a = N->edge_node[N->first_edge[vn]];
                    if (N->kind[a] != K_STR) { status = DECLINE; break; }
                    a = canonical_string(N, a, S);
                    if (a < 0) { status = DECLINE; break; }
                    STR(s_dtype) = (int32_t)a;
                } else if (vk != K_NONE && !(vk == K_LIST || vk == K_TUPLE)) {
                    status = DECLINE;
                    break;
                }
            } else {
                int64_t which = kid - k_in;
                if (vk == K_NONE) {
                    W->shapes[which * n + row] = -1;
                    continue;
                }
                if (vk != K_LIST && vk != K_TUPLE) { status = DECLINE; break; }
                int64_t h, numel;
                if (!shape_hash(N, vn, &h, &numel)) { status = DECLINE; break; }
                int64_t s = slot(W->shape_hash, W->shape_val, W->n_shape_slots, h);
                int64_t sid = W->shape_val[s];
                if (sid >= 0) {
                    if (!same_shape(N, vn, sid, T)) { status = DECLINE; break; }
                } else {
                    sid = n_shapes;
                    if (n_shapes >= T->cap || n_tensors + N->size[vn] > T->cap) { status = DECLINE; break; }
                    T->s_start[sid] = n_tensors;
                    T->s_count[sid] = N->size[vn];
                    T->s_numel[sid] = numel;
                    if (!store_shape(N, vn, T, &n_dims, &n_tensors)) { status = DECLINE; break; }
                    W->shape_hash[s] = h;
                    W->shape_val[s] = sid;
                    n_shapes += 1;
                }
                W->shapes[which * n + row] = sid;
            }
        }
        row += 1;
    }
#undef STR
    out_counts[0] = n_dims;
    out_counts[1] = n_tensors;
    out_counts[2] = n_shapes;
    out_counts[3] = S->n_dense;
    return status;
}

/* entry_columns(buf, kind, val, size, first_edge, edge_node, edge_next, entries, key_bytes, key_start,
 *               key_len, gen, key_cache, key_stamp, canon, canon_stamp, dims, t_start, t_ndim, s_start,
 *               s_count, s_numel, dense_nodes, str_hash, str_val, shape_hash, shape_val, n_int, n_bool,
 *               n_str, ints, int_ok, bools, strs, shapes)
 * -> (status, n_dims, n_tensors, n_shapes, n_dense); the outputs are filled in place and must be
 * initialised by the caller as fr_columns._entry_columns does (zeros, False, -1, -1, -1). */
static PyObject *py_entry_columns(PyObject *self, PyObject *args)
{
    PyObject *o[32];
    long long entries, gen, n_int, n_bool, n_str;
    if (!PyArg_ParseTuple(args, "OOOOOOOLOOOLOOOOOOOOOOOOOOOLLLOOOOO", &o[0], &o[1], &o[2], &o[3], &o[4], &o[5],
                          &o[6], &entries, &o[7], &o[8], &o[9], &gen, &o[10], &o[11], &o[12], &o[13], &o[14],
                          &o[15], &o[16], &o[17], &o[18], &o[19], &o[20], &o[21], &o[22], &o[23], &o[24], &n_int,
                          &n_bool, &n_str, &o[25], &o[26], &o[27], &o[28], &o[29]))
        return NULL;
    enum { NA = 30 };
    static const Py_ssize_t items[NA] = {1, 1, 8, 4, 4, 4, 4, 1, 8, 8, 2, 4, 8, 4, 8, 8, 8,
                                         8, 8, 8, 8, 8, 8, 8, 8, 8, 1, 1, 4, 8};
    static const char *names[NA] = {"buf", "kind", "val", "size", "first_edge", "edge_node", "edge_next",
                                    "key_bytes", "key_start", "key_len", "key_cache", "key_stamp", "canon",
                                    "canon_stamp", "dims", "t_start", "t_ndim", "s_start", "s_count", "s_numel",
                                    "dense_nodes", "str_hash", "str_val", "shape_hash", "shape_val", "ints",
                                    "int_ok", "bools", "strs", "shapes"};
    Arr a[NA];
    memset(a, 0, sizeof(a));
    for (int i = 0; i < NA; i++) {
        int writable = i >= 10;
        if (get_arr(o[i], &a[i], items[i], writable, names[i]) < 0) {
            release(a, NA);
            return NULL;
        }
    }
#define FAIL(msg)                                          \
    do {                                                   \
        release(a, NA);                                    \
        return PyErr_Format(PyExc_ValueError, "%s", msg); \
    } while (0)
    int64_t nn = len_of(&a[1]);
    int64_t nbuf = len_of(&a[0]);
    if (len_of(&a[2]) != nn || len_of(&a[3]) != nn || len_of(&a[4]) != nn)
        FAIL("node arrays differ in length");
    if (len_of(&a[5]) != len_of(&a[6]))
        FAIL("edge arrays differ in length");
    if (entries < 0 || entries >= nn)
        FAIL("entries is not a node");
    if (len_of(&a[8]) != len_of(&a[9]))
        FAIL("key tables differ in length");
    if (len_of(&a[10]) < nn || len_of(&a[11]) < nn || len_of(&a[12]) < nn || len_of(&a[13]) < nn)
        FAIL("caches shorter than the node table");
    int64_t cap = len_of(&a[14]);
    for (int i = 15; i <= 20; i++)
        if (len_of(&a[i]) < cap)
            FAIL("shape table arrays shorter than dims");
    int64_t n_str_slots = len_of(&a[21]), n_shape_slots = len_of(&a[23]);
    if (len_of(&a[22]) != n_str_slots || len_of(&a[24]) != n_shape_slots || n_str_slots == 0 || n_shape_slots == 0 ||
        (n_str_slots & (n_str_slots - 1)) || (n_shape_slots & (n_shape_slots - 1)))
        FAIL("hash tables must be powers of two");
    Nodes N = {(const uint8_t *)a[0].view.buf, (const int8_t *)a[1].view.buf, (const int64_t *)a[2].view.buf,
               (const int32_t *)a[3].view.buf, (const int32_t *)a[4].view.buf, (const int32_t *)a[5].view.buf,
               (const int32_t *)a[6].view.buf};
    int64_t n = N.size[entries];
    if (n < 0 || len_of(&a[25]) != n_int * n || len_of(&a[26]) != n_int * n || len_of(&a[27]) != n_bool * n ||
        len_of(&a[28]) != (n_str + 3) * n || len_of(&a[29]) != 2 * n)
        FAIL("output arrays do not match the entry count");
    /* strings the node table points at must lie in the buffer (decode guarantees it) */
    (void)nbuf;
    /* the table size bounds how many strings can be interned: as in Scratch.arrays */
    if (len_of(&a[20]) < nn)
        FAIL("dense_nodes shorter than the node table");
    Walk W = {(int64_t *)a[25].view.buf, (uint8_t *)a[26].view.buf, (int8_t *)a[27].view.buf,
              (int32_t *)a[28].view.buf, (int64_t *)a[29].view.buf, (int16_t *)a[10].view.buf,
              (int32_t *)a[11].view.buf, (int64_t *)a[23].view.buf, (int64_t *)a[24].view.buf, n_shape_slots};
    Strings S = {(int64_t *)a[12].view.buf, (int32_t *)a[13].view.buf, (int32_t)gen, (int64_t *)a[21].view.buf,
                 (int64_t *)a[22].view.buf, n_str_slots, (int64_t *)a[20].view.buf, 0};
    Shapes T = {(int64_t *)a[14].view.buf, (int64_t *)a[15].view.buf, (int64_t *)a[16].view.buf,
                (int64_t *)a[17].view.buf, (int64_t *)a[18].view.buf, (int64_t *)a[19].view.buf, cap};
    for (int64_t i = 0; i < n_str_slots; i++)
        S.str_val[i] = -1;
    for (int64_t i = 0; i < n_shape_slots; i++)
        W.shape_val[i] = -1;
    int64_t counts[4];
    int status;
    const uint8_t *kb = (const uint8_t *)a[7].view.buf;
    const int64_t *ks = (const int64_t *)a[8].view.buf, *kl = (const int64_t *)a[9].view.buf;
    int64_t n_keys = len_of(&a[8]);
    Py_BEGIN_ALLOW_THREADS
    status = entry_columns_impl(&N, entries, kb, ks, kl, n_keys, &W, &S, &T, n_int, n_bool, n_str, counts);
    Py_END_ALLOW_THREADS
    release(a, NA);
#undef FAIL
    return Py_BuildValue("iLLLL", status, (long long)counts[0], (long long)counts[1], (long long)counts[2],
                         (long long)counts[3]);
}

static PyMethodDef methods[] = {
    {"decode", py_decode, METH_VARARGS, "pickle_nodes._decode in C: (status, root, nodes, edges)"},
    {"entry_columns", py_entry_columns, METH_VARARGS,
     "fr_columns._entry_columns in C: (status, n_dims, n_tensors, n_shapes, n_dense); outputs filled in place"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "frdecode",
                                    "The Flight Recorder decoder's kernels, compiled with the package (see the C source).",
                                    -1, methods};

PyMODINIT_FUNC PyInit_frdecode(void)
{
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    /* (OK, E_OPCODE ... E_UNHASHABLE, MAX_DEPTH, kinds K_NONE ... K_DICT, DECLINE): compared at import */
    PyObject *c = Py_BuildValue("(iiiiiiiiiiiiii)i(iiiiiiiii)i", OK, E_OPCODE, E_TRUNCATED, E_STACK, E_MEMO, E_NO_STOP,
                                E_CAPACITY, E_DEPTH, E_EXPANSION, E_MEMO_INDEX, E_MUTATED, E_CYCLE, E_UTF8,
                                E_UNHASHABLE, MAX_DEPTH, K_NONE, K_BOOL, K_INT, K_BIGINT, K_FLOAT, K_STR, K_LIST,
                                K_TUPLE, K_DICT, DECLINE);
    if (c == NULL || PyModule_AddObject(m, "CONSTANTS", c) < 0) {
        Py_XDECREF(c);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
