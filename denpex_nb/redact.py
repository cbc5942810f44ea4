"""Mask what an incident report must not leak: hosts, IP addresses, user names, e-mails, tokens.

Reports travel (tickets, chat, e-mail). ``denpex-nb report --redact`` and ``denpex-nb diagnose
--redact`` run every piece of text they show through one :class:`Redactor`: every text column of
every frame of the Incident (reader extra columns and tuples of strings included), its notes, the
Diagnosis (summaries, basis, evidence, notes, ``rank_state``), and finally every text output,
traceback, source and metadata string of the executed notebook.

Masks
-----
Masks are numbered per kind and stable within one report: ``[host-1]``, ``[ip-2]``, ``[user-1]``,
``[email-1]``; secrets are ``[token]``; the folder that holds all inputs is ``[inputs]``. The same
host gets the same number everywhere (file names, messages, the inputs table, the HTML and the
notebook), whatever its case, and a short name shares the number of its fully qualified form
(``node-a7`` and ``node-a7.cluster.example.com``), so an engineer can still tell hosts apart.
Hosts of ``ranks.host`` are numbered first, in rank order. Square brackets were chosen over
``<host>``: a browser would read ``<host>`` as an unknown tag and show nothing; ``[host-1]`` needs no
escaping in HTML, Markdown or JSON.

What is recognised
------------------
* hosts **by position**, learned once and then masked everywhere: NCCL ``host:pid:tid`` prefixes,
  ``host<port>`` (NCCL peers), ``host:port`` and ``[host]:port``, ``user@host``, URLs, torchrun
  failure tables (``host : name``), ``MASTER_ADDR=``/``--master_addr``/``host=``/``hostname:``
  /``NODELIST=``, ``ranks.host`` and this machine's name;
* hosts **by shape**: cluster names (``gpu-node-105``, ``node-a7``, ``dgx-a100-07``, ``ip-10-0-1-105``,
  ``myjob-worker-0``), Kubernetes pod hashes (``worker-3-abc12``), AWS instance ids (``i-0abc...``),
  fully qualified names under common suffixes (``.internal``, ``.local``, ``.com`` ...);
* IPv4 and IPv6 (every compressed form, zones, IPv4-mapped ``::ffff:a.b.c.d``), candidates
  validated with :mod:`ipaddress`;
* user names from home paths (``/home/alice``, ``/Users/bob``, ``C:\\Users\\carol``, ``~alice``),
  then masked wherever the name appears as a word; e-mail addresses;
* secrets: known token prefixes (HuggingFace, GitHub, GitLab, Slack, OpenAI, AWS, Google, npm,
  PyPI, Docker, JWTs), ``key=value`` secrets, ``Bearer``, URL credentials, 32+ hex digits, UUIDs,
  random-looking base64. NCCL commIds (16 hex digits) and pointers stay readable.

ANSI colour codes and control characters are set aside before matching, so a token right after
``ESC[31m`` is found; text already masked is never masked again (redaction is idempotent).
"""

from __future__ import annotations

import copy
import ipaddress
import math
import os
import re
import socket
from collections import Counter
from collections.abc import Iterable
from dataclasses import fields, is_dataclass, replace
from typing import Any

#: mask prefixes (a mask is ``[host-3]``); ``TOKEN`` and ``INPUTS`` are whole masks
HOST = "[host-"
IP = "[ip-"
USER = "[user-"
EMAIL = "[email-"
TOKEN = "[token]"
INPUTS = "[inputs]"
KINDS = ("host", "ip", "user", "email")

#: every mask this module writes (never masked again)
MASK_RE = re.compile(r"\[(?:host|ip|user|email)-\d+\]|\[token\]|\[inputs\]")

# --- protected spans: masks, ANSI sequences, control characters, data URIs -------------------------

#: what scrub() leaves alone in a finished page: styles, scripts, embedded images
_NOT_PROSE = re.compile(
    r"(<style\b.*?</style>|<script\b.*?</script>|data:[\w.+/-]+;base64,[A-Za-z0-9+/=]+)", re.S | re.I
)
_PH_BASE = 0xF0000  # Supplementary Private Use Area-A: one char per held span
_PH_RE = re.compile("[\U000f0000-\U000ffffd]")
_PROTECT = re.compile(
    r"\[(?:host|ip|user|email)-\d+\]|\[token\]|\[inputs\]"
    r"|\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-Z\\-_]"
    r"|\^\[\[[0-9;]*[A-Za-z]|(?<![\w\]])\[[0-9;]{0,12}m"  # ESC shown as ^[ or lost
    r"|[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]"
    r"|data:[\w.+/-]+;base64,[A-Za-z0-9+/=]+"
)  # embedded images

# --- secrets ---------------------------------------------------------------------------------------

_TOKEN_PREFIXED = re.compile(
    r"(?<![A-Za-z0-9])(?:hf_[A-Za-z0-9]{20,}|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}"
    r"|glpat-[A-Za-z0-9_-]{20,}|xox[abposr]-[A-Za-z0-9-]{10,}|sk-(?:proj-|ant-)?[A-Za-z0-9_-]{20,}"
    r"|(?:AKIA|ASIA)[0-9A-Z]{16}|AIza[0-9A-Za-z_-]{35}|ya29\.[0-9A-Za-z_-]{20,}|npm_[A-Za-z0-9]{36}"
    r"|pypi-[A-Za-z0-9_-]{40,}|dckr_pat_[A-Za-z0-9_-]{20,}"
    r"|eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,})"
)
# key=value / key: value / "key": "value" secrets whatever their shape
_SECRET_ASSIGN = re.compile(
    r"(?i)((?<![A-Za-z0-9_.-])[A-Za-z0-9_.-]*?(?:api[_-]?key|access[_-]?key|secret|token|password|passwd|pwd"
    r"|auth|credential|private[_-]?key|session[_-]?key|cookie)[A-Za-z0-9_.-]*['\"]?\s*[=:]\s*)"
    r"(['\"]?)(?!\[token\])(?!(?:Bearer|Basic|Token)\s)([^\s'\",;]{4,})\2"
)
_SECRET_FLAG = re.compile(
    r"(?i)((?<![\w-])--?[A-Za-z0-9_-]*(?:password|passwd|token|secret|api[_-]?key)[A-Za-z0-9_-]*\s+)([^\s-]\S{3,})"
)
_BEARER = re.compile(r"(?i)(\b(?:Bearer|Authorization:\s*(?:Basic|Token|Bearer)?)\s+)([A-Za-z0-9._~+/=-]{8,})")
_URL_CRED = re.compile(r"(?i)(?<![A-Za-z0-9+.-])([a-z][a-z0-9+.-]{1,15}://)([^\s/@?#'\"<>]+)@")
# >= 32 hex digits (hashes, keys); NCCL commIds (16) and pointers (12) are kept
_LONG_HEX = re.compile(r"(?<![0-9A-Fa-f])(?:0x)?[0-9a-fA-F]{32,}(?![0-9A-Fa-f])")
_UUID = re.compile(r"(?i)(?<![0-9a-f-])[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}(?![0-9a-f-])")
# candidates only: a path or a long identifier also fits this alphabet, so _is_random() decides
_LONG_B64 = re.compile(r"(?<![A-Za-z0-9+/=_-])[A-Za-z0-9+/_-]{40,}={0,2}(?![A-Za-z0-9+/=_-])")

# --- people ----------------------------------------------------------------------------------------

_EMAIL = re.compile(r"(?<![A-Za-z0-9._%+-])[A-Za-z0-9._%+-]+@(?:[A-Za-z0-9-]+\.)+[A-Za-z]{2,24}(?![A-Za-z0-9-])")
_HOME = re.compile(
    r"(?P<pre>/(?:home|homes|Users|users)/|(?<![A-Za-z0-9])[A-Za-z]:(?:\\{1,2}|/)(?:Users|Documents and Settings)"
    r"(?:\\{1,2}|/))(?P<user>[A-Za-z0-9_$][A-Za-z0-9_.$-]*)"
)
_TILDE = re.compile(r"(?<![\w~/\\.])~(?P<user>[A-Za-z_][A-Za-z0-9_.-]*[A-Za-z0-9_])")
#: home folders that name no person: masked nowhere
_COMMON_USERS = {
    "root",
    "user",
    "users",
    "admin",
    "ubuntu",
    "ec2-user",
    "runner",
    "shared",
    "share",
    "public",
    "default",
    "guest",
    "local",
    "home",
    "build",
    "app",
    "work",
    "data",
    "docker",
    "www",
    "nobody",
    "test",
    "jovyan",
    "linuxbrew",
    "all users",
}

# --- addresses -------------------------------------------------------------------------------------

_IPV4 = re.compile(r"(?<![0-9.])(?:\d{1,3}\.){3}\d{1,3}(?![0-9]|\.\d)")
_IPV6 = re.compile(
    r"(?<![0-9A-Za-z.%])(?=[0-9A-Fa-f.]*:[0-9A-Fa-f.]*:)[0-9A-Fa-f:.]{2,45}(?:%[0-9A-Za-z_.-]+)?"
    r"(?![0-9A-Za-z])"
)

# --- hosts -----------------------------------------------------------------------------------------

_NAME = r"[A-Za-z0-9](?:[A-Za-z0-9_.-]*[A-Za-z0-9])?"
_LNAME = r"[A-Za-z](?:[A-Za-z0-9_.-]*[A-Za-z0-9])?"
# positions: the name is a host because of where it stands (_KEY_HOST also reads torchrun's "host : name")
_NCCL_HOST = re.compile(r"(?m)(?:^|(?<=\]:)|(?<=\s))([A-Za-z][\w.-]*):(\d+):(\d+) \[\d+\] NCCL")
_PORT_HOST = re.compile(rf"(?<![\w./\\:@-])(\[)?({_LNAME})(?(1)\]):(\d{{2,5}})(?![\d.%A-Za-z_])")
_PEER_HOST = re.compile(rf"(?<![\w.-])({_NAME})<\d{{1,5}}>")
_AT_HOST = re.compile(rf"(?<=[A-Za-z0-9_.-]@)({_NAME})")
_URL_HOST = re.compile(rf"(?i)(?<![A-Za-z0-9+.-])[a-z][a-z0-9+.-]{{1,15}}://(?:[^\s/@?#'\"<>]*@)?\[?({_NAME})")
_KEY_HOST = re.compile(
    rf"(?i)(?<![A-Za-z0-9])(?:MASTER_ADDR|MASTER_HOST|master[_-]addr(?:ess)?|rdzv[_-]endpoint|rdzv[_-]host"
    rf"|host_?name|host|node_?name|SLURMD_NODENAME|addr)['\"]?\s*[=:]\s*['\"]?\[?({_NAME})"
)
_FLAG_HOST = re.compile(rf"(?i)--(?:master[_-]addr|rdzv[_-]endpoint|host|hostname)[=\s]+['\"]?\[?({_NAME})")
_NODELIST = re.compile(r"(?i)NODELIST['\"]?\s*[=:]\s*['\"]?([^\s'\",;]+)")
_POSITIONS = (_NCCL_HOST, _PEER_HOST, _AT_HOST, _URL_HOST, _KEY_HOST, _FLAG_HOST, _NODELIST)

# shapes: the name is a host because of what it looks like
_HOSTY = (
    "node|nodes|gpu|gpus|worker|workers|compute|cmp|dgx|hgx|host|ip|srv|server|cn|gn|hpc|login|master"
    "|launcher|trainer|pod|vm|instance|machine|nid|rack|gke|aks|eks|slurm|k8s|kube|ec2"
)
_RANK_SUFFIX = r"-(?:rank|local|lr|r)\d"
_CLUSTER_HOST = re.compile(
    rf"(?i)(?<![A-Za-z0-9.-])(?:[a-z0-9]+-)*?(?:{_HOSTY})(?:-(?!(?:rank|local|lr|r)\d)[a-z0-9]+)+"
    rf"(?=$|[^A-Za-z0-9-]|{_RANK_SUFFIX})"
)
_CLUSTER_FLAT = re.compile(
    r"(?i)(?<![A-Za-z0-9.-])(?:node|nid|cn|gn|compute|dgx|hpc|worker|srv|host|login)\d{2,}"
    r"(?![A-Za-z0-9-])"
)
_POD_HASH = re.compile(
    r"(?<![A-Za-z0-9.-])[a-z][a-z0-9]*(?:-[a-z0-9]+)*-(?!(?:rank|local)\d)(?=[a-z]*\d)(?=\d*[a-z])[a-z0-9]{5}"
    rf"(?=$|[^A-Za-z0-9-]|{_RANK_SUFFIX})"
)
_AWS_ID = re.compile(r"(?<![A-Za-z0-9-])i-[0-9a-f]{8}(?:[0-9a-f]{9})?(?![A-Za-z0-9-])")
_TLDS = (
    "internal|local|localdomain|lan|corp|cluster|compute|intra|intranet|svc|home|com|net|org|io|ai|edu|gov"
    "|cloud|dev|app|co|us|uk|de|fr|jp|cn|in|ca|au|eu|info|biz|me|tech|site|mil"
)
_FILE_EXT = r"(?:log|txt|err|out|json|jsonl|gz|bz2|xz|zst|zip|tar|pkl|pickle|csv|ipynb|html)"
_FQDN = re.compile(
    rf"(?i)(?<![A-Za-z0-9.-])(?:[A-Za-z0-9](?:[A-Za-z0-9-]{{0,61}}[A-Za-z0-9])?\.)+(?:{_TLDS})"
    rf"(?![A-Za-z0-9(-])(?!\.(?!{_FILE_EXT}\b)[A-Za-z0-9])"
)
_SHAPES = (_FQDN, _AWS_ID, _CLUSTER_HOST, _CLUSTER_FLAT, _POD_HASH)
#: public sites named in torch / NCCL messages: not anyone's infrastructure
_PUBLIC = (
    "pytorch.org",
    "github.com",
    "githubusercontent.com",
    "nvidia.com",
    "python.org",
    "huggingface.co",
    "pypi.org",
    "readthedocs.io",
    "stackoverflow.com",
    "microsoft.com",
    "google.com",
    "amazon.com",
    "docs.aws.amazon.com",
    "anaconda.org",
    "conda.io",
    "jupyter.org",
    "numpy.org",
    "pandas.pydata.org",
)
#: the first label of a dotted Python name, never a host (``self.net``, ``torchvision.io``)
_CODE_LABELS = {
    "self",
    "cls",
    "super",
    "torch",
    "torchvision",
    "nn",
    "np",
    "pd",
    "os",
    "sys",
    "model",
    "module",
    "modules",
    "ctx",
    "args",
    "cfg",
    "config",
    "threading",
    "data",
    "utils",
    "dist",
    "io",
    "json",
}
#: words that stand where a host may stand but are vocabulary, never a host
_NOT_HOSTS = {
    "localhost",
    "localhost.localdomain",
    "",
    "n/a",
    "<n/a>",
    "none",
    "null",
    "nan",
    "unknown",
    "true",
    "false",
    "nccl",
    "info",
    "warn",
    "warning",
    "error",
    "debug",
    "trace",
    "rank",
    "cuda",
    "cpu",
    "gpu",
    "gloo",
    "mpi",
    "ucc",
    "xla",
    "main",
    "default",
    "self",
    "torch",
    "python",
    "the",
    "and",
    "or",
    "to",
    "from",
    "at",
    "on",
    "in",
    "of",
    "is",
    "by",
    "port",
    "addr",
    "host",
    "hostname",
    "peer",
    "remote",
    "local",
    "master",
    "worker",
    "server",
    "client",
    "store",
    "tcp",
    "udp",
    "http",
    "https",
    "file",
    "line",
    "stdout",
    "stderr",
    "inputs",
    "token",
    "user",
    "email",
    "ip",
    # denpex_nb's own counters, as in a finding's key "shape-mismatch@fr:3"
    "work",
    "fr",
    "detail",
    "desync",
    "nccl_opcount",
    "nccl_position",
    "text",
}
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_FILE_NAME = re.compile(
    r"(?i)\.(?:py|pyx|pyi|cpp|cc|cxx|c|h|hpp|cu|cuh|so|o|a|dylib|dll|exe|js|ts|rs|go|java|"
    r"sh|yaml|yml|toml|cfg|ini|md|rst|whl)$|\." + _FILE_EXT + "$"
)
_VOCAB_NAME = re.compile(
    r"(?i)^(?:rank|local_?rank|node_?rank|cuda|gpu|device|dev|pg|group|seq|op|step|epoch|"
    r"u?int|float|bfloat|complex|sm|compute_|py|python|cp|nccl|v)\d*(?:\.\d+)*$"
)


def _plausible_host(name: str) -> bool:
    """A name seen in a host position that can be a host (not vocabulary, an address or a file)."""
    low = name.lower()
    if low in _NOT_HOSTS or len(name) < 2 or len(name) > 253 or not re.search(r"[A-Za-z]", name):
        return False
    if _FILE_NAME.search(name) or _VOCAB_NAME.match(name) or _ip_of(name) is not None or _DATE.match(name):
        return False
    if _PH_RE.search(name) or MASK_RE.search(name):
        return False
    return not _public(low)


def _hosty(name: str) -> bool:
    """A name that only a host would have: a digit, hyphen or dot in it."""
    return bool(re.search(r"[\d.-]", name))


def _public(low: str) -> bool:
    return any(low == p or low.endswith("." + p) for p in _PUBLIC)


def _ip_of(text: str):
    """The address ``text`` spells (validated by :mod:`ipaddress`), or None."""
    t = text.strip("[]")
    if "%" in t:
        t = t.split("%", 1)[0]
    try:
        if ":" in t:
            return ipaddress.IPv6Address(t)
        parts = t.split(".")
        if len(parts) != 4 or not all(p.isdigit() and len(p) <= 3 for p in parts):
            return None
        return ipaddress.IPv4Address(".".join(str(int(p)) for p in parts))
    except ValueError:
        return None


def _host_key(name: str) -> str:
    """Hosts that share a key share a mask: a short name and its FQDN (``node-a7``, ``node-a7.x.com``)."""
    low = name.lower().rstrip(".")
    first = low.split(".", 1)[0]
    return first if "." in low and _hosty(first) and not _ip_of(low) else low


def _is_random(s: str) -> bool:
    """A base64-alphabet run that looks random (a key), not a path or an identifier made of words."""
    body = s.rstrip("=")
    upper = sum(c.isupper() for c in body)
    lower = sum(c.islower() for c in body)
    digits = sum(c.isdigit() for c in body)
    if min(upper, lower, digits) < 3:
        return False
    counts = Counter(body)
    entropy = -sum(n / len(body) * math.log2(n / len(body)) for n in counts.values())
    return entropy >= 4.2


class Redactor:
    """Masks sensitive text with stable numbered masks (see the module docstring).

    ``hosts`` are names to mask wherever they appear (any case). :meth:`learn` collects hosts,
    users, e-mails and addresses from a text without masking it; calling the redactor on a text
    learns from it too, then masks. Learn from everything first (:func:`redactor_for` does), so a
    host first named late is masked early as well.
    """

    def __init__(self, hosts: Iterable[str] = (), mask_local_host: bool = True, roots: Iterable[str] = ()):
        self._ids: dict[str, dict[str, int]] = {k: {} for k in KINDS}  # kind -> key -> number
        self._names: dict[str, dict[str, str]] = {k: {} for k in KINDS}  # kind -> lower-case name -> key
        self._tokens: set[str] = set()
        self.roots: list[str] = []
        self._version = 0
        self._compiled: tuple | None = None
        self._cache: dict[str, str] = {}
        for h in hosts:
            self.add_host(h)
        for r in roots:
            self.add_root(r)
        if mask_local_host:
            try:
                name = socket.gethostname()
            except OSError:  # pragma: no cover - no hostname configured
                name = ""
            if name and name.lower() not in _NOT_HOSTS:
                self.add_host(name)
                if "." in name:
                    self.add_host(name.split(".")[0])

    # --- what it knows ----------------------------------------------------------------------------

    @property
    def hosts(self) -> set[str]:
        """The host names it masks (as first seen, lower case)."""
        return set(self._names["host"])

    @property
    def users(self) -> set[str]:
        return set(self._names["user"])

    def _add(self, kind: str, name: str, key: str | None = None) -> int:
        low = name.lower()
        if low in self._names[kind]:
            return self._ids[kind][self._names[kind][low]]
        key = low if key is None else key
        ids = self._ids[kind]
        if key not in ids:
            ids[key] = len(ids) + 1
        self._names[kind][low] = key
        self._version += 1
        return ids[key]

    def add_host(self, name: str) -> bool:
        """Mask ``name`` as a host from now on; False when it cannot be one (vocabulary, an address)."""
        name = str(name).strip().strip("[]'\"").rstrip(".")
        if not name or name.lower() in _NOT_HOSTS or _ip_of(name) is not None or MASK_RE.search(name):
            return False
        self._add("host", name, _host_key(name))
        return True

    def add_user(self, name: str) -> bool:
        if not name or name.lower() in _COMMON_USERS or len(name) < 2 or MASK_RE.search(name):
            return False
        self._add("user", name)
        return True

    def add_root(self, root: str) -> None:
        """A folder (the one holding every input) shown as ``[inputs]``."""
        root = str(root).rstrip("/\\")
        if root and root.count("/") + root.count("\\") >= 1 and root not in self.roots:
            self.roots.append(root)
            self.roots.sort(key=len, reverse=True)
            self._version += 1

    def mask_of(self, kind: str, name: str) -> str:
        """The mask for ``name`` (registering it)."""
        if kind == "ip":
            addr = _ip_of(name)
            return f"[ip-{self._add('ip', name, str(addr) if addr is not None else name.lower())}]"
        if kind == "host":
            return f"[host-{self._add('host', name, _host_key(name))}]"
        return f"[{kind}-{self._add(kind, name)}]"

    def state(self) -> dict:
        """Everything it learned (raw names!): pass to :meth:`from_state` in another process, never show it."""
        out: dict[str, Any] = {"v": 1, "roots": list(self.roots), "tokens": sorted(self._tokens)}
        for k in KINDS:
            out[k] = [[name, self._ids[k][key]] for name, key in self._names[k].items()]
            out[k + "_keys"] = sorted(([key, n] for key, n in self._ids[k].items()), key=lambda kv: kv[1])
        return out

    @classmethod
    def from_state(cls, state: dict) -> Redactor:
        """A Redactor that masks like the one whose :meth:`state` this is (same numbers)."""
        r = cls(mask_local_host=False)
        for k in KINDS:
            for key, n in state.get(k + "_keys", []):
                r._ids[k][key] = int(n)
            by_n = {n: key for key, n in r._ids[k].items()}
            for name, n in state.get(k, []):
                key = by_n.get(int(n), name.lower())
                r._ids[k].setdefault(key, int(n))
                r._names[k][name.lower()] = key
        r._tokens = set(state.get("tokens", []))
        for root in state.get("roots", []):
            r.add_root(root)
        r._version += 1
        return r

    # --- learning ---------------------------------------------------------------------------------

    def learn(self, text) -> Redactor:
        """Collect the hosts, users, e-mails and addresses ``text`` names (nothing is masked)."""
        if isinstance(text, str) and text:
            self._run(text, learn_only=True)
        return self

    def learn_files(self, paths: Iterable[str], scan_bytes: int = 2 << 20) -> Redactor:
        """Learn from file names and the head and tail of each text file."""
        for p in paths:
            self.learn(str(p))
            text = _file_text(str(p), scan_bytes)
            if text:
                self.learn(text)
        return self

    # --- masking ----------------------------------------------------------------------------------

    def __call__(self, text):
        """Redact one string; anything else (None, NA, numbers) is returned unchanged."""
        if not isinstance(text, str) or not text:
            return text
        hit = self._cache.get(text)
        if hit is not None and self._cache.get("\0version") == self._version:
            return hit
        out = self._run(text, learn_only=False)
        if self._cache.get("\0version") != self._version:
            self._cache = {"\0version": self._version}
        if len(self._cache) < 200_000:
            self._cache[text] = out
        return out

    def value(self, v):
        """Redact a string, or the strings inside a tuple / list / dict; anything else unchanged."""
        if isinstance(v, str):
            return self(v)
        if isinstance(v, tuple):
            return tuple(self.value(x) for x in v)
        if isinstance(v, list):
            return [self.value(x) for x in v]
        if isinstance(v, dict):
            return {self.value(k): self.value(x) for k, x in v.items()}
        return v

    def scrub(self, text: str) -> str:
        """Mask only what it already knows (hosts, users, e-mails, addresses, tokens, roots), literally.

        A last pass over a finished document (HTML page, CLI output): no shape rules, so markup is
        not rewritten; ``<style>`` and ``<script>`` blocks and embedded images (``data:`` URIs) are
        left alone (denpex_nb writes no text there).
        """
        if not isinstance(text, str) or not text:
            return text
        rx = self._scrub_re()
        if rx is None:
            return text
        parts = _NOT_PROSE.split(text)
        for i in range(0, len(parts), 2):
            parts[i] = rx.sub(self._scrub_one, parts[i])
        return "".join(parts)

    # --- internals --------------------------------------------------------------------------------

    def _scrub_one(self, m) -> str:
        s = m.group(0)
        low = s.lower()
        for root in self.roots:
            if s == root:
                return INPUTS
        if s in self._tokens:
            return TOKEN
        for kind in ("email", "user", "ip", "host"):
            key = self._names[kind].get(low)
            if key is not None:
                return f"[{kind}-{self._ids[kind][key]}]"
        return s

    def _scrub_re(self):
        names = set(self.roots) | self._tokens
        for k in KINDS:
            names |= set(self._names[k])
        names = {n for n in names if len(n) >= 2}
        if not names:
            return None
        alts = "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
        return re.compile(rf"(?i)(?<![A-Za-z0-9])(?:{alts})(?![A-Za-z0-9])")

    def _known_res(self):
        if self._compiled is not None and self._compiled[0] == self._version:
            return self._compiled[1:]
        hosty = sorted((n for n in self._names["host"] if _hosty(n) or "[" in n), key=len, reverse=True)
        bare = sorted((n for n in self._names["host"] if not (_hosty(n) or "[" in n)), key=len, reverse=True)
        users = sorted(self._names["user"], key=len, reverse=True)
        alt = lambda ns: "|".join(re.escape(n) for n in ns)  # noqa: E731
        hosty_re = (
            re.compile(
                rf"(?i)(?<![A-Za-z0-9.-])(?:{alt(hosty)})(?![A-Za-z0-9])"
                r"(?!\.(?:py|cpp|cc|h|hpp|cu|c)\b)"
            )
            if hosty
            else None
        )
        bare_re = (
            re.compile(rf"(?i)(?<![\w.-])(?:{alt(bare)})(?![\w-])(?!\.(?:py|cpp|cc|h|hpp|cu|c)\b)") if bare else None
        )
        user_re = re.compile(rf"(?i)(?<![A-Za-z0-9])(?:{alt(users)})(?![A-Za-z0-9])") if users else None
        self._compiled = (self._version, hosty_re, bare_re, user_re)
        return self._compiled[1:]

    def _run(self, text: str, learn_only: bool) -> str:
        held: list[str] = []

        def hold(s: str) -> str:
            held.append(s)
            return chr(_PH_BASE + len(held) - 1)

        s = _PH_RE.sub("?", text)
        for root in self.roots:
            if root in s:
                s = re.sub(r"(?<![\w.-])" + re.escape(root) + r"(?=$|[/\\\s'\":,)\]])", lambda m: hold(INPUTS), s)
        s = _PROTECT.sub(lambda m: hold(m.group(0)), s)

        def token(m):
            self._tokens.add(m.group(0))
            return hold(TOKEN)

        # secrets first: what is a token is never learned as a host or a user
        def assign(m):
            self._tokens.add(m.group(3))
            return f"{m.group(1)}{m.group(2)}{hold(TOKEN)}{m.group(2)}"

        s = _BEARER.sub(lambda m: (self._tokens.add(m.group(2)), m.group(1) + hold(TOKEN))[1], s)
        s = _SECRET_ASSIGN.sub(assign, s)
        s = _SECRET_FLAG.sub(lambda m: (self._tokens.add(m.group(2)), m.group(1) + hold(TOKEN))[1], s)
        s = _URL_CRED.sub(lambda m: (self._tokens.add(m.group(2)), m.group(1) + hold(TOKEN) + "@")[1], s)
        s = _TOKEN_PREFIXED.sub(token, s)
        s = _UUID.sub(token, s)
        s = _LONG_HEX.sub(token, s)
        s = _LONG_B64.sub(lambda m: token(m) if _is_random(m.group(0)) else m.group(0), s)
        # people
        s = _EMAIL.sub(lambda m: hold(self.mask_of("email", m.group(0))), s)

        def home(m):
            user = m.group("user")
            if user.lower() in _COMMON_USERS:
                return m.group(0)
            self.add_user(user)
            return m.group("pre") + hold(self.mask_of("user", user))

        s = _HOME.sub(home, s)
        s = _TILDE.sub(
            lambda m: (
                "~" + hold(self.mask_of("user", m.group("user"))) if self.add_user(m.group("user")) else m.group(0)
            ),
            s,
        )
        # addresses (IPv6 first: a mapped ::ffff:a.b.c.d holds an IPv4)
        s = _IPV6.sub(lambda m: self._ipv6(m, hold), s)
        s = _IPV4.sub(lambda m: hold(self.mask_of("ip", m.group(0))) if _ip_of(m.group(0)) else m.group(0), s)
        # hosts: learn positions and shapes, then mask every known name
        self._learn_hosts(s)
        if learn_only:
            return text
        hosty_re, bare_re, user_re = self._known_res()
        if hosty_re is not None:
            s = hosty_re.sub(lambda m: hold(self.mask_of("host", m.group(0))), s)
        if bare_re is not None:
            s = bare_re.sub(lambda m: hold(self.mask_of("host", m.group(0))), s)
        if user_re is not None:
            s = user_re.sub(lambda m: hold(self.mask_of("user", m.group(0))), s)
        return _PH_RE.sub(lambda m: held[ord(m.group(0)) - _PH_BASE], s)

    def _ipv6(self, m, hold) -> str:
        cand = m.group(0)
        zone = ""
        if "%" in cand:
            cand, zone = cand.split("%", 1)
            zone = "%" + zone
        for c, rest in (
            (cand, ""),
            (cand.rstrip(".:"), cand[len(cand.rstrip(".:")) :]),
            *(((cand.rsplit(":", 1)[0], ":" + cand.rsplit(":", 1)[1]),) if ":" in cand else ()),
        ):
            if c.count(":") < 2 or (c == "::" and not m.string[max(0, m.start() - 1) : m.start()] == "["):
                continue
            addr = _ip_of(c)
            if isinstance(addr, ipaddress.IPv6Address):
                return hold(self.mask_of("ip", c) + (zone if not rest else "")) + rest + ("" if not rest else zone)
        return m.group(0)

    def _learn_hosts(self, s: str) -> None:
        for rx in _POSITIONS:
            for m in rx.finditer(s):
                name = m.group(1)
                if rx is _NODELIST:
                    self.add_host(name)
                elif _plausible_host(name):
                    self.add_host(name)
        for m in _PORT_HOST.finditer(s):
            name = m.group(2)
            if _plausible_host(name) and (m.group(1) or _hosty(name)):
                self.add_host(name)
        for rx in _SHAPES:
            for m in rx.finditer(s):
                name = m.group(0)
                if rx is _CLUSTER_HOST and not re.search(r"\d", name):
                    continue
                low = name.lower()
                if rx is _FQDN and (_public(low) or low.split(".", 1)[0] in _CODE_LABELS or _FILE_NAME.search(low)):
                    continue
                if _ip_of(name) is None:
                    self.add_host(name)


def hosts_in_text(text: str) -> set[str]:
    """Host names a text names by position or shape (NCCL prefixes, torchrun tables, host:port ...)."""
    r = Redactor(mask_local_host=False)
    r.learn(text)
    return r.hosts


def redact(text: str, hosts: Iterable[str] = ()) -> str:
    """One-shot redaction of a string (see :class:`Redactor`)."""
    r = Redactor(set(hosts))
    r.learn(text)
    return r(text)


# --- incidents, diagnoses, notebooks ---------------------------------------------------------------


def _file_text(name: str, scan_bytes: int) -> str:
    try:
        size = os.path.getsize(name)
        with open(name, "rb") as fh:
            head = fh.read(scan_bytes)
            tail = b""
            if size > 2 * scan_bytes:
                fh.seek(size - scan_bytes)
                tail = fh.read(scan_bytes)
    except OSError:
        return ""
    if b"\0" in head[:4096]:  # a binary dump (Flight Recorder pickle): its strings reach the frames
        return ""
    return (head + b"\n" + tail).decode("utf-8", errors="replace")


def _text_values(df) -> Iterable:
    """Every distinct text value of a frame's text columns (category, string, object), index included."""
    import pandas as pd

    for col in df.columns:
        s = df[col]
        if isinstance(s.dtype, pd.CategoricalDtype):
            yield from s.cat.categories
        elif s.dtype == object or isinstance(s.dtype, pd.StringDtype):
            for v in s.dropna():
                yield from _flat(v)
    if df.index.dtype == object:
        yield from df.index


def _flat(v):
    if isinstance(v, str):
        yield v
    elif isinstance(v, (tuple, list)):
        for x in v:
            yield from _flat(x)
    elif isinstance(v, dict):
        for k, x in v.items():
            yield from _flat(k)
            yield from _flat(x)


def common_root(files: list[str]) -> str | None:
    """The folder holding every input (None when that says nothing: ``/``, ``/tmp``, ``logs``)."""
    dirs = [os.path.dirname(f) for f in files if isinstance(f, str)]
    if not dirs or not all(dirs):
        return None
    try:
        root = os.path.commonpath(dirs)
    except ValueError:  # absolute and relative mixed, or different drives
        return None
    return root if root.count(os.sep) >= (2 if os.path.isabs(root) else 1) else None


def redactor_for(incident, diagnosis=None, scan_bytes: int = 2 << 20, mask_local_host: bool = True) -> Redactor:
    """A Redactor that has learned every host, user, e-mail and address the incident mentions.

    It learns, in this order: ``ranks.host`` (rank order, so ``[host-1]`` is rank 0's host), every
    text value of every frame, the notes, the file names and the head and tail ``scan_bytes`` of
    each input (readers need not keep what they parsed past), the diagnosis' text, and this
    machine's name. The folder holding every input becomes ``[inputs]``.
    """
    import pandas as pd

    r = Redactor(mask_local_host=False)
    if incident is not None:
        ranks = incident.ranks
        if "host" in ranks and len(ranks):
            order = ranks.sort_values("rank", na_position="last", kind="stable")
            for h in order["host"].astype(object).dropna():
                r.add_host(str(h))
        files: list[str] = []
        if len(incident.sources):
            files = [str(f) for f in incident.sources["file"].astype(object).dropna().unique()]
            root = common_root(files)
            if root:
                r.add_root(root)
        for f in fields(incident):
            v = getattr(incident, f.name)
            if isinstance(v, pd.DataFrame):
                for t in _text_values(v):
                    r.learn(t) if isinstance(t, str) else None
            else:
                for t in _flat(v):
                    r.learn(t)
        r.learn_files(files, scan_bytes)
    if diagnosis is not None:
        for t in _diagnosis_texts(diagnosis):
            r.learn(t)
    if mask_local_host:
        try:
            name = socket.gethostname()
        except OSError:  # pragma: no cover
            name = ""
        if name and name.lower() not in _NOT_HOSTS:
            r.add_host(name)
    return r


def _diagnosis_texts(d) -> Iterable[str]:
    import pandas as pd

    for f in d.findings:
        yield from _flat([f.summary, list(f.basis), f.pg, f.culprit_basis])
        for e in f.evidence:
            yield from _flat([e.file, e.text])
    yield from _flat(list(d.notes))
    yield from _flat(d.group_size_basis)
    if isinstance(d.rank_state, pd.DataFrame):
        yield from (t for t in _text_values(d.rank_state) if isinstance(t, str))


def redact_frame(df, r: Redactor):
    """A copy of a frame with every text value passed through ``r`` (dtypes kept)."""
    import pandas as pd

    out = df.copy()
    for col in out.columns:
        s = out[col]
        if isinstance(s.dtype, pd.CategoricalDtype):
            cats = list(s.cat.categories)
            new = [r.value(c) for c in cats]
            if new == cats:
                continue
            if len(set(map(repr, new))) == len(new):
                out[col] = s.cat.rename_categories(new)
            else:  # two names redact to the same mask: merge the categories
                out[col] = s.astype("object").map(lambda v: r.value(v) if isinstance(v, str) else v).astype("category")
        elif s.dtype == object or isinstance(s.dtype, pd.StringDtype):
            memo: dict = {}

            def one(v, memo=memo):
                if v is None or (not isinstance(v, (str, tuple, list, dict)) and pd.isna(v)):
                    return v
                try:
                    return memo[v]
                except (KeyError, TypeError):
                    pass
                res = r.value(v)
                try:
                    memo[v] = res
                except TypeError:
                    pass
                return res

            out[col] = pd.Series([one(v) for v in s.tolist()], index=s.index, dtype=s.dtype)
    if out.index.dtype == object:
        out.index = out.index.map(r.value)
    return out


def redact_incident(incident, redactor: Redactor | None = None):
    """A copy of the Incident with every text value of every frame, the notes and anything else redacted."""
    import pandas as pd

    r = redactor or redactor_for(incident)
    out = copy.copy(incident)
    for f in fields(incident):
        v = getattr(incident, f.name)
        if isinstance(v, pd.DataFrame):
            setattr(out, f.name, redact_frame(v, r))
        elif isinstance(v, (str, list, tuple, dict)):
            setattr(out, f.name, r.value(v))
    return out


#: Finding fields that are denpex_nb's own vocabulary, never text from the evidence
_OWN_FIELDS = {"class_id", "rule", "confidence", "seq_kind"}


def _redact_key(key, r: Redactor):
    """A finding's key ``class@counter:seq/pg <pg>``: only the process-group name can come from the evidence."""
    if not isinstance(key, str) or "/pg " not in key:
        return key
    head, pg = key.split("/pg ", 1)
    return f"{head}/pg {r(pg)}"


def _redact_dataclass(obj, r: Redactor):
    import pandas as pd

    changes = {}
    for f in fields(obj):
        if f.name in _OWN_FIELDS:
            continue
        if f.name == "consequence_of":
            changes[f.name] = _redact_key(getattr(obj, f.name), r)
            continue
        v = getattr(obj, f.name)
        if isinstance(v, pd.DataFrame):
            changes[f.name] = redact_frame(v, r)
        elif is_dataclass(v) and not isinstance(v, type):
            changes[f.name] = _redact_dataclass(v, r)
        elif isinstance(v, (tuple, list)) and any(is_dataclass(x) for x in v):
            changes[f.name] = type(v)(_redact_dataclass(x, r) if is_dataclass(x) else r.value(x) for x in v)
        elif isinstance(v, dict) and any(is_dataclass(x) for x in v.values()):
            changes[f.name] = {k: _redact_dataclass(x, r) if is_dataclass(x) else r.value(x) for k, x in v.items()}
        elif isinstance(v, (str, tuple, list, dict)):
            changes[f.name] = r.value(v)
    return replace(obj, **changes)


def redact_diagnosis(diagnosis, redactor: Redactor):
    """A copy of the Diagnosis: findings (summary, basis, evidence text and file, pg ...), notes, rank_state."""
    return _redact_dataclass(copy.copy(diagnosis), redactor)


#: outputs that carry no readable text: pictures and widget model ids
_SKIP_MIMES = ("image/", "application/vnd.jupyter.widget-view+json")


def redact_notebook(nb, redactor: Redactor):
    """Redact every text of a notebook in place: sources, outputs, tracebacks, metadata.

    Images are left alone: their base64 payload is not text a reader sees, and the pictures are
    drawn from already-redacted frames.
    """
    for cell in nb.cells:
        cell.source = redactor(cell.source)
        for out in cell.get("outputs", []):
            for key in ("text", "traceback", "evalue", "ename"):
                if key in out:
                    out[key] = redactor.value(out[key])
            data = out.get("data", {})
            for mime in list(data):
                if not mime.startswith(_SKIP_MIMES):
                    data[mime] = redactor.value(data[mime])
            if "metadata" in out:
                out["metadata"] = _redact_json(out["metadata"], redactor)
        if "metadata" in cell:
            cell["metadata"] = _redact_json(cell["metadata"], redactor)
    nb["metadata"] = _redact_json(nb.get("metadata", {}), redactor)
    return nb


def _redact_json(obj, r: Redactor):
    """Strings inside a JSON-like structure (a NotebookNode stays a NotebookNode)."""
    if isinstance(obj, str):
        return r(obj)
    if isinstance(obj, dict):
        for k in list(obj):
            obj[k] = _redact_json(obj[k], r)
        return obj
    if isinstance(obj, list):
        return [_redact_json(x, r) for x in obj]
    return obj
