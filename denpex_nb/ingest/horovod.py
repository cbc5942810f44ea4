"""Horovod's stall inspector: which ranks have not submitted the tensors the others wait on
(docs/formats.md#horovod-stall).

Horovod's coordinator (rank 0) keeps, per tensor, the ranks that submitted it; past the stall
warning time it lists, for every rank of the job (``0 .. size-1``) that has *not* submitted a
tensor, that tensor. The list is therefore complete: a rank it does not name submitted everything
the report covers. Three shapes of the same report, by Horovod version (all written by the
coordinator, so the reporting line's rank is rank 0's, e.g. mpirun's ``[1,0]<stderr>:``):

* ``operations.cc`` (0.1x): ``Stalled ops:`` then one line per tensor,
  ``HorovodBroadcast_dense_1_bias_0 [missing ranks: 1]``;
* ``stall_inspector.cc`` (0.18-0.19): ``Stalled ranks:`` then one line per missing rank,
  ``6: [horovod_allreduce.0, horovod_allreduce.1 ...]``;
* ``stall_inspector.cc`` (0.20+): ``Missing ranks:`` then the same per-rank lines, a rank marked
  ``!`` when it stalled past the shutdown time (then ``... Will shutdown.``).

Each is preceded by the warning ``One or more tensors were submitted to be reduced, gathered or
broadcasted by subset of ranks and are waiting for remainder of ranks for more than N seconds``.

Rows: one ``stall_report`` error per report: ``related_ranks`` = every rank it names as missing,
``op`` = the collective its tensor names say when they agree (``HorovodAllreduce_grads_0``,
``horovod_allreduce.3``, ``DistributedSGD_Allreduce``), extra columns ``stalled_tensors`` (how many
tensor names the report lists) and ``shutdown`` (True when Horovod said it will shut down). A
warning seen without its list (cut off) is a ``stall_report`` with no ranks.

The per-rank lines carry no word of their own; the reader takes them as the needles ``N: [`` and
``N!: [`` (a digit, then ``: [``) and keeps, per file, the report they continue: blank lines and a
launcher's empty tag may stand between the header and its rows (mpirun tags every fragment).
"""

from __future__ import annotations

import re

from ..ops import normalize_op
from ..vocab import ErrorKind
from ._text import error_row, i32
from .base import FileContext, Line, Output, TextReader, register_text_reader

SOURCE = "horovod"

_WARNING = re.compile(r"submitted to be reduced, gathered or broadcasted by subset of ranks")
#: the list's header; what stands before it is a prefix no layer stripped (a collector's, mpirun's tag)
_HEADER = re.compile(r"(?:^|[\s:>\]])(?P<which>Stalled ops|Stalled ranks|Missing ranks):\s*(?P<rest>.*)$")
#: one stalled op (0.1x); each may be a warning line of its own, behind its glog/absl header
_OP_ROW = re.compile(r"(?:^|[\s\]])(?P<tensor>[^\s\[\]]+) \[missing ranks: (?P<ranks>\d[\d, ]*)\]")
#: one missing rank and its tensors (0.18+), behind whatever prefix stayed on the line
_RANK_ROW = re.compile(r"(?:^|[\s:>\]])(?P<rank>\d{1,9})(?P<bang>!?): \[(?P<tensors>[^\]]*)\]?")
_SHUTDOWN = re.compile(r"is stalled for longer than \d+ seconds\. Will shutdown")
#: a tensor name's collective: Horovod names ops HorovodAllreduce_x, horovod_allreduce.N, ..._Allgather
_TENSOR_OP = re.compile(r"(?i)(allreduce|allgather|broadcast|alltoall|reducescatter)")
_OPS = {
    "allreduce": "all_reduce",
    "allgather": "all_gather",
    "broadcast": "broadcast",
    "alltoall": "all_to_all",
    "reducescatter": "reduce_scatter",
}
#: physical lines between the rows of one report (blank lines, a launcher's empty tags)
_GAP = 3


def _ranks(text: str) -> list[int]:
    return [r for r in (i32(x) for x in re.findall(r"\d+", text)) if r is not None]


def tensor_op(names: list[str]) -> str | None:
    """The one collective the tensor names say, or None (names disagree or say none)."""
    ops = set()
    for n in names:
        m = _TENSOR_OP.search(n)
        if m:
            ops.add(normalize_op(_OPS[m.group(1).lower()]))
    return ops.pop() if len(ops) == 1 else None


class HorovodReader(TextReader):
    name = SOURCE
    needles = (
        b"submitted to be reduced, gathered or broadcasted",
        b"Stalled ops:",
        b"Stalled ranks:",
        b"Missing ranks:",
        b"[missing ranks:",
        b"Will shutdown.",
        *(f"{d}: [".encode() for d in range(10)),
        *(f"{d}!: [".encode() for d in range(10)),
    )

    def parse(self, block: list[Line], ctx: FileContext, out: Output) -> None:
        # the report's row is appended at its first line and completed as its rows come (a reader
        # has no end-of-file call, and a report's rows may come in later blocks)
        fs = out.__dict__.setdefault("_horovod_file_state", {"report": None})
        for line in block:
            text = line.text
            rep = fs["report"]
            if rep is not None and line.lineno - rep["last"] > _GAP + 1:
                fs["report"] = rep = None  # too far from the report's last line: not its row
            if _WARNING.search(text):
                fs["report"] = self._new(line, text, ctx, out)
                out.consume(line)
                continue
            m = _HEADER.search(text)
            if m:
                if rep is None or rep["shape"] is not None:
                    fs["report"] = rep = self._new(line, text, ctx, out)
                    out.consume(line)
                    rep["shape"] = m.group("which")
                else:
                    rep["shape"] = m.group("which")
                    self._more(rep, line, text, out)
                rest = m.group("rest")
                if rest:  # a row on the header's own line (a paste that joined them)
                    self._row(rep, rest)
                    self._fill(rep)
                continue
            if rep is None and _OP_ROW.search(text):
                # a stalled op whose warning and header were cut off (or logged as lines of their own)
                fs["report"] = rep = self._new(line, text, ctx, out)
                rep["shape"] = "Stalled ops"
                self._row(rep, text)
                self._fill(rep)
                out.consume(line)
                continue
            if rep is None:
                continue
            if _SHUTDOWN.search(text):
                rep["shutdown"] = True
                self._more(rep, line, text, out)
            elif rep["shape"] is not None and (self._row(rep, text) or self._row(rep, line.raw, raw=True)):
                self._more(rep, line, text, out)

    @staticmethod
    def _new(line: Line, text: str, ctx: FileContext, out: Output) -> dict:
        row = error_row(line, ctx, SOURCE, ErrorKind.STALL_REPORT, text.strip()[:2000], related_ranks=None)
        row.update(op=None, stalled_tensors=0, shutdown=False)
        out.errors.append(row)  # not add_error: a report repeated a minute later is a new observation
        return {"row": row, "last": line.lineno, "shape": None, "missing": set(), "tensors": [], "shutdown": False}

    def _more(self, rep: dict, line: Line, text: str, out: Output) -> None:
        rep["last"] = line.lineno
        row = rep["row"]
        if len(row["message"]) < 2000:
            row["message"] = (row["message"] + " | " + text.strip())[:2000]
        self._fill(rep)
        out.consume(line)

    @staticmethod
    def _fill(rep: dict) -> None:
        names = sorted(set(rep["tensors"]))
        rep["row"].update(
            related_ranks=tuple(sorted(rep["missing"])) or None,
            op=tensor_op(names),
            stalled_tensors=len(names),
            shutdown=bool(rep["shutdown"]),
        )

    @staticmethod
    def _row(rep: dict, text: str, raw: bool = False) -> bool:
        """Take one row of the open report; ``raw``: the line before prefix stripping, for a rank row
        whose ``6: `` the prefix layer took for slurm's task label (a bare ``6: [...]`` line)."""
        if raw and (not text or not _RANK_ROW.search(text)):
            return False
        m = _OP_ROW.search(text)
        if m and rep["shape"] == "Stalled ops":
            rep["missing"].update(_ranks(m.group("ranks")))
            rep["tensors"].append(m.group("tensor"))
            return True
        m = _RANK_ROW.search(text)
        if m and rep["shape"] in ("Stalled ranks", "Missing ranks"):
            r = i32(m.group("rank"))
            if r is not None:
                rep["missing"].add(r)
            rep["tensors"] += [t.strip() for t in m.group("tensors").replace("...", "").split(",") if t.strip()]
            if m.group("bang"):
                rep["shutdown"] = True
            return True
        return False


register_text_reader(HorovodReader())
