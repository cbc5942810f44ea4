"""The text output of PyTorch's Flight Recorder analyzer, ``torchfrtrace`` (log-formats.md §8.6).

Users often have only this output (pasted into a ticket), not the dumps. Each finding block
becomes one ``fr_finding`` error: the culprit and missing ranks go to ``related_ranks`` (and the
culprit to ``rank``), the sequence number to ``seq`` with ``seq_kind="fr"``, ``collective:`` to
``op``. When the error message names the culprit's sizes or dtype, an ``events`` row records what
the culprit passed, so alignment can show it next to the other sources.
"""
from __future__ import annotations

import re

from ..ops import normalize_op
from ._text import add_error, dtype_name, error_row, event_row, numel, parse_ranks, parse_sizes
from .base import FileContext, Line, Output, TextReader, register_text_reader

SOURCE = "frtrace"

_HEADERS = (
    re.compile(r"^Not all ranks joining collective,? sequence number:? (\d+)"),
    re.compile(r"^Collective sequence number:? (\d+) has errors"),
    re.compile(r"^Input/output mismatch in the collective sequence number:? (\d+)"),
)
_FIELD = re.compile(r"^(internal record id|group info|collective|missing ranks|input sizes|output sizes|world size"
                    r"|expected ranks|collective state|error msg|collective stack trace)\s*:\s?(.*)$")
_CULPRIT = re.compile(r"Culprit rank (\d+)")
_ERRTYPE = re.compile(r"Error type: (\w+)")
_DETAIL = re.compile(r"Expected ([\w ]+?): '([^']*)' does not match found [\w ]+?: '([^']*)'")
_MISSING_DUMPS = re.compile(r"Missing dump files from ranks? \{?([\d, ]*)\}?")
_OTHER = re.compile(r"^tabulate is not installed")


class FrTraceTextReader(TextReader):
    name = SOURCE
    needles = (b"sequence number", b"record id: ", b"group info: ", b"collective: ", b"ranks: {", b"sizes: [",
               b"world size: ", b"collective state: ", b"error msg: ", b"stack trace", b"Missing dump files",
               b"tabulate is not installed")

    def parse(self, block: list[Line], ctx: FileContext, out: Output) -> None:
        # No blanket try/except here: the loader catches a reader's exception, keeps the block's
        # unclaimed lines as unparsed and reports the failure, so a reader bug is seen, not hidden.
        cur: dict | None = None
        for line in block:
            text = line.text.strip()
            hdr = next((m for rx in _HEADERS for m in [rx.match(text)] if m), None)
            if hdr:
                self._emit(cur, ctx, out)
                cur = {"_line": line, "_header": text, "seq": int(hdr.group(1)), "_stack": False}
                out.consume(line)
                continue
            m = _MISSING_DUMPS.search(text)
            if m:
                add_error(out, error_row(line, ctx, SOURCE, "fr_finding", text, rank=None,
                                            related_ranks=parse_ranks(m.group(1))))
                out.consume(line)
                continue
            if _OTHER.match(text):
                out.consume(line)
                continue
            if cur is None:
                continue
            m = _FIELD.match(text)
            if m:
                cur[m.group(1)] = m.group(2).strip()
                cur["_stack"] = m.group(1) == "collective stack trace"
                out.consume(line)
            elif cur["_stack"] and (line.text[:1].isspace() or " at " in text) and text:
                out.consume(line)        # stack frames under "collective stack trace:"
            else:
                self._emit(cur, ctx, out)
                cur = None
        self._emit(cur, ctx, out)

    def _emit(self, cur: dict | None, ctx: FileContext, out: Output) -> None:
        if not cur:
            return
        line: Line = cur["_line"]
        err = cur.get("error msg", "")
        culprit = _CULPRIT.search(err)
        culprit_rank = int(culprit.group(1)) if culprit else None
        missing = parse_ranks(cur.get("missing ranks"))
        related = tuple(sorted(set(missing) | ({culprit_rank} if culprit_rank is not None else set())))
        op = normalize_op(cur.get("collective")) if cur.get("collective") else None
        group = cur.get("group info")
        pg = group.split(":", 1)[0] if group else None
        pg_desc = group.split(":", 1)[1] if group and ":" in group else None
        etype = _ERRTYPE.search(err)
        msg = cur["_header"] + (f"; {err}" if err else "") + (f"; missing ranks: {cur['missing ranks']}"
                                                              if cur.get("missing ranks") else "")
        ws = cur.get("world size")
        add_error(out, error_row(line, ctx, SOURCE, "fr_finding", msg, rank=culprit_rank, op=op, seq=cur["seq"],
                                    seq_kind="fr", pg=pg, related_ranks=related,
                                    error_type=etype.group(1) if etype else None,
                                    world_size=int(ws) if ws and ws.isdigit() else None,
                                    expected_ranks=parse_ranks(cur.get("expected ranks")) or None))
        d = _DETAIL.search(err)
        if culprit_rank is None or not d:
            return
        what, found = d.group(1).strip(), d.group(3)
        ev = {"rank": culprit_rank, "op": op, "seq": cur["seq"], "seq_kind": "fr", "pg": pg, "pg_desc": pg_desc,
              "state": cur.get("collective state") if cur.get("collective state") in ("scheduled", "started", "completed") else None}
        if what == "input sizes":
            shapes = parse_sizes(found)
            ev.update(in_shapes=shapes, numel_in=sum(numel(s) or 0 for s in shapes) if shapes else None)
        elif what == "output sizes":
            shapes = parse_sizes(found)
            ev.update(out_shapes=shapes, numel_out=sum(numel(s) or 0 for s in shapes) if shapes else None)
        elif what == "dtypes":
            ev["dtype"] = dtype_name(found)
        elif what == "collective type":
            ev["op"] = normalize_op(found)
        else:
            return
        out.events.append(event_row(line, ctx, SOURCE, **ev))


register_text_reader(FrTraceTextReader())
