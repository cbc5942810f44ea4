"""``denpex-nb diagnose``: human summary, the issue's JSON, exit 0 when it ran, 2 with one line on bad input."""

from __future__ import annotations

import json
import subprocess
import sys

from denpex_nb.cli import main


def write_trace(folder, world=2, odd_rank=1, steps=3):
    """denpex_nb.trace JSONL files (COMMON.md format) with an all_gather shape mismatch at the last seq."""
    folder.mkdir(parents=True, exist_ok=True)
    for r in range(world):
        lines = [
            {
                "v": 1,
                "event": "meta",
                "rank": r,
                "world_size": world,
                "pid": 100 + r,
                "host": "h",
                "backend": "gloo",
                "torch": "2.13.0",
            }
        ]
        for s in range(1, steps + 1):
            rows = 3 if (r == odd_rank and s == steps) else 5
            base = {
                "v": 1,
                "rank": r,
                "world_size": world,
                "pg": "0",
                "pg_desc": "default_pg",
                "seq": s,
                "op": "all_gather",
                "t_wall": 1764454060.0 + s + r * 0.001,
                "t_mono": 1.0 + s,
            }
            lines.append(
                {
                    **base,
                    "event": "issue",
                    "in_shapes": [[rows, 4]],
                    "out_shapes": [[rows, 4]] * world,
                    "dtypes": ["float32"],
                    "pid": 100 + r,
                    "host": "h",
                }
            )
            if s < steps or odd_rank < 0:  # a clean run's last collective returns too
                lines.append({**base, "event": "done"})
        (folder / f"denpex_trace_rank{r}.jsonl").write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    return folder


def test_json_output_is_the_issue_object(tmp_path, capsys):
    d = write_trace(tmp_path / "run", world=4, odd_rank=2)
    assert main(["diagnose", str(d), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["verdict"] == "shape-mismatch" and out["culprit_ranks"] == [2]
    f = out["findings"][0]
    assert (f["seq"], f["op"], f["culprit_ranks"]) == (3, "all_gather", [2])
    assert f["ranks"]["2"]["shapes"] == [[3, 4]]
    assert out["ranks_seen"] == [0, 1, 2, 3]
    assert out["lines"]["total"] >= out["lines"]["parsed"] > 0


def test_human_summary_and_exit_zero_whatever_the_verdict(tmp_path, capsys):
    d = write_trace(tmp_path / "run")
    assert main(["diagnose", str(d)]) == 0
    text = capsys.readouterr().out
    assert text.startswith("Diagnosis: shape-mismatch") and "fix:" in text
    clean = write_trace(tmp_path / "clean", odd_rank=-1)
    assert main(["diagnose", str(clean), "--quiet"]) == 0
    assert capsys.readouterr().out.startswith("Diagnosis: no-failure")
    stuck = write_trace(tmp_path / "stuck", odd_rank=-1)
    for f in stuck.glob("*.jsonl"):  # every rank issued its last collective, none returned
        f.write_text("".join(ln + "\n" for ln in f.read_text().splitlines()[:-1]))
    assert main(["diagnose", str(stuck), "--quiet"]) == 0
    assert capsys.readouterr().out.startswith("Diagnosis: timeout-undetermined")


def test_bad_input_is_one_line_and_exit_2(tmp_path):
    missing = tmp_path / "does-not-exist"
    p = subprocess.run(
        [sys.executable, "-m", "denpex_nb.cli", "diagnose", str(missing), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 2
    assert p.stdout == ""
    err = p.stderr.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert "does-not-exist" in err


def test_diagnosing_never_imports_torch_or_jupyter(tmp_path):
    d = write_trace(tmp_path / "run")
    code = (
        "import sys, denpex_nb as dx, denpex_nb.testing.frcompare\n"
        f"dx.diagnose(dx.load({str(d)!r}, progress=False))\n"
        "bad = [m for m in ('torch', 'papermill', 'jupyter_client', 'IPython') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]


def test_an_input_deep_in_a_long_path_keeps_the_reason_it_could_not_be_read(tmp_path, capsys):
    """The no-evidence summary quotes why each input could not be read; a long path is cut from its
    front so the reason stays whole (a reason cut to "permission den" told the user nothing)."""
    deep = tmp_path.joinpath(*(["a-rather-long-folder-name-of-a-job-run"] * 6))
    deep.mkdir(parents=True)
    blob = deep / "core.dat"
    blob.write_bytes(bytes(range(256)) * 40)
    assert main(["diagnose", str(blob), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)["findings"][0]["summary"]
    assert "binary file: not a text log or a Flight Recorder dump" in summary, summary
    assert "core.dat" in summary


def test_unreadable_or_alien_input_is_no_evidence_exit_0_and_a_missing_path_exit_2(tmp_path, capsys):
    alien = tmp_path / "app.log"
    alien.write_text("epoch 1 loss 0.5\nepoch 2 loss 0.4\n")
    blob = tmp_path / "core.dat"
    blob.write_bytes(bytes(range(256)) * 40)
    for path, what in ((alien, "2 of 2 lines matched no reader"), (blob, "binary file")):
        assert main(["diagnose", str(path), "--json"]) == 0
        captured = capsys.readouterr()
        out = json.loads(captured.out)
        assert out["verdict"] == "no-evidence" and out["culprit_ranks"] == []
        assert what in out["findings"][0]["summary"] and "Collect" in out["findings"][0]["summary"]
        assert captured.err == ""
    assert main(["diagnose", str(tmp_path / "nope.log")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "no such file or folder" in err
