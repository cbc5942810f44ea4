"""The text output of PyTorch's Flight Recorder analyzer, ``torchfrtrace`` / ``python -m
torch.distributed.flight_recorder.fr_trace`` (docs/formats.md#frtrace-text).

Users often have only this output (pasted into a ticket), not the dumps. Three generations of
its text are read (sources: ``torch/distributed/flight_recorder/components/{utils,types}.py`` and
the older ``tools/flight_recorder/components/builder.py``):

* current (``EntryState.log``): a header ``Not all ranks joining collective, sequence number: N``
  (some builds print ``collective: sequence number: N``)
  / ``Collective sequence number: N has errors`` / ``Input/output mismatch in the collective
  sequence number: N``, then one ``field: value`` per line: ``internal record id``, ``group info``,
  ``collective``, ``missing ranks: {1, 3}``, ``total input numel``, ``total output numel``,
  ``input sizes``, ``output sizes``, ``world size``, ``expected ranks: {0, 1, 2, 3}``,
  ``collective state``, ``error msg: Culprit rank 1; Error type: SIZE_OR_SYNTAX_MISMATCH,
  Expected input sizes: '[[8]]' does not match found input sizes: '[[6]]'`` (several culprits
  joined by ``, ``) and ``collective stack trace:`` followed by ``name at file:line`` frames;
* 2.5-era: ``Not all ranks joining collective N at entry M`` / ``Collective N at entry M errors``
  / ``Input/output mismatch in the collective N at entry M``, ``expected ranks: <count>``,
  ``error message:`` instead of ``error msg:``;
* first release (``print``): ``Not all ranks joining collective for group G:D collective NAME
  Missing ranks are {1} [[3, 4]] [[3, 4]] 2 scheduled`` and ``Collective R errors for group G:D
  collective NAME ...`` with ``Found errors: Error rank 1, MatchState.SIZE_OR_SYNTAX_MISMATCH``
  (R is a record id there, not a sequence number).

Plus ``Missing dump files from ranks {1, 3}`` and ``We cannot decide what's wrong with this
collective entry because we missed FR dumps from ranks ({1, 3})``.

Each finding becomes ONE ``fr_finding`` error: ``related_ranks`` = the missing ranks and every
culprit it names, ``rank`` = the first culprit (else empty), ``seq`` with ``seq_kind="fr"`` (the
collective sequence number; empty where only a record id is given), ``op`` (canonical),
``pg`` / ``pg_desc`` from ``group info``. Extra columns: ``mismatch_kind`` (what is wrong, one of
:data:`MISMATCH_KINDS`), ``error_type`` (torch's MatchState name of the first culprit),
``culprit_ranks`` (tuple), ``missing_ranks`` (tuple), ``expected_ranks`` (tuple, when the output
lists them), ``world_size``, ``record_id``, ``collective_state``, ``input_sizes`` /
``output_sizes`` (tuples of shapes as printed), ``total_input_numel`` / ``total_output_numel``.
When the error names what a culprit passed (sizes, dtypes, type, state), an ``events`` row records
it for that culprit, so alignment can show it next to the other sources.
"""

from __future__ import annotations

import re

from ..ops import normalize_op
from ..vocab import ErrorKind, SeqKind, State
from ._text import add_error, dtype_name, error_row, event_row, i32, i64, numel, parse_ranks, parse_sizes
from .base import FileContext, Line, Output, TextReader, register_text_reader

SOURCE = "frtrace"

#: values of the ``mismatch_kind`` column: missing ranks (a rank never joined), the collective
#: type, sizes (including alltoall input/output numel), dtypes, state, undecided, missing dumps
MISMATCH_KINDS = ("missing_ranks", "type", "size", "dtype", "state", "undecided", "missing_dumps")
_MATCH_STATE = {
    "COLLECTIVE_TYPE_MISMATCH": "type",
    "SIZE_OR_SYNTAX_MISMATCH": "size",
    "COLLECTIVE_DTYPE_MISMATCH": "dtype",
    "COLLECTIVE_STATE_MISMATCH": "state",
    "UNDECIDED": "undecided",
}

# (pattern, kind of finding); groups: seq, rec (record id), group, coll, missing, rest
_HEADERS = (
    (re.compile(r"^Not all ranks joining collective[,:]? sequence number:? (?P<seq>\d+)"), "missing_ranks"),
    (re.compile(r"^Not all ranks joining collective (?P<seq>\d+) at entry (?P<rec>\d+)"), "missing_ranks"),
    (
        re.compile(
            r"^Not all ranks joining collective for group (?P<group>\S+) collective (?P<coll>\S+)\s+"
            r"Missing ranks are (?P<missing>\{[^}]*\}|set\(\))(?P<rest>.*)$"
        ),
        "missing_ranks",
    ),
    (re.compile(r"^Collective sequence number:? (?P<seq>\d+) has errors"), None),
    (re.compile(r"^Collective (?P<seq>\d+) at entry (?P<rec>\d+) errors"), None),
    (
        re.compile(r"^Collective (?P<rec>\d+) errors for group (?P<group>\S+) collective (?P<coll>\S+)(?P<rest>.*)$"),
        None,
    ),
    (re.compile(r"^Input/output mismatch in the collective[,:]? sequence number:? (?P<seq>\d+)"), "size"),
    (re.compile(r"^Input/output mismatch in the collective (?P<seq>\d+) at entry (?P<rec>\d+)"), "size"),
    (
        re.compile(
            r"^Input/output mismatch in the collective (?P<rec>\d+)\s+for group (?P<group>\S+) "
            r"collective (?P<coll>\S+)(?P<rest>.*)$"
        ),
        "size",
    ),
)
_HEADER_HINT = ("Not all ranks", "Collective ", "Input/output mismatch")
_FIELD = re.compile(
    r"^(internal record id|group info|collective|missing ranks|total input numel|total output numel"
    r"|input sizes|output sizes|world size|expected ranks|collective state|error msg|error message"
    r"|Found errors|collective stack traces?|Collective stack traces?)\s*:\s?(.*)$"
)
# the first release's positional tail: "[[3, 4]] [[3, 4]] 2 scheduled"
#: one size list of the old table, ``[[16, 64], [3]]`` or ``[]``: brackets never nested deeper, each step
#: unambiguous, so a line of brackets costs linear time
_SIZES = r"\[(?:\[[^\[\]]*\](?:,\s*\[[^\[\]]*\])*)?\]"
_OLD_REST = re.compile(rf"(?P<ins>{_SIZES})\s+(?P<outs>{_SIZES})\s+(?P<n>\d+)\s+(?P<state>\w+)")
_CULPRIT_SPLIT = re.compile(r"(?:Culprit|Error) rank (\d+)[;,]\s*")
_ERRTYPE = re.compile(r"(?:Error type: |MatchState\.)(\w+)")
_DETAIL = re.compile(r"Expected ([\w ]+?): '([^']*)' does not match found ([\w ]+?): '([^']*)'")
# types.py Op.match: f"Expected dtypes: '{set(self.input_dtypes)}' does not match found dtype:
# '{set(self.output_dtypes)}/{set(other.input_dtypes)}/{set(other.output_dtypes)}'" (sets of quoted names)
_DTYPES = re.compile(
    r"Expected dtypes: '(\{[^}]*\}|set\(\))' does not match found dtypes?: "
    r"'(\{[^}]*\}|set\(\))/(\{[^}]*\}|set\(\))/(\{[^}]*\}|set\(\))'"
)
_NUMEL = re.compile(r"Found input numel|does not match output numel")
_MISSING_DUMPS = re.compile(r"Missing dump files from ranks? (\{[^}]*\}|\[[^\]]*\]|[\d, ]+)")
_UNDECIDED = re.compile(r"we missed FR dumps from ranks \(?(\{[^}]*\}|\[[^\]]*\]|[\d, ]+)\)?")
_OTHER = re.compile(
    r"^(?:tabulate is not installed|Too many mismatches for process_group|No errors found for this "
    r"collective entry|built (?:groups|collectives)|appending a non-matching collective)"
)


def _kv_int(value: str | None) -> int | None:
    value = (value or "").strip()
    return i64(value) if value.isdigit() else None


class FrTraceTextReader(TextReader):
    name = SOURCE
    needles = (
        b"sequence number",
        b"record id: ",
        b"group info: ",
        b"collective: ",
        b"ranks: {",
        b"sizes: [",
        b"world size: ",
        b"collective state: ",
        b"error msg: ",
        b"stack trace",
        b"Missing dump files",
        b"tabulate is not installed",
        b"Not all ranks joining",
        b"at entry",
        b"errors for group",
        b"Input/output mismatch",
        b"error message: ",
        b"Found errors",
        b"expected ranks: ",
        b"missing ranks: ",
        b"total input numel",
        b"total output numel",
        b"missed FR dumps",
        b"Too many mismatches",
    )

    def parse(self, block: list[Line], ctx: FileContext, out: Output) -> None:
        # No blanket try/except here: the loader catches a reader's exception, keeps the block's
        # unclaimed lines as unparsed and reports the failure, so a reader bug is seen, not hidden.
        cur: dict | None = None
        for line in block:
            text = line.text.strip()
            hdr = self._header(text)
            if hdr is not None:
                self._emit(cur, ctx, out)
                cur = hdr
                cur.update(_line=line, _header=text, _stack=False)
                out.consume(line)
                continue
            m = _MISSING_DUMPS.search(text) or _UNDECIDED.search(text)
            if m:
                ranks = parse_ranks(m.group(1))
                add_error(
                    out,
                    error_row(
                        line,
                        ctx,
                        SOURCE,
                        ErrorKind.FR_FINDING,
                        text,
                        rank=None,
                        related_ranks=ranks,
                        missing_ranks=ranks,
                        mismatch_kind="missing_dumps",
                    ),
                )
                out.consume(line)
                continue
            if _OTHER.match(text):
                out.consume(line)
                continue
            if cur is None:
                continue
            m = _FIELD.match(text)
            if m:
                key = m.group(1).lower()
                key = {
                    "error message": "error msg",
                    "found errors": "error msg",
                    "collective stack traces": "collective stack trace",
                }.get(key, key)
                cur[key] = m.group(2).strip()
                cur["_stack"] = key == "collective stack trace"
                out.consume(line)
            elif cur["_stack"] and text and (line.text[:1].isspace() or " at " in text or text.startswith("[")):
                out.consume(line)  # stack frames under "collective stack trace:"
            elif not text:
                out.consume(line)  # blank lines inside a finding (print() adds them)
            else:
                self._emit(cur, ctx, out)
                cur = None
        self._emit(cur, ctx, out)

    @staticmethod
    def _header(text: str) -> dict | None:
        if not text.startswith(_HEADER_HINT):
            return None
        for rx, kind in _HEADERS:
            m = rx.match(text)
            if not m:
                continue
            g = m.groupdict()
            cur: dict = {"_kind": kind, "seq": _kv_int(g.get("seq")), "record_id": _kv_int(g.get("rec"))}
            if g.get("group"):
                cur["group info"] = g["group"]
            if g.get("coll"):
                cur["collective"] = g["coll"]
            if g.get("missing"):
                cur["missing ranks"] = g["missing"]
            rest = _OLD_REST.search(g.get("rest") or "")
            if rest:
                cur.update(
                    {
                        "input sizes": rest.group("ins"),
                        "output sizes": rest.group("outs"),
                        "world size": rest.group("n"),
                        "collective state": rest.group("state"),
                    }
                )
            return cur
        return None

    def _emit(self, cur: dict | None, ctx: FileContext, out: Output) -> None:
        if not cur:
            return
        line: Line = cur["_line"]
        err = cur.get("error msg", "")
        # "Culprit rank 1; Error type: X, detail, Culprit rank 3; Error type: Y, ..." (or, first
        # release, "Error rank 1, MatchState.X"): one (rank, text) per culprit
        parts = _CULPRIT_SPLIT.split(err)
        culprits = [(i32(parts[k]), parts[k + 1].rstrip(", ")) for k in range(1, len(parts) - 1, 2)]
        culprits = [(r, t) for r, t in culprits if r is not None]
        culprit_ranks = tuple(dict.fromkeys(r for r, _ in culprits))
        missing = parse_ranks(cur.get("missing ranks"))
        related = tuple(sorted(set(missing) | set(culprit_ranks)))
        op = normalize_op(cur.get("collective")) if cur.get("collective") else None
        group = cur.get("group info")
        pg = group.split(":", 1)[0] if group else None
        pg_desc = group.split(":", 1)[1] if group and ":" in group else None
        first_type = _ERRTYPE.search(culprits[0][1]) if culprits else _ERRTYPE.search(err)
        error_type = first_type.group(1) if first_type else None
        kind = cur["_kind"] or _MATCH_STATE.get(error_type or "")
        if kind is None and culprits and _DTYPES.search(culprits[0][1]):
            kind = "dtype"
        if kind is None and culprits and _DETAIL.search(culprits[0][1]):
            kind = _what_kind(_DETAIL.search(culprits[0][1]).group(1))
        if kind is None and _NUMEL.search(err):
            kind = "size"
        exp = cur.get("expected ranks")
        ws = _kv_int(cur.get("world size"))
        expected = None
        if exp is not None:
            if exp.strip().isdigit():  # 2.5-era: "expected ranks: 4" is a count
                ws = ws if ws is not None else _kv_int(exp)
            else:
                expected = parse_ranks(exp)
        state = cur.get("collective state")
        state = state if state in (State.SCHEDULED, State.STARTED, State.COMPLETED) else None
        msg = (
            cur["_header"]
            + (f"; {err}" if err else "")
            + (
                f"; missing ranks: {cur['missing ranks']}"
                if cur.get("missing ranks") and "Missing ranks" not in cur["_header"]
                else ""
            )
        )
        add_error(
            out,
            error_row(
                line,
                ctx,
                SOURCE,
                ErrorKind.FR_FINDING,
                msg,
                rank=culprit_ranks[0] if culprit_ranks else None,
                op=op,
                seq=cur["seq"],
                seq_kind=SeqKind.FR if cur["seq"] is not None else None,
                pg=pg,
                pg_desc=pg_desc,
                related_ranks=related,
                mismatch_kind=kind,
                error_type=error_type,
                culprit_ranks=culprit_ranks or None,
                missing_ranks=missing or None,
                expected_ranks=expected or None,
                world_size=ws,
                record_id=cur.get("record_id"),
                collective_state=state,
                input_sizes=parse_sizes(cur.get("input sizes")),
                output_sizes=parse_sizes(cur.get("output sizes")),
                total_input_numel=_kv_int(cur.get("total input numel")),
                total_output_numel=_kv_int(cur.get("total output numel")),
            ),
        )
        for rank, text in culprits:
            self._culprit_event(line, ctx, out, cur, rank, text, op, pg, pg_desc, state)

    def _culprit_event(self, line, ctx, out, cur, rank, text, op, pg, pg_desc, state) -> None:
        ev = {
            "rank": rank,
            "op": op,
            "seq": cur["seq"],
            "seq_kind": SeqKind.FR if cur["seq"] is not None else None,
            "pg": pg,
            "pg_desc": pg_desc,
            "state": state,
        }
        dt = _DTYPES.search(text)
        if dt:
            names = re.findall(r"'([^']+)'", dt.group(3))  # the culprit's input dtypes
            if names:
                ev["dtype"] = dtype_name(names[0])
                out.events.append(event_row(line, ctx, SOURCE, **ev))
            return
        d = _DETAIL.search(text)
        if not d:
            return
        what, found = d.group(1).strip(), d.group(4)
        if what == "input sizes":
            shapes = parse_sizes(found)
            ev.update(in_shapes=shapes, numel_in=sum(numel(s) or 0 for s in shapes) if shapes else None)
        elif what == "output sizes":
            shapes = parse_sizes(found)
            ev.update(out_shapes=shapes, numel_out=sum(numel(s) or 0 for s in shapes) if shapes else None)
        elif what == "collective type":
            ev["op"] = normalize_op(found)
        elif what == "state":
            ev["state"] = found if found in (State.SCHEDULED, State.STARTED, State.COMPLETED) else None
        else:
            return
        out.events.append(event_row(line, ctx, SOURCE, **ev))


def _what_kind(what: str) -> str | None:
    what = what.strip()
    if "size" in what:
        return "size"
    if "dtype" in what:
        return "dtype"
    if "type" in what:
        return "type"
    if "state" in what:
        return "state"
    return None


register_text_reader(FrTraceTextReader())
