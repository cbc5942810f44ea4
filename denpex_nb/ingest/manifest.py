"""A reproducer run's ``manifest.json`` -> how each rank ended (the launcher's view).

``denpex_nb.repro`` is the launcher of its runs, the way torchrun's agent is for real jobs, and
its manifest records what torchrun prints in its ChildFailedError table: per rank the pid, local
rank, exit code and signal, and when it ended. This reader turns that into ``ranks`` rows and one
``errors`` row (kind ``signal`` or ``exit``) per rank that ended badly. It deliberately ignores
``expected`` (what the scenario planted): diagnosis must find that from the evidence.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta

from ..vocab import ErrorKind
from .base import FileContext, FileReader, Output, register_file_reader


class ReproManifestReader(FileReader):
    name = "repro_manifest"
    line_oriented = False

    def sniff(self, head: bytes, path: str) -> bool:
        if not path.endswith("manifest.json"):
            return False
        s = head.lstrip()[:65536]
        return s[:1] == b"{" and b'"scenario"' in s and b'"exit_codes"' in s

    def read(self, data: bytes, ctx: FileContext, out: Output) -> int:
        m = json.loads(data.decode("utf-8"))
        started = None
        try:
            started = datetime.fromisoformat(m["started_at"])
        except (KeyError, TypeError, ValueError):
            pass
        host = m.get("host")
        for r in m.get("ranks") or []:
            if not isinstance(r, dict) or r.get("rank") is None:
                continue
            rank, code, sig = r["rank"], r.get("exit_code"), r.get("signal")
            out.ranks.append(
                {
                    "rank": rank,
                    "pid": r.get("pid"),
                    "local_rank": r.get("local_rank"),
                    "exit_code": code,
                    "signal": sig,
                    "host": host,
                }
            )
            if code in (0, None) and not sig:
                continue
            t = None
            if started is not None and isinstance(r.get("ended_after_s"), (int, float)):
                t = started + timedelta(seconds=float(r["ended_after_s"]))
            killed = " (killed by the launcher)" if r.get("killed_by_launcher") else ""
            what = f"signal {sig}" if sig else f"exit code {code}"
            out.errors.append(
                {
                    "rank": rank,
                    "t_wall": t,
                    "kind": "signal" if sig else ErrorKind.EXIT,
                    "message": f"rank {rank} ended with {what}{killed}",
                    "exit_code": code,
                    "signal": sig,
                    "source": self.name,
                    "file": ctx.file,
                }
            )
        return 0


register_file_reader(ReproManifestReader())
