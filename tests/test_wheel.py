"""vapipe installed the way users install it: the built wheel in a fresh virtual
environment, run from an empty directory.

Kept fast and offline: the wheel is built without build isolation (the test
environment has setuptools), and the fresh environment gets vapipe from the wheel
only (``--no-deps``); its dependencies are found through a path entry to the test
environment's site-packages (a plain path: the editable install of this checkout
there is not activated).  Models come from the directory the suite already uses.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest
import yaml

from tests.cli import ROOT

def _sources() -> list[str]:
    """What a wheel is built from (an sdist holds the same): the build files and the top-level
    folders of the packages pyproject.toml lists."""
    import tomllib

    packages = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    return ["pyproject.toml", "setup.py", "README.md", "pipelines.yaml",
            *sorted({p.split(".", 1)[0] for p in packages})]


SOURCES = _sources()


def _run(cmd: list[str | Path], cwd: Path, env: dict[str, str] | None = None,
         timeout: float = 180) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{' '.join(map(str, cmd))}: exit {proc.returncode}\n{proc.stderr[-3000:]}"
    return proc


def _site_packages(python: Path) -> Path:
    out = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                         capture_output=True, text=True, check=True)
    return Path(out.stdout.strip())


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel, built from a copy of the sources (the checkout gets no build/ or egg-info)."""
    pytest.importorskip("setuptools", minversion="77", reason="building the wheel needs setuptools >= 77 "
                        "(the test extra installs it)")
    src = tmp_path_factory.mktemp("src")
    for name in SOURCES:
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(path, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(path, src / name)
    out = tmp_path_factory.mktemp("dist")
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
          "--disable-pip-version-check", "--wheel-dir", out, src], cwd=src)
    wheels = list(out.glob("vapipe-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtual environment with the wheel installed; returns its ``bin`` directory."""
    root = tmp_path_factory.mktemp("venv")
    venv.EnvBuilder(with_pip=False).create(root)
    python = root / "bin" / "python"
    _run([sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "--no-index",
          "--disable-pip-version-check", wheel], cwd=root)
    deps = [sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]]
    (_site_packages(python) / "suite_dependencies.pth").write_text("\n".join(dict.fromkeys(deps)) + "\n")
    return root / "bin"


@pytest.fixture
def user_env(models_dir: Path) -> dict[str, str]:
    """A user's environment: no variables of this test session except the models."""
    keep = ("HOME", "LANG", "LC_ALL", "TMPDIR", "XDG_CACHE_HOME")
    env = {k: os.environ[k] for k in keep if k in os.environ}
    env["PATH"] = "/usr/bin:/bin"
    env["VAPIPE_MODELS_DIR"] = str(models_dir)
    return env


def test_the_wheel_holds_every_module_and_the_pipelines(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
    modules = {p.relative_to(ROOT).as_posix() for top in ("pipeline", "stages") for p in (ROOT / top).rglob("*.py")}
    assert modules - names == set(), "modules missing from the wheel (add their packages to pyproject.toml)"
    assert "pipeline/pipelines.yaml" in names


def test_the_wheel_runs_the_shipped_pipelines_from_an_empty_directory(installed: Path, user_env: dict[str, str],
                                                                      clip: Path, tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    code = _run([installed / "python", "-c", "import pipeline, stages; print(pipeline.__file__, stages.__file__)"],
                cwd=empty, env=user_env).stdout.split()
    site = _site_packages(installed / "python")
    assert all(Path(p).is_relative_to(site) for p in code), f"not imported from the wheel: {code}"

    shipped = site / "pipeline" / "pipelines.yaml"
    assert shipped.read_bytes() == (ROOT / "pipelines.yaml").read_bytes()
    header, *rows = _run([installed / "vapipe", "list"], cwd=empty, env=user_env).stdout.splitlines()
    assert header == f"# from {shipped} (shipped with vapipe)"
    expected = yaml.safe_load(shipped.read_text(encoding="utf-8"))["pipelines"]
    assert [r.split()[0] for r in rows] == list(expected)
    for row, body in zip(rows, expected.values()):
        assert row.endswith(body["description"])

    proc = _run([installed / "vapipe", "run", "persons", "--source", clip, "--max-frames", "20", "--json",
                 "--output", "out"], cwd=empty, env=user_env)
    summary = json.loads(proc.stdout)
    assert summary["error"] is None and summary["sources"][0]["frames"] == 20, summary
    jsonl = empty / "out" / f"{clip.stem}.jsonl"
    records = [json.loads(line) for line in jsonl.read_text(encoding="utf-8").splitlines()]
    assert [r["seq"] for r in records] == list(range(20))
    assert sorted(p.name for p in empty.iterdir()) == ["out"]


def test_the_installed_command_reads_another_file_when_told(installed: Path, user_env: dict[str, str],
                                                            tmp_path: Path) -> None:
    mine = tmp_path / "mine.yaml"
    mine.write_text("pipelines:\n  mine:\n    description: mine\n    stages:\n      - {name: decode, type: decode}\n",
                    encoding="utf-8")
    lines = _run([installed / "vapipe", "list"], cwd=tmp_path, env={**user_env, "VAPIPE_CONFIG": str(mine)}
                 ).stdout.splitlines()
    assert lines == [f"# from {mine} (VAPIPE_CONFIG)", "mine  mine"]
