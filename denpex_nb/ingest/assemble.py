"""Put the per-file results together into one :class:`~denpex_nb.incident.Incident`.

Three jobs, each a vectorised pass over the concatenated frames:

* **de-duplicate** what one run reports twice (``combined.log`` and ``attempt_0/<R>/*.log`` hold
  the same lines): rows with the same key seen in several files of the same run keep only the
  rows of the first such file;
* **attribute** NCCL_DEBUG_FILE output (``nccl.<host>.<pid>.log``) to ranks through pids named
  elsewhere (Init lines, agent ``local_rank: L (pid: P)``, ChildFailedError ``(pid: P)``);
* **summarise** ``ranks`` (one row per rank seen) and ``progress``.

Typing never raises on what a log said: a number that does not fit its column (a rank past
Int32, a sequence number past Int64, ``inf`` where an integer belongs, text) becomes a missing
value for that row, and :func:`build_incident` adds one note per column saying how many.
"""

from __future__ import annotations

import re
from enum import Enum

import numpy as np
import pandas as pd

from ..incident import SCHEMAS, Incident, check_schema, coerce, empty_frame
from ..vocab import IGNORED_EXCEPTION, SEQ_KIND_PREFERENCE, ErrorKind

#: columns that identify "the same observation" when two files of one run report it
EVENT_KEY = ("rank", "pg", "seq_kind", "seq", "op", "state", "source")
ERROR_KEY = ("rank", "kind", "message")
PROGRESS_KEY = ("rank", "pg", "seq_kind", "last_enqueued", "last_started", "last_completed")


# --- column batches ------------------------------------------------------------------------------
#
# Per-file results travel as *column batches* (dict: column -> list), not DataFrames: building a
# DataFrame costs milliseconds even for a handful of rows, which adds up over 1024 FR dumps. All
# batches of one frame are merged list-wise and typed once, in :func:`build_frame`.

Batch = dict  # column name -> list (all the same length)


class Const:
    """A column holding one value ``n`` times (an FR dump's file, source, rank ...): no list of
    2000 pointers per dump, and categoricals built from codes instead of hashing every row."""

    __slots__ = ("value", "n")

    def __init__(self, value, n: int):
        self.value, self.n = value, n

    def __len__(self):
        return self.n

    def __iter__(self):
        return iter([self.value] * self.n)

    def __contains__(self, x):
        return self.n > 0 and (self.value is x or self.value == x)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self.value] * len(range(*i.indices(self.n)))
        return self.value

    def __getstate__(self):
        return (self.value, self.n)

    def __setstate__(self, state):
        self.value, self.n = state


class Coded:
    """A column as integer codes into a short list of distinct values (code -1 = missing).

    What the compiled Flight Recorder reader returns for ops, dtypes, process groups and shapes:
    2M rows stay one int32 array plus a handful of values until :func:`build_frame` makes a
    categorical straight from the codes (or an object column by one ``take``)."""

    __slots__ = ("codes", "values", "from_const")

    def __init__(self, codes: np.ndarray, values: list, from_const: bool = False):
        self.codes, self.values = codes, list(values)
        #: made by :func:`merge_batches` from Const parts only: categories keep first-seen order
        self.from_const = from_const

    def __len__(self):
        return len(self.codes)

    def __iter__(self):
        lookup = self.values + [None]
        return iter([lookup[c] for c in self.codes.tolist()])

    def __getstate__(self):
        return (self.codes, self.values, self.from_const)

    def __setstate__(self, state):
        self.codes, self.values, self.from_const = state if len(state) == 3 else (*state, False)


class Nullable:
    """An integer or boolean column as plain numpy ``values`` plus a ``missing`` mask: cheaper to
    build in a worker and to send back than a pandas masked array, which :func:`build_frame`
    makes once for all batches."""

    __slots__ = ("values", "missing")

    def __init__(self, values: np.ndarray, missing: np.ndarray | None):
        self.values, self.missing = values, missing  # missing None: nothing is missing

    def __len__(self):
        return len(self.values)

    def __iter__(self):
        if self.missing is None:
            return iter(self.values.tolist())
        return iter([None if m else v for v, m in zip(self.values.tolist(), self.missing.tolist())])

    def mask(self) -> np.ndarray:
        return np.zeros(len(self.values), dtype=bool) if self.missing is None else self.missing

    def __getstate__(self):
        return (self.values, self.missing)

    def __setstate__(self, state):
        self.values, self.missing = state


def batch_len(b: Batch) -> int:
    for v in b.values():
        return len(v)
    return 0


def rows_to_batch(rows: list[dict]) -> Batch:
    """Row dicts (what TextReaders append) -> one column batch."""
    cols: dict[str, list] = {}
    n = len(rows)
    for i, row in enumerate(rows):
        for k, v in row.items():
            col = cols.get(k)
            if col is None:
                col = cols[k] = [None] * n
            col[i] = v
    return cols


_COMPACT = {"Int32": np.int64, "Int64": np.int64, "boolean": bool}


def compact_batch(name: str, b: Batch) -> Batch:
    """Turn complete integer / boolean columns of a big batch into numpy arrays: a fraction of the
    memory of Python lists, cheap to pickle back from a worker, concatenated without a loop."""
    if batch_len(b) < 256:
        return b
    schema = SCHEMAS[name]
    for c, v in list(b.items()):
        kind = _COMPACT.get(schema.get(c) or EXTRA_DTYPES.get(c) or ("Int64" if c == "_t_wall_ns" else ""))
        if kind is None or not isinstance(v, list) or None in v:
            continue
        try:
            arr = np.array(v, dtype=kind)
        except (TypeError, ValueError, OverflowError):
            continue
        if kind is np.int64 and arr.dtype == np.int64 and any(type(x) is float for x in v[:1]):
            continue
        if kind is np.int64 and not _fits(arr, schema.get(c) or EXTRA_DTYPES.get(c) or "Int64"):
            continue  # typed (and its misfits made missing) in build_frame
        b[c] = arr
    return b


def merge_batches(name: str, batches: list[Batch]) -> list[Batch]:
    """Consecutive column batches of one frame merged into one batch, or the batches unchanged when
    some column cannot be merged exactly (then :func:`build_frame` takes them one by one).

    Why: a worker of the process pool parses 64 Flight Recorder dumps per task; merged there, in
    parallel, the parent's :func:`build_frame` handles 16 parts per column instead of 1024 (its
    per-part Python work was ~0.5 s of a serial 0.8 s). The merged batch builds the same frame:
    constant parts of one value stay :class:`Const`; Const and :class:`Coded` parts of a categorical
    or object column become one Coded part (its values in first-seen order; ``from_const`` when
    every part was a constant, so the categories keep first-seen order as they would have);
    nullable numeric parts (Const ints, :class:`Nullable`, numpy arrays) become one Nullable (or one
    array) holding the same values and missing rows. Anything else (lists, text, a column some
    batches lack) is left alone."""
    if len(batches) < 2:
        return batches
    cols = list(batches[0])
    if any(len(b) != len(cols) or any(c not in b for c in cols) for b in batches[1:]):
        return batches
    schema = SCHEMAS[name]
    merged: Batch = {}
    for c in cols:
        parts = [b[c] for b in batches]
        part = _merge_parts(parts, schema.get(c) or EXTRA_DTYPES.get(c) or ("Int64" if c == "_t_wall_ns" else None))
        if part is None:
            return batches
        merged[c] = part
    return [merged]


def _merge_parts(parts: list, dtype: str | None):
    """One part for :func:`merge_batches`, or None when these parts cannot be merged exactly."""
    first = parts[0]
    if isinstance(first, Const) and all(
        isinstance(p, Const) and type(p.value) is type(first.value) and p.value == first.value for p in parts
    ):
        return Const(first.value, sum(p.n for p in parts))
    if dtype in ("category", "object") and all(isinstance(p, (Const, Coded)) for p in parts):
        index: dict = {}
        codes = []
        try:
            for p in parts:
                if isinstance(p, Const):
                    code = -1 if p.value is None else index.setdefault(p.value, len(index))
                    codes.append(np.full(p.n, code, dtype=np.int32))
                else:
                    remap = [-1 if v is None else index.setdefault(v, len(index)) for v in p.values]
                    codes.append(np.array(remap + [-1], dtype=np.int32)[p.codes])
        except TypeError:  # an unhashable value
            return None
        values = list(index)
        # an object column keeps each part's own objects: merge only shapes, whose equal values are
        # interchangeable (a category column unions its values by equality anyway, see _coded_categorical)
        if any(v != v for v in values) or (dtype == "object" and not all(_is_shape(v) for v in values)):
            return None
        width = np.int8 if len(values) < 127 else np.int16 if len(values) < 32767 else np.int32
        return Coded(np.concatenate(codes).astype(width), values, all(isinstance(p, Const) for p in parts))
    if dtype in _MASKED:
        kinds = "b" if dtype == "boolean" else "iu"
        values, missing = [], []
        for p in parts:
            if isinstance(p, Const):
                if p.value is None:
                    values.append(np.zeros(p.n, dtype=np.int8 if kinds == "iu" else bool))
                    missing.append(np.ones(p.n, dtype=bool))
                    continue
                if (kinds == "b" and type(p.value) is not bool) or (kinds == "iu" and type(p.value) is not int):
                    return None
                if kinds == "iu" and not _INT_RANGE["Int64"][0] <= p.value <= _INT_RANGE["Int64"][1]:
                    return None
                values.append(np.full(p.n, p.value))
                missing.append(np.zeros(p.n, dtype=bool))
            elif isinstance(p, (Nullable, np.ndarray)):
                v = p.values if isinstance(p, Nullable) else p
                if v.dtype.kind not in kinds:
                    return None
                values.append(v)
                missing.append(p.mask() if isinstance(p, Nullable) else np.zeros(len(v), dtype=bool))
            else:
                return None
        out = np.concatenate(values)
        if out.dtype.kind not in kinds:  # mixed signed / unsigned promoted to float: leave alone
            return None
        gaps = np.concatenate(missing)
        return Nullable(_narrow_ints(out) if kinds == "iu" else out, gaps if gaps.any() else None)
    return None


def _narrow_ints(values: np.ndarray) -> np.ndarray:
    """Integers in the narrowest signed dtype that holds them: a merged batch travels back from a
    worker, and a dump's constant columns (its rank, as int64 after the merge) would otherwise cost
    8 bytes a row; :func:`build_frame` widens them again."""
    if not len(values) or values.dtype.itemsize == 1:
        return values
    lo, hi = int(values.min()), int(values.max())
    for kind in (np.int8, np.int16, np.int32):
        if kind().itemsize < values.dtype.itemsize and np.iinfo(kind).min <= lo and hi <= np.iinfo(kind).max:
            return values.astype(kind)
    return values


def _is_shape(v) -> bool:
    """A shapes value as the Flight Recorder readers make it: a tuple of tuples of plain ints."""
    return type(v) is tuple and all(type(t) is tuple and all(type(d) is int for d in t) for t in v)


def frame_to_batch(df: pd.DataFrame) -> Batch:
    return {c: df[c].astype("object").where(df[c].notna(), None).tolist() for c in df.columns}


def as_batches(items) -> list[Batch]:
    """Normalise a mix of DataFrames, row lists and batches into non-empty batches."""
    out = []
    for it in items:
        if it is None:
            continue
        if isinstance(it, pd.DataFrame):
            b = frame_to_batch(it)
        elif isinstance(it, list):
            b = rows_to_batch(it)
        else:
            b = it
        if batch_len(b):
            out.append(b)
    return out


#: dtypes of the extra (non-schema) columns that built-in readers add
EXTRA_DTYPES = {
    "retired": "boolean",
    "is_p2p": "boolean",
    "record_id": "Int64",
    "collective_seq_id": "Int64",
    "p2p_seq_id": "Int64",
    "timeout_ms": "Int64",
    "t_done_wall": "datetime64[ns, UTC]",
    "t_done_mono": "Float64",
}


_INT_RANGE = {"Int32": (-(1 << 31), (1 << 31) - 1), "Int64": (-(1 << 63), (1 << 63) - 1)}


def _fits(arr: np.ndarray, dtype: str) -> bool:
    """Do all values of the int64 array ``arr`` fit ``dtype`` (Int32 / Int64)?"""
    lo, hi = _INT_RANGE.get(dtype, _INT_RANGE["Int64"])
    return not len(arr) or (int(arr.min()) >= lo and int(arr.max()) <= hi)


def _as_number(v, dtype: str):
    """``v`` as a value of the numeric ``dtype`` (Int32 / Int64 / Float64), or None when it does not
    fit (out of range, not a whole number for an integer column, not a number)."""
    if dtype == "Float64":
        try:
            f = float(v)
        except (TypeError, ValueError, OverflowError):
            return None
        return f
    try:
        if isinstance(v, (float, np.floating)):
            if not np.isfinite(v) or v != int(v):
                return None
        iv = int(v)
    except (TypeError, ValueError, OverflowError):
        try:
            f = float(v)  # "12.0" and the like
            iv = int(f) if np.isfinite(f) and f == int(f) else None
        except (TypeError, ValueError, OverflowError):
            return None
        if iv is None:
            return None
    lo, hi = _INT_RANGE[dtype]
    return iv if lo <= iv <= hi else None


def _numbers(values, dtype: str, on_bad=None):
    """The slow, total path for a nullable numeric column: each value converted on its own, misfits
    missing (counted through ``on_bad``)."""
    n = len(values)
    np_type = np.float64 if dtype == "Float64" else np.int64
    data = np.zeros(n, dtype=np_type)
    missing = np.zeros(n, dtype=bool)
    bad = 0
    for i, v in enumerate(values.tolist() if isinstance(values, np.ndarray) else values):
        if v is None or v is pd.NA or (isinstance(v, float) and v != v and dtype != "Float64"):
            missing[i] = True
            continue
        x = _as_number(v, dtype)
        if x is None:
            missing[i] = True
            bad += 1
        else:
            data[i] = x
    if bad and on_bad is not None:
        on_bad(bad)
    if dtype == "Float64":
        return pd.arrays.FloatingArray(data, missing)
    return pd.arrays.IntegerArray(data.astype(_NUMPY_OF[dtype]), missing)


def _typed(values, dtype: str | None, on_bad=None):
    """``values`` (a list or numpy array) as a column of ``dtype``; never raises for odd values: a
    number that does not fit a numeric column is missing, counted through ``on_bad(n)``."""
    n = len(values)
    if isinstance(values, np.ndarray):
        if dtype in ("Int32", "Int64"):
            if values.dtype.kind in "iu" and _fits(values, dtype):
                return pd.array(values, dtype=dtype)
            return _numbers(values, dtype, on_bad)
        if dtype in ("Float64", "boolean"):
            try:
                return pd.array(values, dtype=dtype)
            except (TypeError, ValueError, OverflowError):
                pass
        values = values.tolist()
    if dtype is None:
        try:
            return pd.array(values)
        except Exception:
            return pd.array(values, dtype="object")
    if dtype == "boolean":
        try:
            return pd.array(np.array(values, dtype=bool) if None not in values else values, dtype="boolean")
        except (TypeError, ValueError):
            return pd.array(values, dtype="object")
    if dtype == "category":
        if values.count(None) == n:  # no values: object categories, not pandas' float64
            return _missing_column(n, dtype)
        try:
            column = pd.Categorical(values)
        except TypeError:
            return pd.Categorical([None if v is None else str(v) for v in values])
        if any(isinstance(c, Enum) for c in column.categories):  # vocabulary members: store their plain strings
            column = column.rename_categories([str.__str__(c) for c in column.categories])
        return column
    if dtype in ("Int32", "Int64", "Float64"):
        try:  # fast path: no missing values, plain numbers
            arr = np.array(values, dtype=np.float64 if dtype == "Float64" else np.int64)
            if dtype == "Float64" or (_fits(arr, dtype) and not any(type(x) is float for x in values[:1])):
                return pd.array(arr, dtype=dtype)
        except (TypeError, ValueError, OverflowError):
            pass
        try:  # missing values among plain numbers of the right size
            if all(v is None or type(v) is int for v in values):
                ints = [v for v in values if v is not None]
                if not ints or (
                    min(ints) >= _INT_RANGE.get(dtype, (0, 0))[0] and max(ints) <= _INT_RANGE.get(dtype, (0, 0))[1]
                ):
                    return pd.array(values, dtype=dtype)
        except (TypeError, ValueError, OverflowError):
            pass
        return _numbers(values, dtype, on_bad)
    if dtype.startswith("datetime64"):
        if values.count(None) == n:
            return _missing_column(n, dtype)
        try:
            t = pd.to_datetime(pd.Series(values, dtype="object"), utc=True, errors="coerce", format="mixed")
        except (TypeError, ValueError, OverflowError):
            t = pd.Series([_one_time(v) for v in values], dtype="object")
            t = pd.to_datetime(t, utc=True, errors="coerce")
        if str(t.dtype) != dtype:  # a time outside the nanosecond range (years before 1677, after 2262)
            lo, hi = pd.Timestamp.min.tz_localize("UTC"), pd.Timestamp.max.tz_localize("UTC")
            bad = t.notna() & ((t < lo) | (t > hi))
            if bad.any() and on_bad is not None:
                on_bad(int(bad.sum()))
            t = t.where(~bad).astype(dtype)
        return t.array
    if dtype == "string":
        try:
            return pd.array(values, dtype="string")
        except (TypeError, ValueError):
            return pd.array([None if v is None else str(v) for v in values], dtype="string")
    return pd.Series(values, dtype="object").array


def _one_time(v):
    """One value as a time pandas can hold, or None."""
    try:
        t = pd.to_datetime(v, utc=True, errors="coerce")
    except (TypeError, ValueError, OverflowError):
        return None
    return (
        None
        if t is pd.NaT or not (pd.Timestamp.min.tz_localize("UTC") <= t <= pd.Timestamp.max.tz_localize("UTC"))
        else t
    )


def build_frame(name: str, batches, misfits: dict | None = None) -> pd.DataFrame:
    """Merge column batches (or DataFrames / row lists) into one frame with the schema's dtypes.

    A ``_t_wall_ns`` column (integer nanoseconds, what FR dumps carry) fills ``t_wall`` where it
    is missing, without making a Timestamp object per entry. Values that do not fit their numeric
    column become missing; ``misfits`` (when given) counts them per ``"frame.column"``.
    """
    batches = as_batches(batches)
    if not batches:
        return empty_frame(name)
    schema = SCHEMAS[name]
    cols = list(schema)
    for b in batches:
        for c in b:
            if c not in schema and c not in cols:
                cols.append(c)
    data = {}
    merged_ns = None

    def bad(n: int, _name=name) -> None:
        if misfits is not None:
            misfits[f"{_name}.{c}"] = misfits.get(f"{_name}.{c}", 0) + n

    for c in cols:
        parts = [b.get(c) for b in batches]
        dtype = schema.get(c) or EXTRA_DTYPES.get(c) or ("Int64" if c == "_t_wall_ns" else None)
        # what the parts are, asked of their distinct types (a part is an instance of a class exactly
        # when its type is a subclass of it): one pass over 50,000 tiny files' batches, not eight
        types = set(map(type, parts))
        if types == {type(None)} and c != "_t_wall_ns":  # a column no batch has: all missing
            if c == "t_wall" and any("_t_wall_ns" in b for b in batches):
                data[c] = None  # made from the nanoseconds below (FR dumps): no column of NaT first
                continue
            data[c] = _missing_column(sum(batch_len(b) for b in batches), dtype)
            continue
        if _any_is(types, Coded) or (dtype in _MASKED and _any_is(types, (Nullable, pd.api.extensions.ExtensionArray))):
            parts = [Const(None, batch_len(b)) if p is None else p for b, p in zip(batches, parts)]
            types = set(map(type, parts))
        if dtype == "category" and _all_are(types, (Const, Coded)):
            data[c] = _coded_categorical(parts)
            continue
        if dtype == "object" and _all_are(types, (Const, Coded)):
            data[c] = pd.Series(_object_concat(parts), dtype="object").array
            continue
        if dtype in _MASKED and _all_are(types, _ARRAY_PARTS) and not _all_are(types, np.ndarray):
            values = _masked_concat(parts, dtype, bad)
            if c == "_t_wall_ns":
                merged_ns = values
            else:
                data[c] = values
            continue
        if _all_are(types, np.ndarray):  # compacted numeric columns
            values = np.concatenate(parts)
        elif types == {list}:  # plain rows of small files
            values = [v for p in parts for v in p]
        else:
            values = []
            for b, p in zip(batches, parts):
                if p is None:
                    values.extend([None] * batch_len(b))
                elif isinstance(p, np.ndarray):
                    values.extend(p.tolist())
                elif isinstance(p, Const):
                    values.extend([p.value] * p.n)
                else:
                    values.extend(p)
        if c == "_t_wall_ns":
            merged_ns = values
            continue
        data[c] = _typed(values, dtype, bad)
    if merged_ns is not None and "t_wall" in data:
        ns = merged_ns if isinstance(merged_ns, pd.api.extensions.ExtensionArray) else _typed(merged_ns, "Int64", bad)
        data["t_wall"] = _fill_times(data["t_wall"], ns)
    elif data.get("t_wall", 0) is None:
        data["t_wall"] = _missing_column(sum(batch_len(b) for b in batches), schema["t_wall"])
    df = pd.DataFrame(data, copy=False)  # the columns are fresh: no second copy of 2M rows
    return conform(name, df)


def _missing_column(n: int, dtype: str | None):
    """``n`` missing values of ``dtype``, built from arrays (not a list of n Nones)."""
    if dtype in _MASKED:
        return _masked_concat([Const(None, n)], dtype)
    if dtype == "category":
        return pd.Categorical.from_codes(np.full(n, -1, dtype=np.int8), categories=pd.Index([], dtype=object))
    if dtype and dtype.startswith("datetime64"):
        nat = pd.Series(np.full(n, np.datetime64("NaT"), dtype="datetime64[ns]"))
        return (nat.dt.tz_localize("UTC") if "UTC" in dtype else nat).array
    return _typed([None] * n, dtype)


def _fill_times(t_wall, ns: pd.arrays.IntegerArray):
    """``t_wall`` where known (None: nowhere), else the integer nanoseconds (FR dumps), as
    datetime64[ns, UTC] straight from the integers (no Timestamp per row)."""
    raw = ns.to_numpy(dtype=np.int64, na_value=np.iinfo(np.int64).min)  # int64 min is NaT
    fill = pd.array(raw.view("datetime64[ns]"), dtype="datetime64[ns, UTC]")
    if t_wall is None:
        return fill
    known = pd.Series(t_wall)
    if known.isna().all():
        return fill
    return known.where(known.notna(), pd.Series(fill)).array


_MASKED = ("Int32", "Int64", "boolean", "Float64")
_ARRAY_PARTS = (np.ndarray, pd.api.extensions.ExtensionArray, Const, Nullable)


def _all_are(types: set[type], cls) -> bool:
    """``all(isinstance(p, cls) for p in parts)`` from the parts' distinct ``types``."""
    return all(issubclass(t, cls) for t in types)


def _any_is(types: set[type], cls) -> bool:
    """``any(isinstance(p, cls) for p in parts)`` from the parts' distinct ``types``."""
    return any(issubclass(t, cls) for t in types)


def _coded_categorical(parts: list) -> pd.Categorical:
    """One categorical from Const and Coded parts: categories are the union of their values (in
    first-seen order for constants, sorted once a coded part is involved, as ``pd.Categorical`` of
    a list sorts them); codes are written part by part into one array, each Coded part remapped
    with one ``take`` (no per-row hashing)."""
    cats: dict = {}
    for p in parts:
        for v in [p.value] if isinstance(p, Const) else p.values:
            if v is not None and v not in cats:
                cats[v] = len(cats)
    if any(isinstance(p, Coded) and not p.from_const for p in parts):  # sorted, as pd.Categorical(list) would be
        try:
            cats = {v: i for i, v in enumerate(sorted(cats))}
        except TypeError:
            pass
    # codes as narrow as pandas keeps them (it would otherwise narrow a copy of 2M int32 codes)
    width = np.int8 if len(cats) < 127 else np.int16 if len(cats) < 32767 else np.int32
    codes = np.empty(sum(len(p) for p in parts), dtype=width)
    remaps: dict = {}  # dumps of one job share their value lists
    pos = 0
    for p in parts:
        n = len(p)
        if isinstance(p, Const):
            codes[pos : pos + n] = cats.get(p.value, -1) if p.value is not None else -1
        else:
            key = tuple(p.values)
            remap = remaps.get(key)
            if remap is None:
                remap = remaps[key] = np.array([cats[v] if v is not None else -1 for v in p.values] + [-1], dtype=width)
            codes[pos : pos + n] = remap[p.codes]
        pos += n
    # every code was written above from ``cats`` (or -1): pandas need not check 2M of them again
    return pd.Categorical.from_codes(codes, categories=list(cats), validate=False)


def _object_concat(parts: list) -> np.ndarray:
    """Const and Coded parts as one object array (values such as shape tuples stay whole)."""
    out = np.empty(sum(len(p) for p in parts), dtype=object)
    lookups: dict = {}
    pos = 0
    for p in parts:
        n = len(p)
        if isinstance(p, Const):
            out[pos : pos + n] = _object_lookup([p.value])[:1]  # broadcast one object, even a tuple
        else:
            key = tuple(p.values)
            lookup = lookups.get(key)
            if lookup is None:
                lookup = lookups[key] = _object_lookup(p.values)
            out[pos : pos + n] = lookup[p.codes]
        pos += n
    return out


def _object_lookup(values: list) -> np.ndarray:
    """``values + [None]`` as an object array, element by element (tuples stay tuples)."""
    arr = np.empty(len(values) + 1, dtype=object)
    for i, v in enumerate(values):
        arr[i] = v
    arr[-1] = None
    return arr


_NUMPY_OF = {"Int32": np.int32, "Int64": np.int64, "boolean": np.bool_, "Float64": np.float64}


def _masked_concat(parts: list, dtype: str, on_bad=None):
    """Concatenate numpy, Nullable, pandas masked and Const parts of a nullable numeric column,
    writing each part into one preallocated values array and one mask. A part whose values do not
    fit ``dtype`` (an int64 past Int32, a constant past its range) goes through :func:`_typed`."""
    if dtype in _INT_RANGE:
        fixed = []
        for p in parts:
            if isinstance(p, Const) and p.value is not None and _as_number(p.value, dtype) is None:
                if on_bad is not None:
                    on_bad(p.n)
                p = Const(None, p.n)
            elif isinstance(p, (np.ndarray, Nullable)):
                vals = p if isinstance(p, np.ndarray) else p.values
                if vals.dtype.kind not in "iub" or not _fits(vals, dtype):
                    typed = _typed(vals, dtype, on_bad)
                    if isinstance(p, Nullable) and p.missing is not None:
                        typed[p.missing] = pd.NA
                    p = typed
            fixed.append(p)
        parts = fixed
    if all(isinstance(p, (Nullable, np.ndarray, Const)) for p in parts):
        total = sum(len(p) for p in parts)
        values = np.zeros(total, dtype=_NUMPY_OF[dtype])
        missing = np.zeros(total, dtype=bool)
        pos = 0
        for p in parts:
            n = len(p)
            if isinstance(p, Nullable):
                values[pos : pos + n] = p.values
                if p.missing is not None:
                    missing[pos : pos + n] = p.missing
            elif isinstance(p, np.ndarray):
                values[pos : pos + n] = p
            elif p.value is None:
                missing[pos : pos + n] = True
            else:
                values[pos : pos + n] = p.value
            pos += n
        if dtype == "boolean":
            return pd.arrays.BooleanArray(values, missing)
        if dtype == "Float64":
            return pd.arrays.FloatingArray(values, missing)
        return pd.arrays.IntegerArray(values, missing)
    arrays = []
    for p in parts:
        if isinstance(p, Const):
            arrays.append(pd.array([p.value], dtype=dtype).take(np.zeros(p.n, dtype=np.intp)))
        elif isinstance(p, np.ndarray):
            arrays.append(pd.array(p, dtype=dtype))
        elif isinstance(p, Nullable):
            arrays.append(pd.array(np.where(p.mask(), None, p.values.astype(object)), dtype=dtype))
        else:
            arrays.append(p if str(p.dtype) == dtype else p.astype(dtype))
    return type(arrays[0])._concat_same_type(arrays)


def conform(name: str, df: pd.DataFrame) -> pd.DataFrame:
    """``coerce`` only when needed: columns typed by :func:`_typed` already follow the schema."""
    if check_schema(name, df):
        return coerce(name, df)
    order = list(SCHEMAS[name]) + [c for c in df.columns if c not in SCHEMAS[name]]
    return df[order] if list(df.columns) != order else df


def concat(name: str, frames) -> pd.DataFrame:
    """Concatenate frames / batches of one kind into one typed frame."""
    return build_frame(name, frames)


def _object_categories(s: pd.Series) -> pd.Series:
    """A categorical whose categories are plain Python objects (so any two can be unioned)."""
    if not isinstance(s.dtype, pd.CategoricalDtype):
        s = s.astype("object").where(s.notna(), None).astype("category")
    cats = s.cat.categories
    if cats.dtype != object:
        s = s.cat.rename_categories(cats.astype("object"))
    return s


def _group_key(df: pd.DataFrame, cols: tuple[str, ...]) -> pd.Series:
    """A hashable per-row key (NA-safe) over ``cols`` plus the run root."""
    use = [c for c in cols if c in df.columns]
    return pd.util.hash_pandas_object(df[use + ["_run"]].astype("object").astype("string").fillna("\x00"), index=False)


def dedup(df: pd.DataFrame, cols: tuple[str, ...], run_of_file: dict[str, str]) -> pd.DataFrame:
    """Drop rows whose key also appears in an earlier file of the same run (keep the first file's).

    Only (run, rank) pairs reported by two or more files can hold duplicates; the rest (one FR
    dump per rank, say) skip the costly key comparison. The pairs are found on the distinct
    (file, rank) combinations, so a 2M-row FR load pays one hash pass and nothing more.
    """
    if df.empty or df["file"].nunique(dropna=True) < 2:
        return df
    pairs = df[["file", "rank"]].iloc[_pair_starts(df)].drop_duplicates()
    pfile = pairs["file"].astype("object")
    prun = pfile.map(run_of_file).fillna(pfile)
    prank = pairs["rank"].astype("object").where(pairs["rank"].notna(), -1)
    n_files = (
        pd.DataFrame({"run": prun, "rank": prank, "file": pfile})
        .groupby(["run", "rank"], dropna=False)["file"]
        .transform("nunique")
    )
    shared_pairs = pairs[(n_files > 1).to_numpy()]
    if shared_pairs.empty:
        return df
    shared = pd.MultiIndex.from_frame(df[["file", "rank"]].astype("object")).isin(
        list(map(tuple, shared_pairs.astype("object").itertuples(index=False)))
    )
    files = df["file"].astype("object")[shared]
    sub = df[shared].copy()
    sub["_run"] = files.map(run_of_file).fillna(files)
    key = _group_key(sub, cols)
    file_order = {f: i for i, f in enumerate(run_of_file)}
    order = files.map(file_order).fillna(len(file_order)).astype("int64")
    first = order.groupby(key.values).transform("min")
    keep = np.ones(len(df), dtype=bool)
    keep[shared] = order.values == first.values
    return df[keep].reset_index(drop=True)


#: the exception line of a class no reader takes into its traceback (``KeyboardInterrupt``, ``SystemExit``)
_UNROUTED_EXC = re.compile(r"^[ \t]{0,16}(?:KeyboardInterrupt|SystemExit|GeneratorExit)\b")
#: the shapes of a traceback's own lines (a frame or its source line, indented; the header; Python's
#: report; an exception line ``Type: message``): a line of another shape inside the span is another
#: process's output that landed there (interleaved streams), never excused
_TB_SHAPE = re.compile(
    r"^(?:[ \t]|Traceback \(most recent call last\)|Exception ignored\b"
    r"|[A-Za-z_][\w.]{0,200}(?:Error|Exception|Interrupt|Exit|Warning)\b(?:\([\w.]{0,100}\))?(?::|$))"
)


def excuse_ignored(errors: pd.DataFrame, signals: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """An exception Python ignored (``Exception ignored in: ...`` and its traceback: the Python reader's
    ``warning`` row of category ``IGNORED_EXCEPTION`` spans them) never reached the program: the rows
    other readers made of its lines (an NCCL error quoted in it) are dropped, and its lines' signal rows
    are no failure. The line right after the span is the exception's own when it is of a class no
    reader takes into the traceback (``KeyboardInterrupt``). A line inside the span that is not shaped
    like a traceback's (another process's output interleaved there) keeps its rows."""
    if errors.empty or "warning_category" not in errors:
        return errors, signals
    is_ign = (errors["warning_category"].astype(object) == IGNORED_EXCEPTION).to_numpy()
    if not is_ign.any():
        return errors, signals
    ign = errors[is_ign]
    n = ign["n_traceback_lines"] if "n_traceback_lines" in ign else pd.Series(1, index=ign.index)
    spans = [
        (f, int(a), int(a) + (int(k) if pd.notna(k) else 1), None if pd.isna(r) else int(r))
        for f, a, k, r in zip(ign["file"].astype(object), ign["line"], n, ign["rank"])
        if pd.notna(a)
    ]

    def inside(df: pd.DataFrame, unrouted=None) -> np.ndarray:
        """Rows on a span's lines, of the rank that reported it (another rank's line is its own)."""
        files = df["file"].astype(object).to_numpy()
        lines = pd.to_numeric(df["line"], errors="coerce").to_numpy()
        ranks = pd.to_numeric(df["rank"], errors="coerce").to_numpy(dtype=float, na_value=np.nan)
        out = np.zeros(len(df), dtype=bool)
        for f, a, b, r in spans:
            hit = (lines >= a) & (lines < b)
            if unrouted is not None:
                hit |= (lines == b) & unrouted
            same = np.isnan(ranks) if r is None else ranks == r
            out |= (files == f) & hit & same
        return out

    other: set = set()  # lines in a span that are another process's output (see _TB_SHAPE)
    if not signals.empty:
        text = signals["text"].astype(str)
        unrouted = text.str.match(_UNROUTED_EXC).to_numpy()
        within = inside(signals, unrouted)
        shaped = text.str.match(_TB_SHAPE).to_numpy()
        other = set(zip(signals["file"].astype(object)[within & ~shaped], signals["line"][within & ~shaped]))
        mask = within & shaped
        if mask.any():
            signals = signals.copy()
            signals.loc[mask, "failure"] = False
    keep = [(f, ln) in other for f, ln in zip(errors["file"].astype(object), errors["line"])] if other else False
    errors = errors[~(inside(errors) & ~is_ign & ~np.asarray(keep, dtype=bool))].reset_index(drop=True)
    return errors, signals


def _pair_starts(df: pd.DataFrame) -> np.ndarray:
    """Positions of the rows whose (file, rank) differs from the row before: the first row of
    every distinct pair is one of them, so ``drop_duplicates`` over these rows keeps the same rows
    as over all of them. Why: rows come file by file, so a 2M-row load of 1024 dumps has ~1024 such
    runs; hashing every row's pair cost ~45 ms."""
    brk = np.zeros(len(df), dtype=bool)
    brk[:1] = True
    for col in (df["file"], df["rank"]):
        if isinstance(col.dtype, pd.CategoricalDtype):
            codes = col.cat.codes.to_numpy()  # -1 for missing
        elif pd.api.types.is_integer_dtype(col.dtype):
            codes = col.to_numpy("int64", na_value=0)
            missing = col.isna().to_numpy(bool)
            brk[1:] |= missing[1:] != missing[:-1]
        else:
            codes = pd.factorize(col)[0]  # -1 for missing
        brk[1:] |= codes[1:] != codes[:-1]
    return np.flatnonzero(brk)


def attribute_pids(frames: dict[str, pd.DataFrame], pid_files: dict[str, int], pid_to_rank: dict[int, int]) -> None:
    """Give NCCL_DEBUG_FILE rows (no rank yet) the rank whose pid the other files name."""
    if not pid_files or not pid_to_rank:
        return
    for name in ("events", "errors", "progress"):
        df = frames[name]
        if df.empty:
            continue
        for file, pid in pid_files.items():
            rank = pid_to_rank.get(pid)
            if rank is None:
                continue
            mask = (df["file"].astype("object") == file) & df["rank"].isna()
            if mask.any():
                df.loc[mask, "rank"] = rank


def _present(v) -> bool:
    if v is None or v is pd.NA or v is pd.NaT:
        return False
    return not (isinstance(v, float) and v != v)


#: extra columns of reader ``ranks`` rows kept on the ranks frame: ``world_size`` (the size of the
#: job as a rank or its launcher states it: NCCL's world Init line, Lightning's MEMBER i/N, DeepSpeed's
#: global_rank_mapping, torchrun's global_world_sizes, ProcessGroupNCCL's default-group options);
#: the largest stated value wins; ``addr`` (the address the rank's NCCL bootstrap uses, which a
#: peer's "connection closed by [addr]:port" names)
RANK_EXTRAS = ("world_size", "addr")


def merge_rank_reports(batches: list[Batch], rank_info: dict[int, dict]) -> dict[int, dict]:
    """rank -> {column: first value any source reported} (file order; ``rank_info`` last);
    ``world_size``: the largest any source stated."""
    cols = [c for c in SCHEMAS["ranks"] if c != "rank"] + list(RANK_EXTRAS)
    merged: dict[int, dict] = {}
    for b in batches:
        ranks = b.get("rank") or []
        present = [(c, b[c]) for c in cols if c in b]
        for i, r in enumerate(ranks):
            if not _present(r):
                continue
            rank = _as_number(r, "Int32")
            if rank is None:  # names no rank a job can have
                continue
            slot = merged.setdefault(rank, {})
            for c, col in present:
                v = col[i]
                if not _present(v):
                    continue
                if c not in slot:
                    slot[c] = v
                elif c == "world_size":
                    a, b_ = _as_number(slot[c], "Int32"), _as_number(v, "Int32")
                    if b_ is not None and (a is None or b_ > a):
                        slot[c] = b_
    for r, info in rank_info.items():
        rank = _as_number(r, "Int32")
        if rank is None:
            continue
        slot = merged.setdefault(rank, {})
        for c, v in info.items():
            if c in SCHEMAS["ranks"] and c not in slot and _present(v):
                slot[c] = v
    return merged


def summarise_ranks(frames: dict[str, pd.DataFrame], merged: dict[int, dict]) -> pd.DataFrame:
    """One row per rank seen anywhere (a ``load_error`` row names a file's rank, not a rank seen):
    what sources reported, completed from errors and progress."""
    merged = {r: dict(v) for r, v in merged.items()}
    for name in ("events", "errors", "progress"):
        df = frames[name]
        if name == "errors" and len(df):  # a file that could not be read is no sign its rank ran
            df = df[df["kind"].astype("object") != ErrorKind.LOAD_ERROR]
        col = df["rank"]
        if len(col):
            for r in col.dropna().unique():
                merged.setdefault(int(r), {})
    if not merged:
        return empty_frame("ranks")

    def fill(column: str, values: dict) -> None:
        for r, v in values.items():
            slot = merged.get(int(r))
            if slot is not None and column not in slot and _present(v):
                slot[column] = v

    errors = frames["errors"]
    if len(errors):
        real = errors[
            ~errors["kind"].astype("object").isin([ErrorKind.WARNING, ErrorKind.LOAD_ERROR]) & errors["rank"].notna()
        ]
        if len(real):
            fill("first_error_t", real.groupby("rank")["t_wall"].min().to_dict())
            codes = real[real["exit_code"].notna()]
            if len(codes):
                fill("exit_code", codes.groupby("rank")["exit_code"].first().to_dict())
            sigs = real[real["signal"].notna()]
            if len(sigs):
                first_sig: dict = {}
                for r, sig in zip(sigs["rank"], sigs["signal"].astype("object")):
                    first_sig.setdefault(int(r), sig)
                fill("signal", first_sig)
    prog = frames["progress"]
    if len(prog):
        dp = _default_pg_progress(prog)
        if len(dp):
            fill("last_seq_enqueued", dp.groupby("rank")["last_enqueued"].max().to_dict())
            fill("last_seq_completed", dp.groupby("rank")["last_completed"].max().to_dict())
    rows = [{"rank": r, **merged[r]} for r in sorted(merged)]
    # typed column by column (not ``pd.DataFrame(rows)``: ints beside a None become float64 there,
    # which rounds a pid past 2**53 and turns one near 2**63 into -2**63)
    df = build_frame("ranks", [rows_to_batch(rows)])
    if "world_size" in df.columns:
        df["world_size"] = _typed(
            df["world_size"].astype("object").where(df["world_size"].notna(), None).tolist(), "Int32"
        )
    return df


def _default_pg_progress(prog: pd.DataFrame) -> pd.DataFrame:
    """Progress rows of the default process group, per rank of the most direct counter kind it has."""
    pg = prog["pg"].astype("object")
    default = prog[pg.isin(["0", "default_pg"]) | pg.isna()]
    if default.empty:
        return default
    pref = {k: i for i, k in enumerate(SEQ_KIND_PREFERENCE)}  # the one order: most precise first
    rank_kind = default["seq_kind"].astype("object").map(pref).fillna(len(pref))
    best = rank_kind.groupby(default["rank"]).transform("min")
    return default[rank_kind == best]


def summarise_progress(prog: pd.DataFrame) -> pd.DataFrame:
    """Keep the furthest point per (rank, pg, seq_kind, file); sources stay visible."""
    if prog.empty:
        return prog
    return prog.reset_index(drop=True)


def build_incident(results, *, notes: list[str] | None = None, dedup_rows: bool = True) -> Incident:
    """Assemble :class:`FileResult` objects (in input order) into an Incident."""
    results = list(results)
    notes = list(notes or [])
    run_of_file = {r.file: r.run_root for r in results}
    misfits: dict[str, int] = {}
    frames = {
        name: build_frame(name, [b for r in results for b in r.frames.get(name, ())], misfits)
        for name in ("events", "errors", "progress", "unparsed", "signals")
    }
    for col, n in misfits.items():
        notes.append(f"{col}: {n} value(s) out of range or not a number for the column; they are missing values")
    rank_info: dict[int, dict] = {}
    for r in results:
        for rank, info in r.rank_info.items():
            slot = rank_info.setdefault(rank, {})
            for k, v in info.items():
                slot.setdefault(k, v)
    reports = merge_rank_reports(as_batches(b for r in results for b in r.frames.get("ranks", ())), rank_info)
    pid_to_rank = {pid: r for r, v in reports.items() if (pid := _as_number(v.get("pid"), "Int64")) is not None}
    attribute_pids(frames, {r.file: r.pid_hint for r in results if r.pid_hint is not None}, pid_to_rank)
    frames["errors"], frames["signals"] = excuse_ignored(frames["errors"], frames["signals"])
    if dedup_rows:
        frames["events"] = dedup(frames["events"], EVENT_KEY, run_of_file)
        frames["errors"] = dedup(frames["errors"], ERROR_KEY, run_of_file)
        frames["progress"] = dedup(frames["progress"], PROGRESS_KEY, run_of_file)
    frames["ranks"] = summarise_ranks(frames, reports)
    sources = coerce("sources", [r.source for r in results]) if results else empty_frame("sources")
    return Incident(
        events=frames["events"],
        errors=frames["errors"],
        ranks=frames["ranks"],
        progress=summarise_progress(frames["progress"]),
        unparsed=frames["unparsed"],
        signals=frames["signals"],
        sources=sources,
        notes=notes,
        mentions=_mentions(results),
    )


def _mentions(results) -> dict[str, list[str]]:
    """Watched word -> the files that mention it (every watched word has an entry)."""
    from ..vocab import MENTIONS

    found: dict[str, list[str]] = {name: [] for name in MENTIONS}
    for r in results:
        for name in getattr(r, "mentions", ()):
            found.setdefault(name, []).append(r.file)
    return found
