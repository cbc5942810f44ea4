"""The HTML report as a person sees it: headless Chromium renders it, the verdict and swimlane are there."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from ._nb_runs import rendered_report

CHROMIUM = (
    shutil.which("chromium")
    or shutil.which("chromium-browser")
    or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)
)

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (CI installs Debian's chromium)"),
]


def test_report_renders_in_headless_chromium_with_verdict_and_swimlane(tmp_path):
    pytest.importorskip("papermill")
    res = rendered_report()
    shot = tmp_path / "report.png"
    cmd = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--disable-dev-shm-usage",
        f"--user-data-dir={tmp_path / 'profile'}",
        "--window-size=1200,2400",
        f"--screenshot={shot}",
        "--dump-dom",
        res.html.resolve().as_uri(),
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        dom, err = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        import os
        import signal

        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail("chromium did not finish within 120 s")
    assert proc.returncode == 0, err[-2000:]
    # the rendered DOM (after the browser parsed it) holds the verdict and the swimlane image
    assert "Verdict:" in dom and res.summary["verdict"] in dom
    assert 'class="dx-verdict-id"' in dom or "class='dx-verdict-id'" in dom
    assert "Collective sequence" in dom or 'src="data:image/png;base64,' in dom
    assert dom.count('src="data:image/png;base64,') >= 2
    # the screenshot is a real picture, not a blank page
    png = shot.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 30_000
    from matplotlib.image import imread

    img = imread(str(shot))
    assert img.shape[0] >= 1000 and img[..., :3].std() > 0.05, "the screenshot looks blank"
