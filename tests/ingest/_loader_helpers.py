"""A tiny, fully predictable text reader for loader tests (the real readers have their own tests).

``MARK rank=<r> seq=<s> [ERR <msg>]`` lines become events (and errors); lines that start with
whitespace right after a MARK line are consumed as its continuation. Registering it as a reader
shows the loader's dispatch, de-duplication and accounting without depending on real formats.
"""

from __future__ import annotations

import contextlib
import re

from denpex_nb.ingest import base
from denpex_nb.ingest.base import FileContext, Line, Output, TextReader

_INDENTED = re.compile(r"^(?:\[[^\]]*\]:)*[ \t]")
_MARK = re.compile(r"MARK rank=(\d+) seq=(\d+)(?: ERR (.*))?")


class MarkReader(TextReader):
    name = "test_mark"
    needles = (b"MARK",)

    def __init__(self):
        #: per block, (physical line number, text of the logical line holding it)
        self.blocks: list[list[tuple[int, str]]] = []

    def parse(self, block: list[Line], ctx: FileContext, out: Output) -> None:
        self.blocks.append(sorted({(n, ln.text) for ln in block for n in ln.linenos}))
        owner = False
        for line in block:
            m = _MARK.search(line.text)
            if m:
                rank, seq, err = int(m.group(1)), int(m.group(2)), m.group(3)
                out.events.append(
                    {
                        "rank": rank,
                        "seq": seq,
                        "seq_kind": "work",
                        "op": "all_reduce",
                        "pg": "0",
                        "state": "completed",
                        "source": self.name,
                        "file": ctx.file,
                        "line": line.lineno,
                    }
                )
                if err:
                    out.errors.append(
                        {
                            "rank": rank,
                            "kind": "exception",
                            "message": err,
                            "source": self.name,
                            "file": ctx.file,
                            "line": line.lineno,
                        }
                    )
                out.consume(line)
                owner = True
            elif owner and _INDENTED.match(line.raw or line.text):
                out.consume(line)
            else:
                owner = False


@contextlib.contextmanager
def mark_reader():
    """Register a fresh MarkReader for the duration of a test."""
    base._ensure_builtin() if _builtin_ok() else None
    reader = MarkReader()
    base._TEXT_READERS[reader.name] = reader
    try:
        yield reader
    finally:
        base._TEXT_READERS.pop(reader.name, None)


def _builtin_ok() -> bool:
    try:
        base._ensure_builtin()
        return True
    except ImportError:
        return False
