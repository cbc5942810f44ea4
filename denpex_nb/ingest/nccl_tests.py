"""nccl-tests / rccl-tests output (``all_reduce_perf`` and friends): the rank map, the result table
and its summary (docs/formats.md#nccl-tests).

Why: a benchmark run is the first thing asked for when a cluster's collectives are in doubt, and its
output is evidence both ways. Every result row is a collective that completed at one size and was
checked (the ``#wrong`` columns count wrong elements); a log holding only such rows read as
"nothing distributed" (``no-evidence``) though it shows the collectives working.

* The rank map ``#  Rank  0 Group  0 Pid  12414 on host-1 device  0 [0x1a] Tesla V100`` (``Group`` in
  newer versions, ``#`` lost in some pastes) gives a ``ranks`` row: ``rank``, ``pid``, ``host``,
  ``device`` (``cuda:<d>``).
* A result row ``8  2  float  sum  -1  17.08  0.00  0.00  0  16.76  0.00  0.00  0`` (size, count,
  type, redop, root, then time / algbw / busbw / #wrong out of place and in place; ``N/A`` where
  nothing was checked; the first nccl-tests printed neither redop nor root and, for ``#wrong``, the
  largest deviation found, ``65536  2048  float  52.01  1.26  1.10  0e+00  50.09 ...``) is consumed; one with a wrong count above zero is an ``nccl_error`` row (the
  collective returned wrong data). The table's header lines, ``# nThread ... nGpus ...``,
  ``# Using devices``, ``rccl-tests: Version``, ``# Avg bus bandwidth : X`` and ``# Out of bounds
  values : 0 OK`` are consumed; ``Out of bounds values : N FAILED`` with N above zero is an
  ``nccl_error`` row.
* A measured bandwidth line of a benchmark script (``algbw: 11.135 GBps``, ``busbw: 20.8 GB/s``) is
  consumed: a completed measurement.

Nothing here says a run finished: a table cut after two sizes is two sizes that worked.
"""

from __future__ import annotations

import re

from ..vocab import ErrorKind
from ._text import add_error, error_row, i32
from .base import FileContext, Line, Output, TextReader, register_text_reader

SOURCE = "nccl_tests"

_RANK = re.compile(
    r"^#?\s*Rank\s+(\d{1,7})\s+(?:Group\s+\d{1,7}\s+)?Pid\s+(\d{1,10})\s+on\s+(\S{1,200})\s+device\s+(\d{1,4})\b"
)
_TYPES = r"(?:float|double|half|bfloat16|int8|uint8|int32|uint32|int64|uint64|f8e4m3|f8e5m2|fp8\w{0,8}|\w{1,12})"
_NUM = r"(?:\d{1,12}(?:\.\d{1,6})?|N/A)"
#: the type names nccl-tests prints (a row without its redop column must show one of them)
_TYPE_NAMES = r"(?:float|double|half|bfloat16|int8|uint8|int32|uint32|int64|uint64|f8e4m3|f8e5m2)"
#: the error cell of the first nccl-tests (no redop and root columns): the largest deviation found,
#: ``0e+00``, ``4e-07`` (float rounding, not wrong data)
_ERR = r"(?:\d{1,12}|N/A|\d(?:\.\d{1,6})?e[+-]\d{2,3})"
#: size, count, type, redop, root, then two (time, algbw, busbw, #wrong) groups (in place: may be absent);
#: the first nccl-tests printed no redop and root and a deviation (``0e+00``) for ``#wrong``: then the
#: type must be one of nccl-tests' names and the last cells that deviation or a count
_ROW = re.compile(
    r"^\s*(\d{1,15})\s+(\d{1,15})\s+"
    r"(?:"
    + _TYPES
    + r"\s+(?:sum|prod|max|min|avg|mulsum|none)\s+-?\d{1,7}|"
    + _TYPE_NAMES
    + r"(?=\s+"
    + _NUM
    + r"\s+"
    + _NUM
    + r"\s+"
    + _NUM
    + r"\s+"
    + _ERR
    + r"(?:\s|$)))"
    r"\s+"
    + _NUM
    + r"\s+"
    + _NUM
    + r"\s+"
    + _NUM
    + r"\s+(\S{1,8})(?:\s+"
    + _NUM
    + r"\s+"
    + _NUM
    + r"\s+"
    + _NUM
    + r"\s+(\S{1,8}))?\s*$"
)
_HEADER = re.compile(
    r"^#\s*(?:nThread\b|Using devices\s*$|size\s+count\s+type\b|\(B\)\s+\(elements\)|Avg bus bandwidth\s*:"
    r"|Out of bounds values\s*:\s*0\s+OK\b|out-of-place\s+in-place\s*$)"
    r"|^(?:nccl|rccl)-tests: Version\b"
)
_OOB = re.compile(r"Out of bounds values\s*:\s*(\d{1,12})\s+FAILED")
_BANDWIDTH = re.compile(r"\b(?:alg|bus)bw\s*[:=]\s*\d{1,9}(?:\.\d{1,6})?\s*(?:GB/?s|GBps|Gbps|Gb/s|MB/s|MBps)\b")


def _wrong(v: str | None) -> int:
    """A ``#wrong`` cell: its count (``N/A``, absent or unreadable: 0, nothing checked)."""
    return int(v) if v is not None and v.isdigit() else 0


class NcclTestsReader(TextReader):
    name = SOURCE
    blocks_alone = True
    needles = (
        b"Pid ",
        b"nThread",
        b"Using devices",
        b"#wrong",
        b"(elements)",
        b"out-of-place",
        b"-tests: Version",
        b"Avg bus bandwidth",
        b"Out of bounds values",
        b"algbw",
        b"busbw",
        # result rows: the type column is printed %8s and the redop %6s, two spaces apart
        b"     sum ",
        b"    prod ",
        b"     max ",
        b"     min ",
        b"     avg ",
        b"    none ",
        b"  mulsum ",
        # rows of the first nccl-tests (no redop column): the type column, right-aligned
        b"   float ",
        b"  double ",
        b"    half ",
        b"bfloat16 ",
        b"    int8 ",
        b"   int32 ",
        b"   int64 ",
    )

    def parse(self, block: list[Line], ctx: FileContext, out: Output) -> None:
        for line in block:
            if self._line(line, ctx, out):
                out.consume(line)

    def _line(self, line: Line, ctx: FileContext, out: Output) -> bool:
        text = line.text
        if "Pid" in text and (m := _RANK.match(text)):
            out.ranks.append(
                {
                    "rank": i32(m.group(1)),
                    "pid": i32(m.group(2)),
                    "host": m.group(3),
                    "device": f"cuda:{int(m.group(4))}",
                    "source": SOURCE,
                    "file": ctx.file,
                    "line": line.lineno,
                }
            )
            return True
        head = text.lstrip()
        # a label the prefix stripper could not trust on a lone line ("node0: # nThread ...")
        k = head.find("#")
        if _HEADER.match(head) or (0 < k <= 40 and _HEADER.match(head[k:])):
            return True
        if "Out of bounds" in text and (m := _OOB.search(text)) and int(m.group(1)) > 0:
            add_error(out, error_row(line, ctx, SOURCE, ErrorKind.NCCL_ERROR, f"nccl-tests: {text.strip()}"))
            return True
        if (m := _ROW.match(text)) is not None:
            wrong = _wrong(m.group(3)) + _wrong(m.group(4))
            if wrong:
                msg = f"nccl-tests: {wrong} wrong element(s) at size {m.group(1)}: {text.strip()}"
                add_error(out, error_row(line, ctx, SOURCE, ErrorKind.NCCL_ERROR, msg))
            return True
        return ("algbw" in text or "busbw" in text) and _BANDWIDTH.search(text) is not None


register_text_reader(NcclTestsReader())
