"""The install story: pyproject and environment.yml agree, the core needs no torch, the CLI fails cleanly."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import tomllib
import yaml

ROOT = Path(__file__).resolve().parents[1]
#: conda-forge spells some packages differently from PyPI
CONDA_TO_PIP = {"pytorch": "torch"}


def _name(req: str) -> str:
    return re.split(r"[<>=!~\[; ]", req.strip(), maxsplit=1)[0].lower().replace("_", "-")


def _pyproject_packages() -> set[str]:
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = {_name(r) for r in meta["dependencies"]}
    for reqs in meta["optional-dependencies"].values():
        names |= {_name(r) for r in reqs if not r.startswith("denpex_nb")}
    return names


def _environment_packages() -> tuple[set[str], list[str]]:
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    names, pip_lines = set(), []
    for dep in env["dependencies"]:
        if isinstance(dep, dict):
            pip_lines = dep["pip"]
            names |= {_name(p) for p in pip_lines if not p.startswith("-e")}
        else:
            n = _name(dep)
            if n not in {"python", "pip"}:
                names.add(CONDA_TO_PIP.get(n, n))
    return names, pip_lines


def test_environment_yml_lists_the_same_packages_as_pyproject():
    env_names, pip_lines = _environment_packages()
    assert env_names == _pyproject_packages()
    assert "-e .[all]" in pip_lines, "environment.yml must install the package itself with all extras"


def test_environment_yml_pins_python_311_from_conda_forge():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    assert env["channels"] == ["conda-forge"]
    assert "python=3.11" in env["dependencies"]


def test_core_import_needs_no_torch_and_no_jupyter():
    code = (
        "import sys, denpex_nb, denpex_nb.ingest, denpex_nb.analysis, denpex_nb.cli;"
        "bad = [m for m in ('torch', 'papermill', 'nbconvert', 'ipywidgets', 'jupyterlab') if m in sys.modules];"
        "print(bad); sys.exit(1 if bad else 0)"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stdout + res.stderr


def test_core_dependencies_exclude_torch():
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert "torch" not in {_name(r) for r in meta["dependencies"]}
    assert {_name(r) for r in meta["optional-dependencies"]["repro"]} == {"torch"}


def test_readme_quickstart_has_exactly_two_commands_and_pins_torch():
    readme = (ROOT / "README.md").read_text()
    quick = readme.split("## Quickstart", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```(?:bash|sh)?\n(.*?)```", quick, flags=re.S)
    commands = [ln for b in blocks for ln in b.splitlines() if ln.strip() and not ln.strip().startswith("#")]
    assert len(commands) == 2, commands
    for cmd in commands:
        assert "torch==2.13.0" in cmd, "a loose torch requirement pulls a multi-GB CUDA build"
    assert "denpex-nb demo" in commands[0]
    assert "pytest" in commands[1]


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    quick = readme.split("## Quickstart", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```(?:bash|sh)?\n(.*?)```", quick, flags=re.S)
    test_cmd = [ln for b in blocks for ln in b.splitlines() if "pytest" in ln][0].strip()
    assert test_cmd in (ROOT / ".ci" / "run").read_text()


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "denpex_nb.cli", *args], capture_output=True, text=True, timeout=120)


def test_cli_usage_error_is_one_line_exit_2():
    res = _cli("diagnose")
    assert res.returncode == 2
    assert "Traceback" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1


def test_cli_unknown_command_is_one_line_exit_2():
    res = _cli("frobnicate")
    assert res.returncode == 2
    assert "Traceback" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1


def test_version_is_written_once_and_the_cli_prints_it():
    import subprocess
    import sys
    from importlib.metadata import version

    import tomllib

    import denpex_nb

    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert denpex_nb.__version__ == version("denpex_nb") == declared
    out = subprocess.run([sys.executable, "-m", "denpex_nb.cli", "--version"], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == f"denpex-nb {declared}"
    src = (ROOT / "denpex_nb" / "__init__.py").read_text()
    assert declared not in src


def test_the_listed_packages_are_every_package_of_the_source_tree():
    """pyproject lists the packages (the notebooks are mapped in from ``notebooks/``): none forgotten."""
    import tomllib

    conf = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    on_disk = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "denpex_nb").rglob("__init__.py")} | {
        "denpex_nb.notebooks"
    }
    assert set(conf["packages"]) == on_disk
    assert (ROOT / conf["package-dir"]["denpex_nb.notebooks"]).is_dir()
