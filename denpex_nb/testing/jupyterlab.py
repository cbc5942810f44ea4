"""A real JupyterLab in a real browser, for the tests and the explorer benchmark.

:class:`LabServer` starts ``jupyter lab`` on a free port with a token, rooted in a folder the
caller prepared (its own settings, workspaces and runtime folders inside it, so nothing of the
user's is read or written), and shuts it down through its REST API: every kernel, then the server,
then anything still alive in its process group. :func:`browser` drives the system Chromium through
Playwright's ``executable_path`` (nothing is downloaded). :class:`Notebook` is a page with one
notebook open: run all cells, find the explorer's widgets by their ``dx-*`` classes, operate them.

The library never imports this module (tests/test_architecture.py).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

#: where Debian and others put chromium
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome")


def chromium() -> str | None:
    """The system Chromium's path, or None."""
    for name in CHROMIUM_NAMES:
        found = shutil.which(name)
        if found:
            return found
    return "/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LabServer:
    """``jupyter lab`` serving ``root`` on 127.0.0.1 with a random token (use as a context manager)."""

    def __init__(self, root: Path, *, env: dict | None = None, start_timeout: float = 120.0):
        self.root = Path(root)
        self.port = free_port()
        self.token = secrets.token_hex(16)
        self.url = f"http://127.0.0.1:{self.port}"
        self.start_timeout = start_timeout
        self.env = dict(os.environ if env is None else env)
        self.env.pop("DENPEX_NB_HEADLESS", None)
        state = self.root / ".lab-state"
        for sub in ("runtime", "settings", "workspaces", "config"):
            (state / sub).mkdir(parents=True, exist_ok=True)
        self.env.update(
            JUPYTER_RUNTIME_DIR=str(state / "runtime"),
            JUPYTER_CONFIG_DIR=str(state / "config"),
            JUPYTERLAB_SETTINGS_DIR=str(state / "settings"),
            JUPYTERLAB_WORKSPACES_DIR=str(state / "workspaces"),
        )
        # every cell in the DOM (no virtual scrolling): what the test reads is what a person scrolls to
        tracker = state / "settings" / "@jupyterlab" / "notebook-extension"
        tracker.mkdir(parents=True, exist_ok=True)
        (tracker / "tracker.jupyterlab-settings").write_text(json.dumps({"windowingMode": "none"}))
        news = state / "settings" / "@jupyterlab" / "apputils-extension"
        news.mkdir(parents=True, exist_ok=True)  # no "get notified about news?" toast over the page
        (news / "notification.jupyterlab-settings").write_text(json.dumps({"fetchNews": "false"}))
        self.log = state / "server.log"
        self.proc: subprocess.Popen | None = None
        self.pids: set[int] = set()  # every process seen under the server (kernels too)

    def __enter__(self) -> LabServer:
        cmd = [
            sys.executable,
            "-m",
            "jupyterlab",
            "--no-browser",
            f"--port={self.port}",
            "--ip=127.0.0.1",
            f"--IdentityProvider.token={self.token}",
            f"--ServerApp.root_dir={self.root}",
            "--ServerApp.port_retries=0",
            "--LabApp.news_url=",
            "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
            "--LabServerApp.extension_manager=readonly",
            "--ServerApp.terminals_enabled=False",
        ]
        if hasattr(os, "geteuid") and os.geteuid() == 0:  # CI and containers run as root
            cmd.append("--allow-root")
        self._log_f = open(self.log, "wb")
        self.proc = subprocess.Popen(
            cmd, cwd=self.root, env=self.env, stdout=self._log_f, stderr=subprocess.STDOUT, start_new_session=True
        )
        self.pids.add(self.proc.pid)
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"jupyter lab exited with {self.proc.returncode}: {self.log_tail()}")
            try:
                self.api("GET", "/api/status")
                return self
            except OSError:
                time.sleep(0.3)
        self.close()
        raise RuntimeError(f"jupyter lab did not answer within {self.start_timeout:.0f} s: {self.log_tail()}")

    def __exit__(self, *exc) -> None:
        self.close()

    def log_tail(self, n: int = 3000) -> str:
        try:
            return self.log.read_text(errors="replace")[-n:]
        except OSError:
            return ""

    def api(self, method: str, path: str, body: dict | None = None, timeout: float = 10.0):
        req = urllib.request.Request(
            f"{self.url}{path}",
            method=method,
            data=None if body is None else json.dumps(body).encode(),
            headers={"Authorization": f"token {self.token}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=timeout) as r:
            raw = r.read()
        return json.loads(raw) if raw else None

    def lab_url(self, path: str) -> str:
        return f"{self.url}/lab/tree/{path}?token={self.token}"

    def remember_children(self) -> None:
        """Note every process under the server now (kernels), to check later that none is left."""
        try:
            import psutil
        except ImportError:
            return
        if self.proc is None:
            return
        try:
            self.pids |= {p.pid for p in psutil.Process(self.proc.pid).children(recursive=True)}
        except psutil.NoSuchProcess:
            pass

    def close(self, timeout: float = 30.0) -> None:
        """Shut every kernel down, then the server; kill what is left in its process group."""
        if self.proc is None:
            return
        self.remember_children()
        if self.proc.poll() is None:
            try:
                for k in self.api("GET", "/api/kernels") or []:
                    self.api("DELETE", f"/api/kernels/{k['id']}", timeout=timeout)
                self.api("POST", "/api/shutdown")
            except OSError:
                pass
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)  # its session: whatever the shutdown left
        except (ProcessLookupError, PermissionError):
            pass
        self.proc.wait(timeout=10)
        self._log_f.close()

    def kill(self) -> None:
        """The server dies without a word, as under the OOM killer or a lost node: SIGKILL to its
        process group and to every process seen under it (kernels run in sessions of their own),
        no shutdown request to anybody. A kernel killed so never runs its shutdown hooks."""
        if self.proc is None:
            return
        self.remember_children()
        for pid in sorted(self.pids - {self.proc.pid}):
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.proc.wait(timeout=10)
        self._log_f.close()
        self.proc = None  # close() has nothing left to do
        self._reap()

    def _reap(self, timeout: float = 10.0) -> None:
        """Wait until the killed processes are gone (the kernels are not our children: polled)."""
        deadline = time.monotonic() + timeout
        while self.alive() and time.monotonic() < deadline:
            time.sleep(0.2)

    def alive(self) -> list[int]:
        """Processes this server started that are still running (empty after :meth:`close`)."""
        try:
            import psutil
        except ImportError:
            return []
        out = []
        for pid in sorted(self.pids):
            try:
                p = psutil.Process(pid)
                if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                    out.append(pid)
            except psutil.NoSuchProcess:
                continue
        return out


@contextmanager
def browser(*, width: int = 1400, height: int = 1800):
    """A Playwright page in the system Chromium (headless); closed with its browser afterwards."""
    from playwright.sync_api import sync_playwright

    exe = chromium()
    if exe is None:
        raise RuntimeError("chromium is not installed")
    pw = sync_playwright().start()
    try:
        b = pw.chromium.launch(
            executable_path=exe,
            headless=True,
            args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking"],
        )
        try:
            page = b.new_page(viewport={"width": width, "height": height})
            yield page
        finally:
            b.close()
    finally:
        pw.stop()


_PICTURE_HASH_JS = """() => {
    const c = document.querySelector('.dx-explorer .dx-picture canvas');
    if (!c) return '';
    const d = c.toDataURL();
    let h = 0; for (let i = 0; i < d.length; i++) { h = (h * 31 + d.charCodeAt(i)) | 0; }
    return d.length + ':' + h;
}"""


class Notebook:
    """A JupyterLab page with one notebook open."""

    def __init__(self, page, server: LabServer, path: str, timeout_ms: int = 180_000):
        self.page, self.server, self.path, self.timeout = page, server, path, timeout_ms
        page.set_default_timeout(timeout_ms)
        page.goto(server.lab_url(path))
        page.wait_for_selector(".jp-NotebookPanel .jp-Notebook .jp-Cell")
        self.accept_dialogs(wait_s=5.0)
        self.wait_idle()

    def accept_dialogs(self, wait_s: float = 0.0) -> int:
        """Accept what JupyterLab asks (the kernel to start): returns how many dialogs were accepted."""
        n, deadline = 0, time.monotonic() + wait_s
        while True:
            button = self.page.locator(".jp-Dialog .jp-Dialog-button.jp-mod-accept")
            if button.count():
                button.first.click()
                n += 1
                self.page.wait_for_timeout(300)
                continue
            if time.monotonic() >= deadline:
                return n
            self.page.wait_for_timeout(250)

    def wait_idle(self) -> None:
        """Until the kernel is started and idle (the toolbar's kernel status says so)."""
        self.page.wait_for_function(
            """() => {
                const s = document.querySelector('.jp-NotebookPanel .jp-Notebook-ExecutionIndicator');
                return s && s.getAttribute('data-status') === 'idle';
            }"""
        )

    def menu(self, top: str, item: str) -> None:
        self.page.locator(".lm-MenuBar-itemLabel", has_text=top).first.click()
        self.page.locator(".lm-Menu-itemLabel", has_text=item).first.click()

    def run_all(self) -> float:
        """Run > Run All Cells; returns the seconds until every cell has run and the kernel is idle."""
        t0 = time.monotonic()
        self.accept_dialogs()
        self.menu("Run", "Run All Cells")
        self.accept_dialogs(wait_s=2.0)
        self.page.wait_for_function(
            """() => {
                const prompts = [...document.querySelectorAll('.jp-NotebookPanel .jp-CodeCell .jp-InputPrompt')];
                const s = document.querySelector('.jp-NotebookPanel .jp-Notebook-ExecutionIndicator');
                return prompts.length > 0 && prompts.every(p => /\\[\\d+\\]/.test(p.textContent))
                    && s && s.getAttribute('data-status') === 'idle';
            }"""
        )
        return time.monotonic() - t0

    def errors(self) -> list[str]:
        return self.page.locator(
            ".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']"
        ).all_inner_texts()

    # --- the explorer's widgets -----------------------------------------------------------------------

    def widget(self, name: str):
        return self.page.locator(f".dx-explorer .dx-{name}").first

    def text(self, name: str) -> str:
        return self.widget(name).inner_text()

    def select(self, name: str, label: str) -> None:
        self.widget(name).locator("select").select_option(label=label)

    def type_int(self, name: str, value: int) -> None:
        box = self.widget(name).locator("input")
        box.fill(str(value))
        box.press("Enter")

    def click(self, name: str) -> None:
        self.widget(name).locator("button").first.click() if self.widget(name).locator(
            "button"
        ).count() else self.widget(name).click()

    def wait_text(self, name: str, needle: str) -> float:
        """Seconds until widget ``name`` shows ``needle`` (checked in the page, every frame)."""
        t0 = time.monotonic()
        self.page.wait_for_function(
            "([sel, needle]) => { const e = document.querySelector(sel); return e && e.innerText.includes(needle); }",
            arg=[f".dx-explorer .dx-{name}", needle],
        )
        return time.monotonic() - t0

    def picture_hash(self) -> str:
        """A digest of the explorer's picture as drawn on its canvas (changes when the picture does)."""
        return self.page.evaluate(f"() => ({_PICTURE_HASH_JS})()")

    def wait_picture_settled(self, quiet_ms: int = 1200, timeout_ms: int = 60_000) -> str:
        """Until the picture has not changed for ``quiet_ms`` (its redraws arrive after the tables);
        returns its digest."""
        last, since, deadline = self.picture_hash(), time.monotonic(), time.monotonic() + timeout_ms / 1000
        while time.monotonic() < deadline:
            self.page.wait_for_timeout(200)
            now = self.picture_hash()
            if now != last:
                last, since = now, time.monotonic()
            elif (time.monotonic() - since) * 1000 >= quiet_ms:
                return now
        return last

    def wait_picture_change(self, old: str, timeout_ms: int = 30_000) -> str:
        """Until the picture differs from digest ``old``; returns the new digest."""
        self.page.wait_for_function(f"old => ({_PICTURE_HASH_JS})() !== old", arg=old, timeout=timeout_ms)
        return self.picture_hash()

    def choose_seq_latency(self, seq: int) -> float:
        """Seconds from committing ``seq`` in the seq box (its change event, as Enter fires) to the
        table of every rank at that seq on screen, measured inside the page (performance.now and a
        MutationObserver): the kernel round trip, the tables and the browser's update."""
        return self.page.evaluate(
            """([seq]) => new Promise((resolve, reject) => {
                const box = document.querySelector('.dx-explorer .dx-seq input');
                const table = document.querySelector('.dx-explorer .dx-at-seq');
                const needle = 'Every rank at seq ' + seq + ' ';
                const t0 = performance.now();
                const done = () => { obs.disconnect(); resolve((performance.now() - t0) / 1000); };
                const obs = new MutationObserver(() => { if (table.innerText.includes(needle)) done(); });
                obs.observe(table, {subtree: true, childList: true, characterData: true});
                setTimeout(() => { obs.disconnect(); reject(new Error('no answer within 60 s')); }, 60000);
                box.value = String(seq);  // what Enter in the box commits: its change event
                box.dispatchEvent(new Event('input', {bubbles: true}));
                box.dispatchEvent(new Event('change', {bubbles: true}));
            })""",
            [seq],
        )
