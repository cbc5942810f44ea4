"""Mask what an incident report must not leak: hostnames, IP addresses, home paths, tokens.

Reports travel (tickets, chat, e-mail). ``denpex-nb report --redact`` runs every piece of text the
report shows through one :class:`Redactor`: the Incident's messages, file names and hosts, the
Diagnosis' evidence, and finally every text output of the executed notebook.

Hostnames cannot be recognised by shape alone (``tern-07`` looks like any word), so a Redactor
masks the *known* hosts (from the incident's ``ranks.host``, NCCL line prefixes, torchrun tables and
this machine's name) plus anything that looks like a fully qualified domain name.
"""
from __future__ import annotations

import re
import socket
from dataclasses import dataclass, field, replace
from typing import Iterable

HOST = "<host>"
IP = "<ip>"
USER = "<user>"
TOKEN = "<token>"

# Tokens with a known prefix: HuggingFace, GitHub, Slack, OpenAI-style, AWS access keys, JWTs.
_TOKEN_PREFIXED = re.compile(
    r"\b(?:hf_[A-Za-z0-9]{20,}|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}"
    r"|xox[abposr]-[A-Za-z0-9-]{10,}|sk-[A-Za-z0-9_-]{20,}|AKIA[0-9A-Z]{16}"
    r"|eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,})"
)
# key=value / key: value secrets whatever their shape.
_SECRET_ASSIGN = re.compile(
    r"(?i)\b([A-Za-z0-9_]*?(?:api[_-]?key|access[_-]?key|secret|token|password|passwd|auth)[A-Za-z0-9_]*\s*[=:]\s*)"
    r"(['\"]?)[^\s'\"]{6,}\2"
)
# Long hex (>= 32 digits: hashes, keys; NCCL commIds are 16 and pointers 12, kept) and long base64.
_LONG_HEX = re.compile(r"\b(?:0x)?[0-9a-fA-F]{32,}\b")
# Candidates only: a path or a long identifier also fits this alphabet, so _is_random() decides.
_LONG_B64 = re.compile(r"(?<![A-Za-z0-9+/=_-])[A-Za-z0-9+/_-]{40,}={0,2}(?![A-Za-z0-9+/=_-])")

_IPV4 = re.compile(r"(?<![\d.])(?:(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(?![\d.]*\d)")
# IPv6: full, compressed (::), with optional zone; brackets around addresses with ports are kept.
_IPV6 = re.compile(
    r"(?<![\w:.])(?:"
    r"(?:[0-9A-Fa-f]{1,4}:){7}[0-9A-Fa-f]{1,4}"
    r"|(?:[0-9A-Fa-f]{1,4}:){1,7}:"
    r"|(?:[0-9A-Fa-f]{1,4}:){1,6}:[0-9A-Fa-f]{1,4}"
    r"|(?:[0-9A-Fa-f]{1,4}:){1,5}(?::[0-9A-Fa-f]{1,4}){1,2}"
    r"|(?:[0-9A-Fa-f]{1,4}:){1,4}(?::[0-9A-Fa-f]{1,4}){1,3}"
    r"|(?:[0-9A-Fa-f]{1,4}:){1,3}(?::[0-9A-Fa-f]{1,4}){1,4}"
    r"|(?:[0-9A-Fa-f]{1,4}:){1,2}(?::[0-9A-Fa-f]{1,4}){1,5}"
    r"|[0-9A-Fa-f]{1,4}:(?::[0-9A-Fa-f]{1,4}){1,6}"
    r"|::(?:[0-9A-Fa-f]{1,4}:){0,5}[0-9A-Fa-f]{1,4}"
    r"|::1"
    r")(?:%[0-9A-Za-z]+)?(?![\w:])"
)
# Home directories: /home/alice, /Users/bob, C:\Users\carol; the user name is masked, the rest kept.
_HOME = re.compile(r"(?P<pre>/home/|/Users/|/export/home/|[A-Za-z]:\\Users\\)(?P<user>[^/\\\s:'\"<>]+)")
# Fully qualified names: at least two dots or a known infrastructure suffix. File names such as
# "train.py" or "ProcessGroupGloo.cpp" have one dot and are not touched.
_FQDN = re.compile(
    r"(?<![\w.@/-])(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+"
    r"(?:internal|local|lan|corp|cluster|compute|intra|com|net|org|io|ai|edu|gov|cloud)(?![\w.-])"
)
# NCCL line prefix "<host>:<pid>:<tid> [<dev>] NCCL": the host is whatever precedes the pid.
_NCCL_HOST = re.compile(r"(?m)(?:^|(?<=\]:)|(?<=\s))([A-Za-z][\w.-]*):(\d+):(\d+) \[\d+\] NCCL")
# torchrun table "host      : <name>"
_TABLE_HOST = re.compile(r"(?m)\bhost\s+:\s+(\S+)")
_NEVER_HOSTS = {"localhost", "<host>", "<N/A>", ""}


def hosts_in_text(text: str) -> set[str]:
    """Host names that a log line states as such (NCCL prefixes, torchrun failure tables)."""
    found = {m.group(1) for m in _NCCL_HOST.finditer(text)}
    found |= {m.group(1) for m in _TABLE_HOST.finditer(text)}
    return {h for h in found if h not in _NEVER_HOSTS}


@dataclass
class Redactor:
    """Masks sensitive text. ``hosts`` are exact names to mask wherever they appear as a word."""

    hosts: set[str] = field(default_factory=set)
    mask_local_host: bool = True

    def __post_init__(self):
        hosts = {h for h in self.hosts if h and h not in _NEVER_HOSTS}
        if self.mask_local_host:
            try:
                name = socket.gethostname()
            except OSError:  # pragma: no cover - no hostname configured
                name = ""
            if name and name not in _NEVER_HOSTS:
                hosts.add(name)
                hosts.add(name.split(".")[0])
        self.hosts = hosts
        self._host_re = None
        if hosts:
            alts = "|".join(re.escape(h) for h in sorted(hosts, key=len, reverse=True))
            self._host_re = re.compile(rf"(?<![\w.-])(?:{alts})(?![\w-])")

    def learn(self, text: str) -> "Redactor":
        """A Redactor that also masks the hosts this text names (NCCL prefixes, torchrun tables)."""
        extra = hosts_in_text(text) - self.hosts
        return replace(self, hosts=self.hosts | extra) if extra else self

    def __call__(self, text):
        """Redact one string; anything else (None, NA, numbers) is returned unchanged."""
        if not isinstance(text, str) or not text:
            return text
        out = _SECRET_ASSIGN.sub(lambda m: f"{m.group(1)}{m.group(2)}{TOKEN}{m.group(2)}", text)
        out = _TOKEN_PREFIXED.sub(TOKEN, out)
        out = _HOME.sub(lambda m: m.group("pre") + USER, out)
        out = _IPV6.sub(IP, out)
        out = _IPV4.sub(IP, out)
        out = _LONG_HEX.sub(TOKEN, out)
        out = _LONG_B64.sub(lambda m: TOKEN if _is_random(m.group(0)) else m.group(0), out)
        if self._host_re is not None:
            out = self._host_re.sub(HOST, out)
        out = _FQDN.sub(HOST, out)
        return out


def _is_random(s: str) -> bool:
    """A base64-alphabet run that looks random (a key), not a path or an identifier made of words."""
    import math
    from collections import Counter

    body = s.rstrip("=")
    upper = sum(c.isupper() for c in body)
    lower = sum(c.islower() for c in body)
    digits = sum(c.isdigit() for c in body)
    if min(upper, lower, digits) < 3:
        return False
    counts = Counter(body)
    entropy = -sum(n / len(body) * math.log2(n / len(body)) for n in counts.values())
    return entropy >= 4.2


def redact(text: str, hosts: Iterable[str] = ()) -> str:
    """One-shot redaction of a string (see :class:`Redactor`)."""
    return Redactor(set(hosts)).learn(text)(text)


def redactor_for(incident, scan_bytes: int = 2 << 20) -> Redactor:
    """A Redactor that knows every host the incident mentions.

    Hosts come from ``ranks.host``, error messages, unparsed lines, and the NCCL line prefixes and
    torchrun tables of the input files themselves (the head and tail ``scan_bytes`` of each file:
    readers need not keep a host they parsed past).
    """
    hosts: set[str] = set()
    if incident is not None:
        if "host" in incident.ranks:
            hosts |= {str(h) for h in incident.ranks["host"].dropna().unique()}
        if len(incident.errors):
            for msg in incident.errors["message"].dropna():
                hosts |= hosts_in_text(str(msg))
        if len(incident.unparsed):
            for text in incident.unparsed["text"].dropna():
                hosts |= hosts_in_text(str(text))
        if len(incident.sources):
            for name in incident.sources["file"].dropna().astype(str).unique():
                hosts |= _hosts_in_file(name, scan_bytes)
    return Redactor(hosts)


def _hosts_in_file(name: str, scan_bytes: int) -> set[str]:
    import os

    try:
        size = os.path.getsize(name)
        with open(name, "rb") as fh:
            head = fh.read(scan_bytes)
            tail = b""
            if size > 2 * scan_bytes:
                fh.seek(size - scan_bytes)
                tail = fh.read(scan_bytes)
    except OSError:
        return set()
    if b"\0" in head[:4096]:  # a binary dump (Flight Recorder pickle): no text hosts
        return set()
    return hosts_in_text((head + b"\n" + tail).decode("utf-8", errors="replace"))


_TEXT_COLUMNS = {
    "events": ("file", "pg_desc"),
    "errors": ("message", "file"),
    "ranks": ("host", "device"),
    "progress": ("file",),
    "unparsed": ("file", "text"),
    "sources": ("file", "error"),
}


def redact_incident(incident, redactor: Redactor | None = None):
    """A copy of the Incident with every text column passed through the redactor."""
    import copy

    import pandas as pd

    r = redactor or redactor_for(incident)
    out = copy.copy(incident)
    for name, cols in _TEXT_COLUMNS.items():
        df = getattr(incident, name).copy()
        for col in cols:
            if col not in df:
                continue
            s = df[col]
            if isinstance(s.dtype, pd.CategoricalDtype):
                cats = s.cat.categories
                new = [r(str(c)) for c in cats]
                if len(set(new)) == len(new):
                    df[col] = s.cat.rename_categories(new)
                else:  # two names redact to the same mask: merge the categories
                    df[col] = s.astype("object").map(lambda v: r(v) if isinstance(v, str) else v).astype("category")
            else:
                df[col] = s.map(lambda v: r(v) if isinstance(v, str) else v).astype(s.dtype)
        setattr(out, name, df)
    out.notes = [r(n) for n in incident.notes]
    return out


def redact_diagnosis(diagnosis, redactor: Redactor):
    """A copy of the Diagnosis whose summaries, notes and evidence are redacted."""
    import copy

    from dataclasses import replace

    out = copy.deepcopy(diagnosis)
    out.findings = [replace(f, summary=redactor(f.summary), basis=tuple(redactor(b) for b in f.basis),
                            evidence=tuple(replace(e, text=redactor(e.text), file=redactor(e.file))
                                           for e in f.evidence))
                    for f in out.findings]
    out.notes = [redactor(n) for n in out.notes]
    if out.rank_state is not None and "first_error" in getattr(out.rank_state, "columns", ()):
        out.rank_state = out.rank_state.assign(
            first_error=[None if v is None or v != v else redactor(str(v)) for v in out.rank_state["first_error"]])
    return out


_TEXT_MIMES = ("text/plain", "text/html", "text/markdown", "application/json", "text/latex")


def redact_notebook(nb, redactor: Redactor):
    """Redact every text output (and markdown/source text) of an executed notebook in place.

    Images are left alone: their base64 payload is not text a reader sees, and the pictures are
    drawn from already-redacted frames.
    """
    for cell in nb.cells:
        cell.source = redactor(cell.source)
        for out in cell.get("outputs", []):
            if "text" in out:
                out["text"] = _redact_multiline(out["text"], redactor)
            if "traceback" in out:
                out["traceback"] = [redactor(t) for t in out["traceback"]]
            if "evalue" in out:
                out["evalue"] = redactor(out["evalue"])
            data = out.get("data", {})
            for mime in list(data):
                if mime in _TEXT_MIMES:
                    data[mime] = _redact_multiline(data[mime], redactor)
    return nb


def _redact_multiline(value, redactor):
    if isinstance(value, list):
        return [redactor(v) for v in value]
    if isinstance(value, str):
        return redactor(value)
    return value
